"""Dialect ``holo``: H Company's Holo3 / Holo3.1, one JSON object per step, coordinates 0-1000.

Verified at the vendor's own documentation (H Company developer hub, read 2026-11-27):

* https://hub.hcompany.ai/agent-loop -- "Coordinates in [0, 1000]": "Send a screenshot at any
  size. Holo returns coordinates as integers in [0, 1000], normalized to that image", scaled
  back with ``abs_x = int((x / 1000) * screenshot.width)``; origin top-left. "Output JSON":
  each step the model emits one object ``{"note": ..., "thought": ..., "tool_call": {...}}``
  where ``tool_call`` is *flat* -- ``tool_name`` is a sibling of the arguments, e.g.
  ``{"tool_name": "click", "element": "Continue button ...", "x": 932, "y": 880}``. The page's
  example toolbox is ``click``, ``write`` and ``answer``, "real agents typically register a
  wider toolbox following the same pattern"; the schema is shown in the system prompt under
  an ``<output_format>`` block. Two output formats: structured outputs (Holo3 and Holo3.1) and
  native OpenAI ``tool_calls`` (Holo3.1 only). "Image budget": at most the last 3 screenshots.
* https://hub.hcompany.ai/element-localization -- the same convention for grounding:
  ``x``/``y`` integers in [0, 1000] "normalized to the image you sent".
* https://hub.hcompany.ai/models -- ids ``holo3-1-35b-a3b`` (native function calling) and
  ``holo3-122b-a10b``; open weights ``Hcompany/Holo-3.1-35B-A3B`` (also 0.8B, 4B, 9B, FP8,
  GGUF, NVFP4) and ``Hcompany/Holo3-35B-A3B``.

So: the screenshot goes as it is (any size), the frame is 1000x1000, the answer is read from
the JSON object in ``content`` (a ```json fence is tolerated) or from native ``tool_calls``
with the same tool names. The tools beyond ``click``/``write``/``answer`` (double and right
click, hover, drag, scroll, keys, wait) are vnc-use's own, declared in the same flat pattern;
H's full production toolbox is not published on those pages. The structured-outputs request
field (``structured_outputs``, an H extension) is not sent: the schema travels in the prompt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from vnc_use.providers.openai_compat.dialects.base import (
    AssistantMessage,
    Frame,
    Parsed,
    ParseError,
    RawCall,
    Translator,
    keys_of,
    raw_calls,
    typed,
)
from vnc_use.providers.openai_compat.resize import PixelLimits

__all__ = ["DECLARED_SIZE", "TOOLS", "Holo"]

DECLARED_SIZE = 1000
"""Holo's coordinates are integers in [0, 1000] of the image sent."""

SCROLL_PIXELS = 300

_POINT = {"x": "integer 0-1000", "y": "integer 0-1000", "element": "what you aim at"}
TOOLS: dict[str, dict[str, str]] = {
    "click": _POINT,
    "double_click": _POINT,
    "right_click": _POINT,
    "hover": _POINT,
    "drag": {"from_x": "0-1000", "from_y": "0-1000", "to_x": "0-1000", "to_y": "0-1000"},
    "scroll": {**_POINT, "direction": "up | down | left | right"},
    "write": {"text": "text to type where the focus is", "press_enter": "true | false"},
    "press_key": {"key": "one key, e.g. Enter"},
    "hotkey": {"keys": 'list of keys, e.g. ["ctrl", "c"]'},
    "wait": {"seconds": "number"},
    "answer": {"text": "the final answer; ends the task"},
}
"""The flat tool union (``tool_name`` plus these arguments)."""

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def _system_prompt() -> str:
    union = "\n".join(
        f'  {{"tool_name": "{name}", ' + ", ".join(f'"{k}": <{v}>' for k, v in args.items()) + "}"
        for name, args in TOOLS.items()
    )
    return (
        "You are a computer-use agent operating a desktop through screenshots.\n"
        "Coordinates are integers in [0, 1000], normalized to the screenshot you see: (0, 0) "
        "is the top-left corner, (1000, 1000) the bottom-right.\n"
        "<output_format>\nAnswer every step with exactly one JSON object:\n"
        '{"note": <string or null: facts to remember>, "thought": <one-line plan>, '
        '"tool_call": <one of the tools below>}\n'
        "tool_call is flat: tool_name is a sibling of the arguments.\n"
        f"{union}\n</output_format>"
    )


def _json_object(content: str) -> dict[str, Any]:
    fenced = _FENCE.search(content)
    text = fenced.group(1) if fenced else content
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ParseError('No JSON object: answer with {"note", "thought", "tool_call"}.')
    try:
        value = json.loads(text[start : end + 1])
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"The answer is not valid JSON ({exc}).") from None
    if not isinstance(value, dict):
        raise ParseError("The answer must be one JSON object.")
    return value


