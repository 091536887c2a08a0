"""What an OpenAI-compatible model is sent: the history as chat messages, images and replies.

- the system message is the dialect's (:meth:`~.dialects.base.Dialect.system_prompt`);
- the task is a ``user`` message: text and, when it is among the last ``keep_screenshots``,
  the screenshot as a PNG data URL;
- a model turn is replayed as the ``assistant`` message the model sent (kept whole in the
  turn record, :func:`turn_record`);
- the results of a turn: one text-only ``tool`` message per native ``tool_call_id`` of that
  assistant message (a call that did not run is answered "Not run"), so every id is answered
  before the next ``user`` message; then a ``user`` message with the results of the calls that
  came as text (``<tool_call>`` blocks, UI-TARS actions) and the screenshot after the last call.

Images never go into ``tool`` messages (the SDK types them text-only; strict servers refuse).
For pixel dialects each screenshot is resized with the family's rule first
(:mod:`.resize`); :class:`Built` says the size sent, which the answer is read against.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vnc_use.errors import PlannerError
from vnc_use.providers.base import HistoryRecord, LoadPng
from vnc_use.providers.openai_compat import resize
from vnc_use.providers.openai_compat.dialects.base import Dialect, GridCall

__all__ = [
    "Built",
    "ImageCache",
    "build",
    "feedback",
    "request_json",
    "result_text",
    "turn_record",
]

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NOT_RUN = "Not run."
"""The answer to a native tool call that did not run (a finish next to actions, say)."""


@dataclass(frozen=True)
class Built:
    """A request's messages, and what its answer is read against."""

    messages: list[dict[str, Any]]
    image_size: tuple[int, int] | None
    """(width, height) of the latest screenshot as sent (after any resize); None: none yet."""
    pointer: tuple[int, int] | None
    """The last grid point a call that ran sent the pointer to."""
    images: int
    """How many images the messages hold."""


def turn_record(
    dialect: str,
    message: Mapping[str, Any],
    calls: Sequence[GridCall],
    image_size: tuple[int, int] | None,
) -> dict[str, Any]:
    """The planner's opaque record of a model turn (JSON-able, kept in the history)::

        {"dialect": "ui-tars",
         "message": {"role": "assistant", "content": ..., "tool_calls": [...]},
         "calls": [{"id": ..., "name": "click", "args": {"x": 500, "y": 500, "intent": ...}}],
         "image_size": [1428, 896]}

    ``message`` is replayed to the model as it sent it; ``calls`` are its grid translation
    (for the pointer); ``image_size`` is the size of the screenshot its coordinates refer to.
    """
    kept: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        kept["tool_calls"] = [dict(tc) for tc in message["tool_calls"]]
    return {
        "dialect": dialect,
        "message": kept,
        "calls": [{"id": c.source_id, "name": c.name, "args": dict(c.args)} for c in calls],
        "image_size": list(image_size) if image_size else None,
    }


def result_text(result: Mapping[str, Any]) -> str:
    """One call's result in words: ``click: done`` or ``click: error: ...``."""
    name = result.get("name", "call")
    note = f" ({result['note']})" if result.get("note") else ""
    if result.get("error"):
        return f"{name}: error: {result['error']}{note}"
    if result.get("output") is not None:
        return f"{name}: {result['output']}{note}"
    return f"{name}: done{note}"


def feedback(message: Mapping[str, Any], error: str) -> list[dict[str, Any]]:
    """Messages that answer an unusable reply: the reply itself, a text ``tool`` message per
    native call id, then a ``user`` message naming the problem (sent on the retry)."""
    reply = turn_record("", message, [], None)["message"]
    out: list[dict[str, Any]] = [reply]
    for tc in reply.get("tool_calls", []):
        out.append({"role": "tool", "tool_call_id": tc.get("id"), "content": f"Error: {error}"})
    out.append(
        {
            "role": "user",
            "content": f"Your last answer could not be used: {error} "
            "Answer again in the required format.",
        }
    )
    return out


ImageCache = dict[str, tuple[str, tuple[int, int]]]
"""Screenshot sha256 -> (data URL as sent, (width, height) sent)."""


class _Images:
    """Screenshots as data URLs, resized and encoded once (by sha256), noting which are used."""

    def __init__(
        self, load_png: LoadPng, limits: resize.PixelLimits | None, cache: ImageCache
    ) -> None:
        self.load_png = load_png
        self.limits = limits
        self.cache = cache
        self.used: set[str] = set()

    def get(self, sha: str) -> tuple[str, tuple[int, int]]:
        self.used.add(sha)
        if sha not in self.cache:
            png = self.load_png(sha)
            if not png.startswith(_PNG_MAGIC):
                raise PlannerError(f"Screenshot {sha} is not a PNG.")
            if self.limits is None:
                size = resize.png_size(png)
            else:
                png, size = resize.resize_png(png, self.limits)
            url = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
            self.cache[sha] = (url, size)
        return self.cache[sha]


