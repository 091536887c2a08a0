"""Dialect ``ui-venus``: Ant Group's UI-Venus (1.5 / 2), ``<think>`` then
``<action>Click(point=(x, y))</action>``, coordinates 0-999.

Verified at the vendor's own code, ``inclusionAI/UI-Venus`` @ ``81945ac7``:

* ``Venus_framework/Venus_framework_mobile/processor/ui_venus_2_processor.py`` -- the UI-Venus 2
  system prompt: actions such as ``Click(point=(x1, y1))``, ``DoubleClick(point=...)``,
  ``Drag(start=(x1, y1), end=(x2, y2))``, ``Type(content='')``, ``Wait()``,
  ``Finished(content='')``, ``CallUser(content='')``, ``PressEnter()``; "Valid coordinates
  range from the top-left corner (0, 0) to the bottom-right corner (999, 999)"; output format
  ``<think> ... </think>`` then ``<action> the next action </action>``.
* ``Venus_framework/Venus_framework_mobile/policy/ui_venus_2_policy.py`` -- the reference
  parser: ``<action>(.*?)</action>``, the call read with ``ast`` (keyword literals), the point
  under ``point`` (or ``box``), mapped with ``SCALE_FACTOR = 1000``:
  ``int(coordinate / 1000 * width)``, values outside [0, 999] refused; the screenshot is sent
  as it is (its own size).
* ``Venus_framework/Venus_framework_mobile/policy/ui_venus_policy.py`` -- the earlier policy in
  the same repository: ``Click(box=(x, y))`` "normalized 1000x1000 coordinates",
  ``int(x * width / 1000)``.
* ``Venus_framework/Venus_plugin_browser/prompts/venus_system.txt`` -- the browser (desktop)
  variant adds ``Scroll(point=..., direction='up/down/left/right')``, ``Hover(point=...)``,
  ``Hotkey(keys=('ctrl', 'c'))``, same 0-999 range and output format.

So the frame is 1000x1000 over the image sent, the screenshot goes as it is. Not verified:
UI-Venus 1.0 (``UI-Venus-Ground-7B`` / ``UI-Venus-Navi-7B``, Qwen2.5-VL based); its ids are
inferred to this dialect too -- run ``vnc-use calibrate`` to check.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from vnc_use.providers.openai_compat.dialects.base import (
    AssistantMessage,
    Frame,
    Parsed,
    ParseError,
    Translator,
    keys_of,
    typed,
)
from vnc_use.providers.openai_compat.dialects.pycall import PyCall, parse_call
from vnc_use.providers.openai_compat.resize import PixelLimits

__all__ = ["DECLARED_SIZE", "PROMPT", "UIVenus"]

DECLARED_SIZE = 1000
"""Coordinates 0-999, read as ``value / 1000`` of the image (the reference ``SCALE_FACTOR``)."""

SCROLL_PIXELS = 500

PROMPT = """**You are a GUI Agent.** Analyze the user's task and the current screenshot, and \
determine exactly one next action.

### Available Actions
- Click(point=(x1, y1))
- DoubleClick(point=(x1, y1))
- RightClick(point=(x1, y1))
- Hover(point=(x1, y1))
- Drag(start=(x1, y1), end=(x2, y2))
- Scroll(point=(x1, y1), direction='up/down/left/right')
- Type(content='')
- Hotkey(keys=('ctrl', 'c'))
- PressEnter()
- Wait()
- CallUser(content='')
- Finished(content='')
Valid coordinates range from the top-left corner (0, 0) to the bottom-right corner (999, 999).

### Output Format
<think> your thinking process </think>
<action> the next action </action>

### User Task
{task}"""
"""The desktop action set in UI-Venus 2's prompt shape (see the module docstring)."""

_THINK = re.compile(r"<think>(.*?)</think>", re.S)
_ACTION = re.compile(r"<action>(.*?)</action>", re.S)


def _point(t: Translator, call: PyCall, key: str = "point", position: int = 0) -> tuple[int, int]:
    value = call.get(key, position)
    if value is None and key == "point":
        value = call.get("box")
    if value is None:
        raise ParseError(f"{call.name}(...) needs {key}=(x, y) with values 0-999.")
    return t.at(value)


