"""What Claude is sent: the history as Messages API ``messages``, the tool entry, the images.

- the task: a ``user`` message, the text first and then the screenshot (Anthropic's tip:
  instructions before the image click more accurately);
- a model turn: the ``assistant`` content exactly as the API sent it (thinking blocks
  included: they must come back unmodified);
- the results of a turn: one ``user`` message holding one ``tool_result`` per ``tool_use`` of
  the turn, in order, every one answered (toolset results echo ``toolset_name: "computer"`` and
  hold only text and images); the screenshot after the batch goes on the last result (after
  the results as an image block when that result is an error); ``zoom`` answers with a
  full-resolution crop of its region, ``cursor_position`` with ``X=..,Y=..``; a call that did
  not run is ``is_error`` with the SDK's words.

Screenshots are resized to the model's limits (:func:`.versions.fit`) and encoded once per
screenshot; coordinates come back in pixels of the latest image sent (:class:`Built`).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from PIL import Image

from vnc_use.desktops.png import encode_png
from vnc_use.errors import PlannerError
from vnc_use.providers.anthropic.translate import NOT_EXECUTED, ack_text
from vnc_use.providers.anthropic.versions import TOOLSET, ImageLimits, ToolChoice, fit
from vnc_use.providers.base import HistoryRecord, LoadPng

__all__ = [
    "NOT_EXECUTED",
    "SYSTEM_PROMPT",
    "Built",
    "ImageCache",
    "build",
    "declined_text",
    "tool_entry",
]

SYSTEM_PROMPT = (
    "You operate a desktop computer through a VNC connection, with the computer tool. Take a "
    "screenshot when you need to see the screen. When the task is done, answer with a short "
    "summary and no tool call."
)
OMITTED = "(screenshot omitted to save context)"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def declined_text(member: str) -> str:
    """The SDK helper's answer to a member the person did not allow (``ConfirmDeclinedError``
    of ``anthropic.lib.tools._toolsets._errors``)."""
    return (
        f"The user did not grant permission to run '{member}'. Do not retry it unless the user "
        "asks you to."
    )


ImageCache = dict[str, tuple[str, tuple[int, int]]]
"""Screenshot sha256 -> (base64 PNG as sent, (width, height) sent)."""


@dataclass(frozen=True)
class Built:
    """A request's messages and tool entry, and what its answer is read against."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    image_size: tuple[int, int] | None
    """(width, height) of the latest screenshot as sent; None: none yet."""
    pointer: tuple[float, float] | None
    """The pointer after the last model turn, as fractions of the screen."""
    images: int


class _Images:
    def __init__(self, load_png: LoadPng, limits: ImageLimits, cache: ImageCache) -> None:
        self.load_png = load_png
        self.limits = limits
        self.cache = cache
        self.used: set[str] = set()

    def _load(self, sha: str) -> bytes:
        png = self.load_png(sha)
        if not png.startswith(_PNG_MAGIC):
            raise PlannerError(f"Screenshot {sha} is not a PNG.")
        return png

    def get(self, sha: str) -> tuple[str, tuple[int, int]]:
        self.used.add(sha)
        if sha not in self.cache:
            png = self._load(sha)
            with Image.open(io.BytesIO(png)) as image:
                size = fit(image.width, image.height, self.limits)
                if size != image.size:
                    resized = image.convert("RGB").resize(size, Image.Resampling.BICUBIC)
                    png = encode_png(resized)
            self.cache[sha] = (base64.b64encode(png).decode("ascii"), size)
        return self.cache[sha]

    def zoom(self, sha: str, region: Sequence[float], fit_in: tuple[int, int]) -> str:
        """The region (fractions of the screen) cropped from the full-resolution screenshot,
        scaled to fit within ``fit_in`` with its aspect ratio kept."""
        with Image.open(io.BytesIO(self._load(sha))) as image:
            w, h = image.size
            box = (
                int(region[0] * w),
                int(region[1] * h),
                max(int(region[0] * w) + 1, round(region[2] * w)),
                max(int(region[1] * h) + 1, round(region[3] * h)),
            )
            crop = image.convert("RGB").crop(box)
        scale = min(fit_in[0] / crop.width, fit_in[1] / crop.height)
        size = (max(1, int(crop.width * scale)), max(1, int(crop.height * scale)))
        return base64.b64encode(encode_png(crop.resize(size, Image.Resampling.BICUBIC))).decode()


def _image(data: str) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_entry(choice: ToolChoice, size: tuple[int, int] | None) -> dict[str, Any]:
    """The tool the model gets: the toolset (no display size: coordinates are pixels of the
    images sent) or a legacy tool declaring the size of the images sent."""
    if choice.version == TOOLSET:
        return {"type": TOOLSET}
    if size is None:
        raise PlannerError(
            f"{choice.version} needs the display size before the first request; keep the "
            "initial screenshot on (leave out --no-initial-screenshot) or use the toolset."
        )
    entry: dict[str, Any] = {
        "type": choice.version,
        "name": "computer",
        "display_width_px": size[0],
        "display_height_px": size[1],
    }
    if choice.version == "computer_20251124":
        entry["enable_zoom"] = True
    return entry


def _screenshot_of(turn: HistoryRecord) -> str | None:
    if "responses" not in turn:
        sha = turn.get("screenshot")
        return sha if isinstance(sha, str) and sha else None
    shots = [r.get("screenshot") for r in turn["responses"] if r.get("screenshot")]
    return shots[-1] if shots else None


