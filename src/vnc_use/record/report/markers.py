"""What to draw on a screenshot for one call: shapes in the screenshot's own pixels.

An action's pixels are the real screen's; on a screenshot downscaled for the model they are
scaled to the image, so a marker lands on the element shown.

Markers come generically from the ``pixels`` of the action (``x``/``y``: a crosshair;
``destination_x``/``destination_y`` too: an arrow for a drag), from a scroll's ``direction``
(an arrow that way), and a caption with the action, the text it types and its intent. The HTML
report draws them as SVG over the image; the GIF draws the same shapes with Pillow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vnc_use.record.report.describe import marker_label
from vnc_use.record.report.model import StepView

__all__ = ["COLORS", "Marker", "arrow_head", "marker_for", "shaft_end"]

COLORS = {"action": "#ff1f6b", "denied": "#5f6673", "pending": "#ff9f0a"}
"""Marker colour by kind of step: executed, denied, waiting for approval."""

_DIRECTIONS = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}

Point = tuple[int, int]


@dataclass(frozen=True)
class Marker:
    """Shapes for one call, in pixels of a ``width`` x ``height`` screenshot."""

    width: int
    height: int
    color: str
    label: str
    point: Point | None = None
    """A crosshair: where the pointer went (click, type, hover, scroll, drag start)."""
    drag_to: Point | None = None
    """The end of a drag: an arrow from ``point`` to here."""
    scroll: tuple[Point, Point] | None = None
    """An arrow showing the scroll direction, from its first point to its second."""

    @property
    def unit(self) -> float:
        """The size unit of strokes and text: 1 % of the screenshot's longer side."""
        return max(self.width, self.height) / 100

    @property
    def font(self) -> float:
        """Caption font size (a monospace font: its width is 0.62 of this per character)."""
        return 1.5 * self.unit

    @property
    def label_size(self) -> tuple[float, float]:
        """Width and height of the caption's box."""
        return max(len(self.label), 1) * self.font * 0.62 + self.font, self.font * 1.6

    @property
    def label_at(self) -> Point:
        """Where the caption's top-left corner goes (beside the point, kept on the image)."""
        u = self.unit
        text_w, text_h = self.label_size
        if self.point is None:
            return int(u), int(u)
        x, y = self.point
        lx = x + int(2.6 * u)
        if lx + text_w > self.width:
            lx = max(0, int(x - 2.6 * u - text_w))
        ly = y + int(2.6 * u)
        if ly + text_h > self.height:
            ly = max(0, int(y - 2.6 * u - text_h))
        return lx, ly


def arrow_head(start: Point, end: Point, size: float) -> list[tuple[float, float]]:
    """The three corners of an arrow head at ``end`` of the line from ``start``."""
    dx, dy = end[0] - start[0], end[1] - start[1]
    length = math.hypot(dx, dy) or 1.0
    ux, uy = dx / length, dy / length
    bx, by = end[0] - ux * size, end[1] - uy * size
    half = size * 0.55
    return [(end[0], end[1]), (bx - uy * half, by + ux * half), (bx + uy * half, by - ux * half)]


def shaft_end(start: Point, end: Point, size: float) -> tuple[float, float]:
    """Where the line of an arrow stops: at the base of its head, so the tip stays sharp."""
    _, left, right = arrow_head(start, end, size)
    return (left[0] + right[0]) / 2, (left[1] + right[1]) / 2


def marker_for(step: StepView) -> Marker | None:
    """The marker of a step, or None when the screenshot's size is unknown."""
    if step.size is None:
        return None
    width, height = step.size
    # Pixels are the real screen's; a screenshot downscaled for the model is drawn on smaller.
    sw, sh = step.screen_size or step.size
    px = step.pixels

    def on_image(kx: str, ky: str) -> Point | None:
        if kx not in px or ky not in px:
            return None
        x = min(int(int(px[kx]) * width / sw), width - 1)
        return x, min(int(int(px[ky]) * height / sh), height - 1)

    point = on_image("x", "y")
    drag_to = on_image("destination_x", "destination_y") if point else None
    scroll = None
    direction = step.args.get("direction")
    if isinstance(direction, str) and direction.lower() in _DIRECTIONS:
        dx, dy = _DIRECTIONS[direction.lower()]
        origin = point or (width // 2, height // 2)
        gap = 3.6 * max(width, height) / 100 if point else 0.0  # clear of the crosshair
        length = 0.15 * min(width, height)

        def along(d: float) -> Point:
            return (
                min(max(int(origin[0] + dx * d), 0), width - 1),
                min(max(int(origin[1] + dy * d), 0), height - 1),
            )

        scroll = (along(gap), along(gap + length))
    label = marker_label(step.name, step.args, sensitive=step.sensitive)
    if step.kind == "denied":
        label = "denied: " + label
    elif step.kind == "pending":
        label = "awaiting approval: " + label
    return Marker(
        width=width,
        height=height,
        color=COLORS[step.kind],
        label=label,
        point=point,
        drag_to=drag_to,
        scroll=scroll,
    )
