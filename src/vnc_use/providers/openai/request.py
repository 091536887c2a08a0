"""What the OpenAI Responses API is sent: vnc-use's history as ``input`` items, replayed whole.

Conversation state is **stateless replay** (``store: false``, ``include:
["reasoning.encrypted_content"]``, the SDK helper's way): every request carries the task, then
each model turn's output items exactly as received (reasoning with its encrypted content,
``computer_call`` items, messages with their ``phase``), each answered by one
``computer_call_output``. Nothing of the desktop is stored at OpenAI, and a run resumed after
a crash rebuilds the same request from its own checkpointed history.

- the task: a ``user`` message, with the first screenshot as an ``input_image`` when there is
  one (``detail: "original"``);
- a ``computer_call``'s answer: ``computer_call_output`` with the screenshot taken after its
  last action (``computer_screenshot``, PNG data URL, ``detail: "original"``), and
  ``acknowledged_safety_checks`` echoing its ``pending_safety_checks`` when a person approved
  them; actions that failed or did not run are told in a ``user`` message after the outputs;
- screenshots above :data:`MAX_PIXELS` (10.24 MP, what ``detail: "original"`` keeps) are
  downscaled, keeping the aspect ratio; the model's pixels are read against the size sent;
- only the last ``keep_screenshots`` turns with a screenshot keep it (at least the latest,
  which answers the pending call). An older computer call cannot go without its screenshot
  (the API wants an image in every ``computer_call_output``), so that turn's items are left out
  whole -- reasoning, call and output -- and a ``user`` note names the actions it ran.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from PIL import Image

from vnc_use.desktops.png import encode_png, screen_size_of
from vnc_use.errors import PlannerError
from vnc_use.providers.base import HistoryRecord, LoadPng

__all__ = [
    "DETAIL",
    "MAX_PIXELS",
    "Built",
    "ImageCache",
    "build",
    "call_id_of",
    "result_id",
    "sent_size",
]

MAX_PIXELS = 10_240_000
"""The most pixels ``detail: "original"`` keeps (OpenAI's computer-use guide)."""

DETAIL = "original"
"""The ``detail`` every screenshot is sent with (the guide: prefer ``original``)."""

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

ImageCache = dict[str, tuple[str, tuple[int, int], tuple[int, int]]]
"""Screenshot sha256 -> (data URL as sent, (width, height) sent, real screen size)."""


def result_id(call_id: str, index: int) -> str:
    """The id of the ``index``-th vocabulary call of ``computer_call`` ``call_id``."""
    return f"{call_id}/{index}"


def call_id_of(result_id_: str | None) -> str | None:
    """The ``call_id`` a vocabulary call's id belongs to."""
    return result_id_.rpartition("/")[0] or None if result_id_ else None


def sent_size(width: int, height: int, max_pixels: int = MAX_PIXELS) -> tuple[int, int]:
    """The size a ``width`` x ``height`` screenshot is sent at: as it is up to ``max_pixels``,
    else scaled down (aspect ratio kept) to fit."""
    if width * height <= max_pixels:
        return width, height
    scale = math.sqrt(max_pixels / (width * height))
    return max(1, math.floor(width * scale)), max(1, math.floor(height * scale))


@dataclass(frozen=True)
class Built:
    """A request's ``input`` items, and what its answer's pixels are read against."""

    items: list[dict[str, Any]]
    image_size: tuple[int, int] | None
    """(width, height) of the latest screenshot as sent; None: none sent yet."""
    screen_size: tuple[int, int] | None
    """The real screen that screenshot shows."""
    images: int


class _Images:
    """Screenshots as data URLs, downscaled and encoded once (by sha256)."""

    def __init__(self, load_png: LoadPng, max_pixels: int, cache: ImageCache) -> None:
        self.load_png = load_png
        self.max_pixels = max_pixels
        self.cache = cache
        self.used: set[str] = set()

    def get(self, sha: str) -> tuple[str, tuple[int, int], tuple[int, int]]:
        self.used.add(sha)
        if sha not in self.cache:
            png = self.load_png(sha)
            if not png.startswith(_PNG_MAGIC):
                raise PlannerError(f"Screenshot {sha} is not a PNG.")
            screen = screen_size_of(png)
            with Image.open(io.BytesIO(png)) as image:
                size = sent_size(image.size[0], image.size[1], self.max_pixels)
                if size != image.size:
                    small = image.convert("RGB").resize(size, Image.Resampling.LANCZOS)
                    png = encode_png(small)
            url = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
            self.cache[sha] = (url, size, screen)
        return self.cache[sha]


def _user(text: str, image_url: str | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "input_text", "text": text}]
    if image_url is not None:
        content.append({"type": "input_image", "image_url": image_url, "detail": DETAIL})
    return {"role": "user", "content": content}


def _screenshot_of(turn: HistoryRecord) -> str | None:
    if "responses" not in turn:
        sha = turn.get("screenshot")
        return sha if isinstance(sha, str) and sha else None
    shots = [r.get("screenshot") for r in turn["responses"] if r.get("screenshot")]
    return shots[-1] if shots else None


def _is_model(turn: HistoryRecord) -> bool:
    return bool(turn.get("turn", turn.get("role")) == "model")