def _group(results: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for r in results:
        grouped.setdefault(str(r.get("id")), []).append(r)
    return grouped


class _Answers:
    """The ``tool_result`` blocks answering one model turn."""

    def __init__(self, images: _Images, inline: bool, size: tuple[int, int] | None) -> None:
        self.images = images
        self.inline = inline
        self.size = size
        self.count = 0

    def one(
        self, reply: Mapping[str, Any], results: list[Mapping[str, Any]], last: bool
    ) -> dict[str, Any]:
        member = str(reply.get("member"))
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": reply["id"]}
        if reply.get("toolset"):
            block["toolset_name"] = "computer"
        errors = [str(r["error"]) for r in results if r.get("error")]
        if not results:
            block.update(is_error=True, content=[_text(NOT_EXECUTED)])
        elif errors:
            said = errors[0] if errors[0] == NOT_EXECUTED else f"Error: {errors[0]}"
            block.update(is_error=True, content=[_text(said)])
        elif reply.get("cursor") is not None:
            x, y = reply["cursor"]
            block["content"] = [_text(f"X={round(x)},Y={round(y)}")]
        elif reply.get("zoom") is not None and results[-1].get("screenshot"):
            if self.inline and self.size is not None:
                crop = self.images.zoom(str(results[-1]["screenshot"]), reply["zoom"], self.size)
                block["content"] = [_image(crop)]
                self.count += 1
            else:
                block["content"] = [_text(OMITTED)]
        elif member == "screenshot" and not last and results[-1].get("screenshot"):
            # a screenshot inside a batch: the screen at that moment (the last block of the
            # batch gets the screen after it)
            if self.inline:
                block["content"] = [_image(self.images.get(str(results[-1]["screenshot"]))[0])]
                self.count += 1
            else:
                block["content"] = [_text(OMITTED)]
        else:
            block["content"] = [_text(ack_text(member, reply.get("args") or {}))]
        notes = [str(r["note"]) for r in results if r.get("note")]
        if notes:
            block["content"].append(_text(notes[-1]))
        return block

    def turn(
        self, record: Mapping[str, Any], results: Sequence[Mapping[str, Any]], shot: str | None
    ) -> list[dict[str, Any]]:
        grouped = _group(results)
        replies = list(record.get("replies", []))
        blocks = [
            self.one(r, grouped.get(str(r["id"]), []), n == len(replies) - 1)
            for n, r in enumerate(replies)
        ]
        if not blocks:
            return blocks
        last = blocks[-1]
        if shot is None:
            return blocks
        if not self.inline:
            if not last.get("is_error"):
                last["content"].append(_text(OMITTED))
            return blocks
        image = _image(self.images.get(shot)[0])
        self.count += 1
        if last.get("is_error"):
            blocks.append(image)  # after every tool_result: allowed, and the model sees it
        else:
            last["content"].append(image)
        return blocks


def _add_user(messages: list[dict[str, Any]], content: list[Any], *, person: bool) -> None:
    """A user message; a person's turn right after the results (or the task) joins that
    message, the tool results first (the roles alternate)."""
    if person and messages and messages[-1]["role"] == "user":
        messages[-1]["content"].extend(content)
    else:
        messages.append({"role": "user", "content": content})


def build(
    history: Sequence[HistoryRecord],
    load_png: LoadPng,
    keep_screenshots: int,
    choice: ToolChoice,
    cache: ImageCache | None = None,
) -> Built:
    """The request for ``history`` (see the module docstring); ``cache`` (kept by the caller)
    spares resizing and encoding a screenshot again."""
    if keep_screenshots < 0:
        raise ValueError(f"keep_screenshots must be >= 0, got {keep_screenshots}")
    images = _Images(load_png, choice.limits, {} if cache is None else cache)
    shots = [(i, sha) for i, t in enumerate(history) if (sha := _screenshot_of(t))]
    inline = {i for i, _ in shots[-keep_screenshots:]} if keep_screenshots else set()
    image_size = images.get(shots[-1][1])[1] if shots else None
    if image_size is None and history:
        screen = history[0].get("screen_size")
        if screen:
            image_size = fit(int(screen[0]), int(screen[1]), choice.limits)
    messages: list[dict[str, Any]] = []
    record: Mapping[str, Any] = {}
    pointer: tuple[float, float] | None = None
    count = 0
    for i, turn in enumerate(history):
        sha = _screenshot_of(turn)
        if turn.get("turn", turn.get("role")) == "model":
            record = turn["content"]
            messages.append({"role": "assistant", "content": list(record["content"])})
            if record.get("pointer"):
                pointer = (float(record["pointer"][0]), float(record["pointer"][1]))
            continue
        answers = _Answers(images, i in inline, image_size)
        if "responses" in turn:
            content = answers.turn(record, turn["responses"], sha)
        else:
            content = answers.turn(record, [], None)  # a turn cut short: every block answered
            content.append(_text(str(turn.get("text", ""))))
            if sha and i in inline:
                content.append(_image(images.get(sha)[0]))
                count += 1
        count += answers.count
        record = {}
        _add_user(messages, content, person=bool(turn.get("person")))
    for sha in set(images.cache) - images.used:
        del images.cache[sha]
    return Built(messages, [tool_entry(choice, image_size)], image_size, pointer, count)
