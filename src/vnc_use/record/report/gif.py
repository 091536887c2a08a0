"""The run as an animated GIF: each step's screenshot with its action drawn on it.

One frame per call (the screenshot the model saw, with the same marker as the HTML report and
a caption band), then a last frame with the final screen and the outcome. Drawn with Pillow.
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from vnc_use.record.report.describe import call_text, grid_pixels
from vnc_use.record.report.markers import Marker, arrow_head, marker_for, shaft_end
from vnc_use.record.report.model import RunView, StepView

__all__ = ["FRAME_MS", "render_gif"]

FRAME_MS = 1500
"""How long each step's frame shows; the last frame shows twice as long."""

Font = ImageFont.FreeTypeFont | ImageFont.ImageFont


def _font(size: float) -> Font:
    return ImageFont.load_default(size=max(8, round(size)))


def _draw_marker(img: Image.Image, m: Marker) -> None:
    draw = ImageDraw.Draw(img)
    u = m.unit
    stroke = max(2, round(0.35 * u))
    halo = stroke + max(2, round(0.3 * u))

    def line(a: tuple[float, float], b: tuple[float, float]) -> None:
        draw.line([a, b], fill="#ffffff", width=halo)
        draw.line([a, b], fill=m.color, width=stroke)

    def head(a: tuple[int, int], b: tuple[int, int]) -> None:
        draw.polygon(arrow_head(a, b, 2.4 * u), fill=m.color, outline="#ffffff")

    if m.drag_to and m.point:
        line(m.point, shaft_end(m.point, m.drag_to, 2.4 * u))
        head(m.point, m.drag_to)
    if m.scroll:
        line(m.scroll[0], shaft_end(*m.scroll, 2.4 * u))
        head(*m.scroll)
    if m.point:
        x, y = m.point
        r, arm = 1.6 * u, 3.2 * u
        draw.ellipse([x - r, y - r, x + r, y + r], outline="#ffffff", width=halo)
        draw.ellipse([x - r, y - r, x + r, y + r], outline=m.color, width=stroke)
        line((x - arm, y), (x - r / 2, y))
        line((x + r / 2, y), (x + arm, y))
        line((x, y - arm), (x, y - r / 2))
        line((x, y + r / 2), (x, y + arm))
        dot = stroke / 2 + 1
        draw.ellipse([x - dot, y - dot, x + dot, y + dot], fill=m.color)
    lx, ly = m.label_at
    _, height = m.label_size
    font = _font(m.font)
    width = draw.textlength(m.label, font=font) + m.font
    draw.rounded_rectangle([lx, ly, lx + width, ly + height], radius=m.font / 4, fill=m.color)
    draw.text((lx + m.font / 2, ly + height / 2), m.label, fill="#ffffff", font=font, anchor="lm")


def _caption(img: Image.Image, text: str) -> Image.Image:
    """The image with a dark band under it holding ``text``."""
    size = max(14, img.width // 70)
    band = round(size * 2)
    out = Image.new("RGB", (img.width, img.height + band), (24, 28, 36))
    out.paste(img, (0, 0))
    draw = ImageDraw.Draw(out)
    font = _font(size)
    limit = max(20, int(img.width / (size * 0.6)) - 2)
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    draw.text((size // 2, img.height + band // 2), shown, fill="#ffffff", font=font, anchor="lm")
    return out


def _step_caption(st: StepView, total: int) -> str:
    text = f"Step {st.step}/{total}: {call_text(st.name, st.args, sensitive=st.sensitive)}"
    targets = grid_pixels(st.args, st.pixels)
    if targets:
        text += " -> px " + " to ".join(f"({p[0]}, {p[1]})" for _, p in targets)
    if st.kind == "denied":
        text += "  [denied]"
    elif st.kind == "pending":
        text += "  [waiting for approval]"
    elif st.error:
        text += f"  [error: {st.error}]"
    return text


def _frame(view: RunView, sha: str | None) -> Image.Image | None:
    path = view.screenshot(sha)
    if path is None:
        return None
    with Image.open(path) as raw:
        rgb: Image.Image = raw.convert("RGB")
    return rgb


def _fit(img: Image.Image, max_width: int) -> Image.Image:
    if img.width <= max_width:
        return img
    height = round(img.height * max_width / img.width)
    return img.resize((max_width, height), Image.Resampling.LANCZOS)


def render_gif(view: RunView, out: Path, *, max_width: int = 960) -> int:
    """Write the run's animated GIF to ``out``; returns the number of frames (0: none written)."""
    frames: list[Image.Image] = []
    steps = view.steps
    for st in steps:
        img = _frame(view, st.before)
        if img is None:
            continue
        marker = marker_for(st)
        if marker is not None:
            _draw_marker(img, marker)
        frames.append(_fit(_caption(img, _step_caption(st, len(steps))), max_width))
    final = _frame(view, view.last_shot)
    if final is not None:
        outcome = view.status + (f": {view.final_text}" if view.final_text else "")
        if view.error:
            outcome += f" ({view.error})"
        frames.append(_fit(_caption(final, outcome), max_width))
    if not frames:
        return 0
    durations = [FRAME_MS] * (len(frames) - 1) + [FRAME_MS * 2]
    frames[0].save(
        out,
        format="GIF",
        save_all=True,
        append_images=frames[1:],
        duration=durations,
        loop=0,
        optimize=False,
    )
    return len(frames)
