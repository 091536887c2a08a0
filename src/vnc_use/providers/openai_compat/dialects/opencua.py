"""Dialect ``opencua``: XLANG's OpenCUA-7B / -32B, ``## Thought`` / ``## Action`` / ``## Code``
with ``pyautogui`` calls in pixels of the smart-resized image.

Verified at the vendor's own code and README, ``xlang-ai/OpenCUA`` @ ``1d70f20``
(2025-08-16):

* ``README.md`` -- OpenCUA-7B and -32B are Qwen2.5-VL based; their OSWorld agent runs with
  ``--coordinate_type qwen25``.
* ``evaluation/agentnetbench/agent/opencua.py`` -- the system prompts ("You need to perform a
  series of pyautogui actions", "output the action as PyAutoGUI code or the following
  functions": ``computer.triple_click(x, y)``, ``computer.terminate(status)``); the response
  template ``## Thought:`` / ``## Action:`` / ``## Code:``; the parser takes the lines that
  start with ``pyautogui.`` or ``computer.``; with ``coord_type="qwen25"`` it reads
  ``x=..., y=...`` as pixels of the image resized by Qwen2.5-VL's ``smart_resize``
  (``factor=28, min_pixels=3136, max_pixels=12845056``) and divides by that resized size.

So this is a pixel dialect like ``qwen2.5-vl``: the screenshot is resized with those limits
(:data:`~vnc_use.providers.openai_compat.resize.QWEN25_VL`) before sending and the model's
pixels are mapped back through the size sent. Not verified: OpenCUA-A3B / -72B (other bases);
their ids are inferred to this dialect too -- run ``vnc-use calibrate`` to check.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from vnc_use.providers.openai_compat import resize
from vnc_use.providers.openai_compat.dialects.base import (
    AssistantMessage,
    Frame,
    Parsed,
    ParseError,
    Translator,
    keys_of,
    reports_failure,
    thought_of,
    typed,
)
from vnc_use.providers.openai_compat.dialects.pycall import PyCall, parse_call
from vnc_use.providers.openai_compat.dialects.qwen25_vl import pixel_frame

__all__ = ["SYSTEM_PROMPT", "OpenCUA"]

SCROLL_NOTCH_PIXELS = 100
"""One ``pyautogui.scroll`` unit, taken as one wheel notch of about 100 px."""

SYSTEM_PROMPT = """You are a GUI agent. You are given a task and a screenshot of the screen. You \
need to perform a series of pyautogui actions to complete the task.

For each step, provide your response in this format:

## Thought:
  your step-by-step reasoning about the current state and the next action

## Action:
  a short instruction naming the target without coordinates

## Code:
```python
the action as PyAutoGUI code, e.g. pyautogui.click(x=120, y=45)
```