def _screenshot_of(turn: HistoryRecord) -> str | None:
    """The turn's screenshot: the task's, or the last call result's that has one."""
    if "responses" not in turn:
        sha = turn.get("screenshot")
        return sha if isinstance(sha, str) and sha else None
    shots = [r.get("screenshot") for r in turn["responses"] if r.get("screenshot")]
    return shots[-1] if shots else None


def _user(text: str, image_url: str | None) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if image_url is not None:
        parts.append({"type": "image_url", "image_url": {"url": image_url}})
    return {"role": "user", "content": parts}


def _moved(call: Mapping[str, Any]) -> tuple[int, int] | None:
    args = call.get("args") or {}
    if call.get("name") == "drag_and_drop":
        end = (args.get("end_x"), args.get("end_y"))
        return end if all(isinstance(v, int) for v in end) else None  # type: ignore[return-value]
    here = (args.get("x"), args.get("y"))
    return here if all(isinstance(v, int) for v in here) else None  # type: ignore[return-value]


def _answers(
    record: Mapping[str, Any], results: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], list[str]]:
    """``tool`` messages for every native call id of ``record``, and the text lines of the
    results that answer no native id."""
    ids = [tc.get("id") for tc in record.get("message", {}).get("tool_calls", []) or []]
    by_id = {r.get("id"): r for r in results if r.get("id") in ids}
    tools = [
        {
            "role": "tool",
            "tool_call_id": i,
            "content": result_text(by_id[i]) if i in by_id else NOT_RUN,
        }
        for i in ids
    ]
    lines = [result_text(r) for r in results if r.get("id") not in by_id]
    return tools, lines


def build(
    history: Sequence[HistoryRecord],
    load_png: LoadPng,
    keep_screenshots: int,
    dialect: Dialect,
    cache: ImageCache | None = None,
) -> Built:
    """The request's messages for ``history`` (see the module docstring).

    ``cache`` (kept by the caller between requests) spares resizing and encoding a screenshot
    again in the next request; afterwards it holds only the screenshots this request used.
    """
    if keep_screenshots < 0:
        raise ValueError(f"keep_screenshots must be >= 0, got {keep_screenshots}")
    images = _Images(load_png, dialect.resize, {} if cache is None else cache)
    shots = [(i, sha) for i, t in enumerate(history) if (sha := _screenshot_of(t))]
    inline = {i for i, _ in shots[-keep_screenshots:]} if keep_screenshots else set()
    image_size = images.get(shots[-1][1])[1] if shots else None
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": dialect.system_prompt(image_size)}
    ]
    pointer: tuple[int, int] | None = None
    record: Mapping[str, Any] = {}
    count = 0
    for i, turn in enumerate(history):
        sha = _screenshot_of(turn)
        url = images.get(sha)[0] if sha and i in inline else None
        count += url is not None
        if "responses" not in turn:  # a call left unanswered (a run cut short) is "Not run"
            messages.extend(_answers(record, [])[0])
            record = {}
        if turn.get("turn", turn.get("role")) == "model":
            record = turn["content"]
            messages.append(dict(record["message"]))
        elif "responses" in turn:
            results = turn["responses"]
            tools, lines = _answers(record, results)
            messages.extend(tools)
            for call, result in zip(record.get("calls", []), results, strict=False):
                moved = None if result.get("error") else _moved(call)
                pointer = moved or pointer
            text = "\n".join(lines) or "Your calls ran."
            messages.append(_user(text + ("\nThe screen now:" if url else ""), url))
            record = {}
        elif turn.get("person"):  # a person answered or used the desktop: plain words
            messages.append(_user(str(turn.get("text", "")), url))
        else:
            messages.append(_user(dialect.task_text(str(turn.get("text", ""))), url))
    messages.extend(_answers(record, [])[0])
    for sha in set(images.cache) - images.used:
        del images.cache[sha]
    return Built(messages, image_size, pointer, count)


def request_json(
    model: str, messages: Sequence[Mapping[str, Any]], tools: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """The request as the run folder keeps it (``model/NNNN-request.json``)."""
    sent: dict[str, Any] = {"model": model, "messages": [dict(m) for m in messages]}
    if tools:
        sent["tools"] = tools
    return sent