def _results_by_call(results: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for result in results:
        call_id = call_id_of(result.get("id"))
        if call_id:
            grouped.setdefault(call_id, []).append(result)
    return grouped


def _problems(call_id: str, results: Sequence[Mapping[str, Any]], count: int) -> list[str]:
    lines = [
        f"computer call {call_id}: {r.get('name')} failed: {r['error']}"
        for r in results
        if r.get("error")
    ]
    if len(results) < count:
        lines.append(f"computer call {call_id}: {count - len(results)} of its actions did not run.")
    lines += [str(r["note"]) for r in results if r.get("note")]
    return lines


def _answers(
    record: Mapping[str, Any], results: Sequence[Mapping[str, Any]], fallback: str | None
) -> tuple[list[dict[str, Any]], list[str], str | None]:
    """The ``computer_call_output`` of every call of a model turn, the problems to tell, and
    the screenshot that answers the last call."""
    grouped = _results_by_call(results)
    outputs: list[dict[str, Any]] = []
    lines: list[str] = []
    shot = fallback
    for call in record.get("calls", []):
        call_id = str(call["call_id"])
        mine = grouped.get(call_id, [])
        shots = [r["screenshot"] for r in mine if r.get("screenshot")]
        shot = shots[-1] if shots else shot
        output: dict[str, Any] = {"type": "computer_call_output", "call_id": call_id}
        checks = call.get("checks") or []
        if checks and any(r.get("approved") for r in mine):
            output["acknowledged_safety_checks"] = [dict(c) for c in checks]
        outputs.append(output)
        lines += _problems(call_id, mine, int(call.get("count", 0)))
    return outputs, lines, shot


def _summary(record: Mapping[str, Any], results: Sequence[Mapping[str, Any]]) -> str:
    names = [str(r.get("name")) for r in results]
    return (
        "An earlier step (its screenshot is no longer sent): you ran "
        + (", ".join(names) if names else "no action")
        + "."
    )


def build(
    history: Sequence[HistoryRecord],
    load_png: LoadPng,
    keep_screenshots: int,
    cache: ImageCache | None = None,
    max_pixels: int = MAX_PIXELS,
) -> Built:
    """The request's ``input`` for ``history`` (see the module docstring).

    ``cache`` (kept by the caller between requests) spares downscaling and encoding a
    screenshot again; afterwards it holds only the screenshots this request used.
    """
    images = _Images(load_png, max_pixels, {} if cache is None else cache)
    shots = [i for i, t in enumerate(history) if _screenshot_of(t)]
    inline = set(shots[-max(1, keep_screenshots) :])
    items: list[dict[str, Any]] = []
    last: tuple[str, tuple[int, int], tuple[int, int]] | None = None
    for i, turn in enumerate(history):
        if _is_model(turn):
            continue  # replayed with the turn that answers it
        sha = _screenshot_of(turn)
        if "responses" not in turn:
            image = images.get(sha) if sha and i in inline else None
            last = image or last
            items.append(_user(str(turn.get("text", "")), image[0] if image else None))
            continue
        record = history[i - 1]["content"] if i and _is_model(history[i - 1]) else {}
        results = turn["responses"]
        if i not in inline:
            items.append(_user(_summary(record, results)))
            continue
        outputs, lines, shot = _answers(record, results, sha)
        if shot is None:
            raise PlannerError("No screenshot to answer the model's computer call with.")
        last = images.get(shot)
        for output in outputs:
            output["output"] = {
                "type": "computer_screenshot",
                "image_url": last[0],
                "detail": DETAIL,
            }
        items += [dict(item) for item in record.get("output", [])]
        items += outputs
        if lines:
            items.append(_user("\n".join(lines)))
    for sha in set(images.cache) - images.used:
        del images.cache[sha]
    return Built(
        items,
        last[1] if last else None,
        last[2] if last else None,
        len(images.used),
    )


def _replayable(item: Mapping[str, Any]) -> dict[str, Any]:
    """An output item as it is replayed: as received, except that a ``double_click`` action
    keeps its ``keys`` (the input type requires the field, ``null`` allowed; the response was
    read without its ``null`` values)."""
    kept = dict(item)
    if kept.get("type") == "computer_call" and isinstance(kept.get("actions"), list):
        kept["actions"] = [
            {"keys": None, **a} if isinstance(a, dict) and a.get("type") == "double_click" else a
            for a in kept["actions"]
        ]
    return kept


def turn_record(
    output: Sequence[Mapping[str, Any]],
    calls: Sequence[Mapping[str, Any]],
    image_size: tuple[int, int] | None,
) -> dict[str, Any]:
    """The planner's opaque record of a model turn (JSON-able, kept in the history)::

        {"output": [...the response's output items, as received...],
         "calls": [{"call_id": "call_1", "count": 4, "checks": [{"id", "code", "message"}]}],
         "image_size": [2880, 1800]}

    ``output`` is replayed verbatim; ``calls`` says how many vocabulary calls each
    ``computer_call`` became and which safety checks it carried.
    """
    return {
        "output": [_replayable(item) for item in output],
        "calls": [dict(c) for c in calls],
        "image_size": list(image_size) if image_size else None,
    }
