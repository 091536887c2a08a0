"""Dialect ``ui-tars``: UI-TARS 1.5's ``Thought: ... Action: click(start_box='(x,y)')`` text.

Prompt and action space: ``bytedance/UI-TARS`` ``codes/prompts.py`` (``COMPUTER_USE``, 1.5).
Coordinates are absolute pixels of the image as the processor resized it (Qwen2.5-VL base,
``README_coordinates.md``), so the client resizes with the UI-TARS limits and maps back through
the size sent -- not through 1000 (UI-TARS 1.0 / Doubao), not through the screen size.

The grammar read here: an optional ``Thought:`` (or ``Reflection:`` / ``Action_Summary:``),
then ``Action:`` and one or more calls separated by blank lines; each call is
``name(key='value', ...)`` with quoted values (backslash escapes) and boxes written
``(x,y)``, ``(x1,y1,x2,y2)``, ``[x, y]`` or ``<point>x y</point>``; ``<|box_start|>`` and
``<|box_end|>`` tokens are dropped first.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from vnc_use.providers.openai_compat import resize
from vnc_use.providers.openai_compat.dialects.base import (
    AssistantMessage,
    Frame,
    Parsed,
    ParseError,
    RawCall,
    Translator,
    keys_of,
    raw_calls,
    strip_tool_call_blocks,
    thought_of,
    typed,
)
from vnc_use.providers.openai_compat.dialects.qwen25_vl import pixel_frame

__all__ = ["PROMPT", "UITars", "parse_actions"]

PROMPT = """You are a GUI agent. You are given a task and your action history, with screenshots. \
You need to perform the next action to complete the task.

## Output Format
```
Thought: ...
Action: ...
```

## Action Space