def _click(kind: str) -> Callable[[Translator, PyCall], None]:
    def handler(t: Translator, call: PyCall) -> None:
        x, y = _point(t, call)
        t.add(kind, x=x, y=y)

    return handler


def _drag(t: Translator, call: PyCall) -> None:
    sx, sy = _point(t, call, "start")
    ex, ey = _point(t, call, "end", 1)
    t.add("drag_and_drop", start_x=sx, start_y=sy, end_x=ex, end_y=ey)


def _scroll(t: Translator, call: PyCall) -> None:
    direction = str(call.get("direction", default="down")).strip().lower()
    if direction not in ("up", "down", "left", "right"):
        raise ParseError(f"Scroll direction {direction!r} is not up, down, left or right.")
    has_point = call.get("point", 0) is not None or call.get("box") is not None
    x, y = _point(t, call) if has_point else (t.pointer or (500, 500))
    t.add("scroll", x=x, y=y, direction=direction, magnitude_in_pixels=SCROLL_PIXELS)


def _type(t: Translator, call: PyCall) -> None:
    content = call.get("content", 0)
    if not isinstance(content, str):
        raise ParseError("Type(...) needs content='...'.")
    typed(t, content)


def _hotkey(t: Translator, call: PyCall) -> None:
    keys = keys_of(list(call.get("keys", 0, default=())) or call.get("key"))
    if len(keys) == 1:
        t.add("press_key", key=keys[0])
    else:
        t.add("hotkey", keys=keys)


def _enter(t: Translator, call: PyCall) -> None:
    t.add("press_key", key="Return")


def _wait(t: Translator, call: PyCall) -> None:
    t.add("wait", seconds=2)


def _finished(t: Translator, call: PyCall) -> None:
    content = call.get("content", 0)
    t.done(content if isinstance(content, str) and content else t.intent)


def _call_user(t: Translator, call: PyCall) -> None:
    content = call.get("content", 0, default="")
    t.ask(content if isinstance(content, str) and content.strip() else t.intent)


_HANDLERS: dict[str, Callable[[Translator, PyCall], None]] = {
    "Click": _click("click"),
    "DoubleClick": _click("double_click"),
    "RightClick": _click("right_click"),
    "Hover": _click("move"),
    "Drag": _drag,
    "Swipe": _drag,
    "Scroll": _scroll,
    "Type": _type,
    "Hotkey": _hotkey,
    "PressEnter": _enter,
    "Wait": _wait,
    "Finished": _finished,
    "Answer": _finished,
    "CallUser": _call_user,
}


class UIVenus:
    """UI-Venus (``<think>`` / ``<action>`` text, relative 0-999)."""

    name = "ui-venus"
    resize: PixelLimits | None = None
    """The screenshot goes as it is (the coordinates are relative to it)."""

    def system_prompt(self, image_size: tuple[int, int] | None) -> str:
        """A short system line; the prompt with the task is the first user text."""
        return "You are a helpful assistant."

    def task_text(self, task: str) -> str:
        """The UI-Venus prompt around the task (its own processor puts it in one message)."""
        return PROMPT.replace("{task}", task)

    def tools(self) -> list[dict[str, Any]] | None:
        """No ``tools`` parameter."""
        return None

    def frame(self, image_size: tuple[int, int] | None, pointer: tuple[int, int] | None) -> Frame:
        """A fixed 1000x1000 frame."""
        return Frame(DECLARED_SIZE, DECLARED_SIZE, pointer)

    def parse(self, message: AssistantMessage, frame: Frame) -> Parsed:
        """The ``<action>`` call (the whole content when there is no tag)."""
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        think = _THINK.search(text)
        action = _ACTION.search(text)
        thought = " ".join((think.group(1) if think else "").split())
        action_text = action.group(1) if action else _THINK.sub("", text)
        if not action_text.strip():
            raise ParseError("No <action>: answer <think>...</think><action>Click(...)</action>.")
        call = parse_call(action_text)
        handler = _HANDLERS.get(call.name)
        if handler is None:
            raise ParseError(f"Unknown action {call.name}(...); use one of the Available Actions.")
        t = Translator(frame, thought)
        handler(t, call)
        return t.result(thought)