You may use pyautogui.click, doubleClick, rightClick, moveTo, dragTo, scroll, write, press, \
hotkey, and the following functions:
- {"name": "computer.triple_click", "description": "Triple click on the screen", "parameters": \
{"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, \
"required": ["x", "y"]}}
- {"name": "computer.terminate", "description": "Terminate the current task and report its \
completion status", "parameters": {"type": "object", "properties": {"status": {"type": "string", \
"enum": ["success", "failure"]}}, "required": ["status"]}}
Coordinates are pixels of the screenshot as you see it."""
"""The L2 prompt's structure (see the module docstring), shortened."""

_LINE = re.compile(r"^\s*((?:pyautogui|computer)\.\w+\(.*\))\s*$", re.M)
_THOUGHT = re.compile(r"##\s*Thought:\s*(.*?)(?=\n##\s|\Z)", re.S)


def _xy(t: Translator, call: PyCall) -> tuple[int, int]:
    x, y = call.get("x", 0), call.get("y", 1)
    if x is None or y is None:
        raise ParseError(f"{call.name}(...) needs x= and y= (pixels of the screenshot).")
    return t.at([x, y])


def _click(kind: str) -> Callable[[Translator, PyCall], None]:
    def handler(t: Translator, call: PyCall) -> None:
        x, y = _xy(t, call)
        clicks = call.get("clicks")
        button = str(call.get("button", default="left"))
        name = {"right": "right_click", "middle": "middle_click"}.get(button, kind)
        if name == "click" and clicks in (2, 3):
            name = "double_click" if clicks == 2 else "triple_click"
        t.add(name, x=x, y=y)

    return handler


def _drag(t: Translator, call: PyCall) -> None:
    start = t.here(call.name)
    end = _xy(t, call)
    t.add("drag_and_drop", start_x=start[0], start_y=start[1], end_x=end[0], end_y=end[1])


def _scroll(t: Translator, call: PyCall, direction: tuple[str, str]) -> None:
    amount = call.get("clicks", 0, default=call.get("amount"))
    if isinstance(amount, bool) or not isinstance(amount, (int, float)):
        raise ParseError(f"{call.name}(...) needs a number of clicks.")
    where = _xy(t, call) if call.get("x") is not None else (t.pointer or (500, 500))
    magnitude = min(999, round(abs(amount) * SCROLL_NOTCH_PIXELS))
    t.add(
        "scroll",
        x=where[0],
        y=where[1],
        direction=direction[0] if amount > 0 else direction[1],
        magnitude_in_pixels=magnitude,
    )


def _write(t: Translator, call: PyCall) -> None:
    text = call.get("message", 0, default=call.get("text"))
    if not isinstance(text, str):
        raise ParseError(f"{call.name}(...) needs message='...'.")
    typed(t, text)


def _press(t: Translator, call: PyCall) -> None:
    value = call.get("keys", 0)
    keys = keys_of(value if not isinstance(value, tuple) else list(value))
    if len(keys) == 1:
        t.add("press_key", key=keys[0])
    else:
        t.add("hotkey", keys=keys)


def _hotkey(t: Translator, call: PyCall) -> None:
    keys = keys_of(list(call.args) or call.get("keys"))
    if len(keys) == 1:
        t.add("press_key", key=keys[0])
    else:
        t.add("hotkey", keys=keys)


def _terminate(t: Translator, call: PyCall) -> None:
    status = call.get("status", 0, default="success")
    t.done(t.intent or f"Task ended: {status}.", failed=reports_failure(status))


_HANDLERS: dict[str, Callable[[Translator, PyCall], None]] = {
    "pyautogui.click": _click("click"),
    "pyautogui.leftClick": _click("click"),
    "pyautogui.doubleClick": _click("double_click"),
    "pyautogui.tripleClick": _click("triple_click"),
    "computer.triple_click": _click("triple_click"),
    "pyautogui.rightClick": _click("right_click"),
    "pyautogui.middleClick": _click("middle_click"),
    "pyautogui.moveTo": _click("move"),
    "pyautogui.dragTo": _drag,
    "pyautogui.scroll": lambda t, c: _scroll(t, c, ("up", "down")),
    "pyautogui.hscroll": lambda t, c: _scroll(t, c, ("right", "left")),
    "pyautogui.write": _write,
    "pyautogui.typewrite": _write,
    "pyautogui.press": _press,
    "pyautogui.hotkey": _hotkey,
    "computer.terminate": _terminate,
}


class OpenCUA:
    """OpenCUA-7B / -32B (pyautogui code, pixels of the smart-resized image)."""

    name = "opencua"

    def __init__(self, limits: resize.PixelLimits = resize.QWEN25_VL) -> None:
        self.resize: resize.PixelLimits | None = limits
        """The resize rule applied to every screenshot before it is sent."""

    def system_prompt(self, image_size: tuple[int, int] | None) -> str:
        """The pyautogui prompt (see :data:`SYSTEM_PROMPT`)."""
        return SYSTEM_PROMPT

    def task_text(self, task: str) -> str:
        """The instruction line, as in OpenCUA's own prompt."""
        return f"# Task Instruction:\n{task}\n\nGive the next step for the screenshot."

    def tools(self) -> list[dict[str, Any]] | None:
        """No ``tools`` parameter."""
        return None

    def frame(self, image_size: tuple[int, int] | None, pointer: tuple[int, int] | None) -> Frame:
        """The size of the image sent."""
        return pixel_frame(image_size, pointer)

    def parse(self, message: AssistantMessage, frame: Frame) -> Parsed:
        """The ``pyautogui.`` / ``computer.`` lines of the reply, in order."""
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        lines = _LINE.findall(text)
        if not lines:
            raise ParseError(
                "No pyautogui code: end with ## Code: and e.g. pyautogui.click(x=.., y=..)."
            )
        found = _THOUGHT.search(text)
        thought = (
            " ".join(found.group(1).split()) if found else thought_of(text.split("## Code")[0])
        )
        t = Translator(frame, thought)
        for line in lines:
            call = parse_call(line)
            handler = _HANDLERS.get(call.name)
            if handler is None:
                raise ParseError(f"Unknown action {call.name}(...); use pyautogui or computer.*.")
            handler(t, call)
        return t.result(thought)