click(start_box='<|box_start|>(x1,y1)<|box_end|>')
left_double(start_box='<|box_start|>(x1,y1)<|box_end|>')
right_single(start_box='<|box_start|>(x1,y1)<|box_end|>')
drag(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')
hotkey(key='')
type(content='xxx') # Use escape characters \\', \\", and \\n in content part to ensure we can \
parse the content in normal python string format. If you want to submit your input, use \\n at \
the end of content.{space}
scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', direction='down or up or right or left')
wait() #Sleep for 5s and take a screenshot to check for any changes.
finished(content='xxx') # Use escape characters \\', \\", and \\n in content part to ensure we \
can parse the content in normal python string format.


## Note
- Use {language} in `Thought` part.
- Write a small plan and finally summarize your next action (with its target element) in one \
sentence in `Thought` part.

## User Instruction
{instruction}
"""
"""UI-TARS 1.5's ``COMPUTER_USE`` template (``codes/prompts.py`` @ 6b315cc0), verbatim."""

SCROLL_PIXELS = 500
"""UI-TARS gives no scroll amount; its reference executor scrolls 5 notches (~500 px)."""

WAIT_SECONDS = 5
"""``wait()`` sleeps 5 s per the prompt."""

_SPECIAL = re.compile(r"<\|box_start\|>|<\|box_end\|>")
_NAME = re.compile(r"\s*([A-Za-z_]\w*)\s*\(")
_KEY = re.compile(r"\s*([A-Za-z_]\w*)\s*=\s*")
_NUMBERS = re.compile(r"-?\d+(?:\.\d+)?")
_ESCAPES = {"n": "\n", "t": "\t", "'": "'", '"': '"', "\\": "\\"}


def _quoted(text: str, i: int) -> tuple[str, int]:
    quote, i, out = text[i], i + 1, []
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append(_ESCAPES.get(nxt, "\\" + nxt))
            i += 2
        elif ch == quote:
            return "".join(out), i + 1
        else:
            out.append(ch)
            i += 1
    raise ParseError("A quoted value is not closed.")


def _value(text: str, i: int) -> tuple[str, int]:
    if i < len(text) and text[i] in "'\"":
        return _quoted(text, i)
    end = i
    while end < len(text) and text[end] not in ",)":
        end += 1
    return text[i:end].strip(), end


def _call(text: str, i: int) -> tuple[str, dict[str, str], int]:
    match = _NAME.match(text, i)
    if match is None:
        raise ParseError(f"Cannot read an action at {text[i : i + 40]!r}.")
    args: dict[str, str] = {}
    name, i = match.group(1), match.end()
    while True:
        while i < len(text) and text[i] in " \t\n,":
            i += 1
        if i < len(text) and text[i] == ")":
            return name, args, i + 1
        key = _KEY.match(text, i)
        if key is None:
            raise ParseError(f"Cannot read the arguments of {name}(...): write key='value'.")
        args[key.group(1)], i = _value(text, key.end())


def parse_actions(action_text: str) -> list[tuple[str, dict[str, str]]]:
    """The calls after ``Action:``, in order (``ParseError`` on anything else)."""
    calls, i = [], 0
    text = _SPECIAL.sub("", action_text)
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        name, args, i = _call(text, i)
        calls.append((name, args))
    if not calls:
        raise ParseError("'Action:' is followed by no action.")
    return calls


def _box(value: str | None) -> list[float]:
    numbers = [float(n) for n in _NUMBERS.findall(value or "")]
    if len(numbers) not in (2, 4):
        raise ParseError(f"{value!r} is not a box: write '(x,y)'.")
    return numbers


def _start(args: Mapping[str, str]) -> str | None:
    return args.get("start_box") or args.get("start_point") or args.get("point")


_CLICKS = {
    "click": "click",
    "left_single": "click",
    "left_double": "double_click",
    "right_single": "right_click",
    "hover": "move",
}


def _click(t: Translator, name: str, args: Mapping[str, str]) -> None:
    x, y = t.at(_box(_start(args)))
    t.add(_CLICKS[name], x=x, y=y)


def _drag(t: Translator, name: str, args: Mapping[str, str]) -> None:
    sx, sy = t.at(_box(_start(args)))
    ex, ey = t.at(_box(args.get("end_box") or args.get("end_point")))
    t.add("drag_and_drop", start_x=sx, start_y=sy, end_x=ex, end_y=ey)


def _hotkey(t: Translator, name: str, args: Mapping[str, str]) -> None:
    keys = keys_of(args.get("key", args.get("hotkey")))
    if len(keys) == 1:
        t.add("press_key", key=keys[0])
    else:
        t.add("hotkey", keys=keys)


def _key_down(t: Translator, name: str, args: Mapping[str, str]) -> None:
    t.add("key_down", key=keys_of(args.get("key"))[0])


def _key_up(t: Translator, name: str, args: Mapping[str, str]) -> None:
    t.add("key_up", key=keys_of(args.get("key"))[0])


def _type(t: Translator, name: str, args: Mapping[str, str]) -> None:
    content = args.get("content")
    if content is None:
        raise ParseError("type(...) needs content='...'.")
    typed(t, content)


def _scroll(t: Translator, name: str, args: Mapping[str, str]) -> None:
    direction = (args.get("direction") or "").strip().lower()
    if direction not in ("up", "down", "left", "right"):
        raise ParseError(f"scroll direction {direction!r} is not up, down, left or right.")
    start = _start(args)
    x, y = t.at(_box(start)) if start else (t.pointer or (500, 500))
    t.add("scroll", x=x, y=y, direction=direction, magnitude_in_pixels=SCROLL_PIXELS)


def _wait(t: Translator, name: str, args: Mapping[str, str]) -> None:
    t.add("wait", seconds=WAIT_SECONDS)


def _finished(t: Translator, name: str, args: Mapping[str, str]) -> None:
    t.done(args.get("content") or t.intent)


def _call_user(t: Translator, name: str, args: Mapping[str, str]) -> None:
    # call_user() carries no text: the model's question is its Thought
    t.ask(args.get("content") or t.intent)


_HANDLERS: dict[str, Callable[[Translator, str, Mapping[str, str]], None]] = {
    **dict.fromkeys(_CLICKS, _click),
    "drag": _drag,
    "select": _drag,
    "hotkey": _hotkey,
    "press": _hotkey,
    "keydown": _key_down,
    "keyup": _key_up,
    "release": _key_up,
    "type": _type,
    "scroll": _scroll,
    "wait": _wait,
    "finished": _finished,
    "call_user": _call_user,
}


def _translate(t: Translator, name: str, args: Mapping[str, Any]) -> None:
    handler = _HANDLERS.get(name)
    if handler is None:
        raise ParseError(f"Unknown action {name}(...); use one of the Action Space.")
    handler(t, name, {k: v if isinstance(v, str) else str(v) for k, v in args.items()})


def _split(text: str) -> tuple[str, str]:
    """(thought, action text) of a reply; ParseError when there is no ``Action:``."""
    markers = list(re.finditer(r"(?<![\w])Action\s*:", text))
    marker = markers[-1] if markers else None
    if marker is None:
        raise ParseError("No 'Action:' line: answer with 'Thought: ...' then 'Action: ...'.")
    return thought_of(text[: marker.start()]), text[marker.end() :]


class UITars:
    """UI-TARS 1.5 (``Thought:`` / ``Action:`` text, pixels of the smart-resized image)."""

    name = "ui-tars"

    def __init__(self, limits: resize.PixelLimits = resize.UI_TARS, language: str = "English"):
        self.resize: resize.PixelLimits | None = limits
        """The resize rule applied to every screenshot before it is sent."""
        self.language = language

    def system_prompt(self, image_size: tuple[int, int] | None) -> str:
        """A short system line; the template goes in the first user message (as in UI-TARS'
        own test conversation): see :meth:`task_text`."""
        return "You are a helpful assistant."

    def task_text(self, task: str) -> str:
        """The first user message's text: the 1.5 template around the task."""
        return (
            PROMPT.replace("{space}", " ")
            .replace("{language}", self.language)
            .replace("{instruction}", task)
        )

    def tools(self) -> list[dict[str, Any]] | None:
        """No ``tools`` parameter."""
        return None

    def frame(self, image_size: tuple[int, int] | None, pointer: tuple[int, int] | None) -> Frame:
        """The size of the image sent."""
        return pixel_frame(image_size, pointer)

    def parse(self, message: AssistantMessage, frame: Frame) -> Parsed:
        """The ``Action:`` calls of the reply (native or ``<tool_call>`` calls too, with
        UI-TARS action names and arguments)."""
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        native: list[RawCall] = raw_calls(message)
        if native:
            thought = thought_of(strip_tool_call_blocks(text))
            t = Translator(frame, thought)
            for call in native:
                t.source_id = call.id
                _translate(t, call.name, call.arguments)
            return t.result(thought)
        thought, action_text = _split(_SPECIAL.sub("", text))
        t = Translator(frame, thought)
        for name, args in parse_actions(action_text):
            _translate(t, name, args)
        return t.result(thought)