def _at(t: Translator, args: Mapping[str, Any], x: str = "x", y: str = "y") -> tuple[int, int]:
    if x not in args or y not in args:
        raise ParseError(f"This tool needs {x!r} and {y!r} (integers 0-1000).")
    return t.at([args[x], args[y]])


def _click(kind: str) -> Callable[[Translator, Mapping[str, Any]], None]:
    def handler(t: Translator, args: Mapping[str, Any]) -> None:
        x, y = _at(t, args)
        t.add(kind, x=x, y=y)

    return handler


def _drag(t: Translator, args: Mapping[str, Any]) -> None:
    sx, sy = _at(t, args, "from_x", "from_y")
    ex, ey = _at(t, args, "to_x", "to_y")
    t.add("drag_and_drop", start_x=sx, start_y=sy, end_x=ex, end_y=ey)


def _scroll(t: Translator, args: Mapping[str, Any]) -> None:
    direction = str(args.get("direction", "down")).lower()
    if direction not in ("up", "down", "left", "right"):
        raise ParseError(f"scroll direction {direction!r} is not up, down, left or right.")
    x, y = _at(t, args) if "x" in args else (t.pointer or (500, 500))
    t.add("scroll", x=x, y=y, direction=direction, magnitude_in_pixels=SCROLL_PIXELS)


def _text(args: Mapping[str, Any]) -> str:
    value = args.get("text", args.get("content"))
    if not isinstance(value, str):
        raise ParseError("This tool needs 'text' (a string).")
    return value


def _write(t: Translator, args: Mapping[str, Any]) -> None:
    text = _text(args)
    if args.get("press_enter") is True:
        text += "\n"
    typed(t, text)


def _press(t: Translator, args: Mapping[str, Any]) -> None:
    keys = keys_of(args.get("key", args.get("keys")))
    if len(keys) == 1:
        t.add("press_key", key=keys[0])
    else:
        t.add("hotkey", keys=keys)


def _wait(t: Translator, args: Mapping[str, Any]) -> None:
    seconds = args.get("seconds", 1)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
        raise ParseError("'seconds' must be a number of seconds.")
    t.add("wait", seconds=min(60, round(seconds)))


def _answer(t: Translator, args: Mapping[str, Any]) -> None:
    t.done(_text(args))


_HANDLERS: dict[str, Callable[[Translator, Mapping[str, Any]], None]] = {
    "click": _click("click"),
    "double_click": _click("double_click"),
    "right_click": _click("right_click"),
    "hover": _click("move"),
    "drag": _drag,
    "scroll": _scroll,
    "write": _write,
    "type": _write,
    "press_key": _press,
    "hotkey": _press,
    "wait": _wait,
    "answer": _answer,
}


def _translate(t: Translator, name: str, args: Mapping[str, Any]) -> None:
    handler = _HANDLERS.get(name)
    if handler is None:
        raise ParseError(f"Unknown tool {name!r}; use one of {', '.join(TOOLS)}.")
    handler(t, args)


def _from_content(content: str) -> tuple[str, RawCall]:
    obj = _json_object(content)
    call = obj.get("tool_call", obj)
    if not isinstance(call, dict) or not isinstance(call.get("tool_name"), str):
        raise ParseError('The object needs "tool_call": {"tool_name": ..., ...}.')
    args = {k: v for k, v in call.items() if k != "tool_name"}
    thought = " ".join(str(obj.get(k) or "") for k in ("thought", "note")).strip()
    return thought, RawCall(call["tool_name"], args)


class Holo:
    """Holo3 / Holo3.1 (one JSON object per step, or native tool calls; 0-1000)."""

    name = "holo"
    resize: PixelLimits | None = None
    """The screenshot goes as it is: the coordinates are relative to it."""

    def system_prompt(self, image_size: tuple[int, int] | None) -> str:
        """The output contract with the flat tool union (see the module docstring)."""
        return _system_prompt()

    def task_text(self, task: str) -> str:
        """The task as it is."""
        return task

    def tools(self) -> list[dict[str, Any]] | None:
        """No ``tools`` parameter (Holo3 has no native function calling)."""
        return None

    def frame(self, image_size: tuple[int, int] | None, pointer: tuple[int, int] | None) -> Frame:
        """A fixed 1000x1000 frame."""
        return Frame(DECLARED_SIZE, DECLARED_SIZE, pointer)

    def parse(self, message: AssistantMessage, frame: Frame) -> Parsed:
        """The step's ``tool_call`` (from the JSON content, else native tool calls)."""
        native = [c for c in raw_calls(message) if c.id is not None]
        content = message.get("content")
        if native:
            thought = content.strip() if isinstance(content, str) else ""
            t = Translator(frame, thought)
            for call in native:
                t.source_id = call.id
                _translate(t, call.name, call.arguments)
            return t.result(thought)
        thought, call = _from_content(content if isinstance(content, str) else "")
        t = Translator(frame, thought)
        _translate(t, call.name, call.arguments)
        return t.result(thought)
