"""Qwen's ``computer_use`` function (Qwen3-VL and Qwen2.5-VL cookbooks), read into grid calls.

One function, ``{"action": ..., "coordinate": [x, y], ...}``, named ``computer_use`` in the
cookbooks, ``mobile_use`` in the mobile ones and ``computer`` by cua (all accepted). Qwen's
``agent_function_call.py`` defines the actions; :func:`translate` maps them onto the Gemini 3.5
desktop set (``docs``: ``local-vlm-dialects.md`` section 6). Coordinates go through the
dialect's :class:`~.base.Frame` (relative 0-1000 for Qwen3-VL, pixels of the image sent for
Qwen2.5-VL).
"""

from __future__ import annotations

import json
import math
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
    reports_failure,
    strip_tool_call_blocks,
    text_arg,
    thought_of,
    typed,
)

__all__ = ["FUNCTION_NAMES", "function_schema", "parse", "system_prompt"]

FUNCTION_NAMES = frozenset({"computer_use", "computer", "mobile_use"})
"""Names the function goes by (Qwen desktop and mobile cookbooks, cua)."""

SCROLL_PIXELS = 300
"""Scroll distance when Qwen gives no ``pixels`` (the 3.5 default)."""

_CLICKS = {
    "left_click": "click",
    "click": "click",
    "right_click": "right_click",
    "middle_click": "middle_click",
    "double_click": "double_click",
    "triple_click": "triple_click",
}

_DESCRIPTION = (
    "Use a mouse and keyboard to interact with a computer, and take screenshots.\n"
    "* This is an interface to a desktop GUI. You do not have access to a terminal or "
    "applications menu. You must click on desktop icons to start applications.\n"
    "* Some applications may take time to start or process actions, so you may need to wait "
    "and take successive screenshots to see the results of your actions.\n"
    "* The screen's resolution is {width}x{height}.\n"
    "* Whenever you intend to move the cursor to click on an element like an icon, you should "
    "consult a screenshot to determine the coordinates of the element before moving the cursor.\n"
    "* Make sure to click any buttons, links, icons, etc with the cursor tip in the center of "
    "the element. Don't click boxes on their edges."
)

_ACTIONS = (
    "key",
    "type",
    "mouse_move",
    "left_click",
    "left_click_drag",
    "right_click",
    "middle_click",
    "double_click",
    "triple_click",
    "scroll",
    "hscroll",
    "wait",
    "terminate",
    "answer",
)


def function_schema(width: int, height: int) -> dict[str, Any]:
    """The ``computer_use`` function as Qwen's ``agent_function_call.py`` declares it."""
    return {
        "type": "function",
        "function": {
            "name": "computer_use",
            "description": _DESCRIPTION.format(width=width, height=height),
            "parameters": {
                "type": "object",
                "required": ["action"],
                "properties": {
                    "action": {"type": "string", "enum": list(_ACTIONS)},
                    "keys": {"type": "array", "description": "Required only by `action=key`."},
                    "text": {
                        "type": "string",
                        "description": "Required only by `action=type` and `action=answer`.",
                    },
                    "coordinate": {
                        "type": "array",
                        "description": "(x, y): pixels from the left and top edges.",
                    },
                    "pixels": {
                        "type": "number",
                        "description": "Scroll amount: positive scrolls up, negative down.",
                    },
                    "time": {"type": "number", "description": "Seconds to wait."},
                    "status": {"type": "string", "enum": ["success", "failure"]},
                },
            },
        },
    }


def system_prompt(width: int, height: int) -> str:
    """The cookbooks' system message (qwen_agent's ``NousFnCallPrompt``) with the
    mobile cookbook's response format."""
    tool = json.dumps(function_schema(width, height), ensure_ascii=False)
    return (
        "You are a helpful assistant.\n\n# Tools\n\n"
        "You may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        f"<tools>\n{tool}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments "
        "within <tool_call></tool_call> XML tags:\n"
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
        "\n\nResponse format for every step:\n"
        "1) Thought: one concise sentence explaining the next move.\n"
        "2) A single <tool_call>...</tool_call> block containing only the JSON.\n"
        "When the task is done, use action=terminate (or action=answer with the answer)."
    )


def _click(t: Translator, action: str, args: Mapping[str, Any]) -> None:
    where = t.at(args["coordinate"]) if "coordinate" in args else t.here(action)
    t.add(_CLICKS[action], x=where[0], y=where[1])


def _move(t: Translator, action: str, args: Mapping[str, Any]) -> None:
    x, y = t.at(args.get("coordinate"))
    t.add("move", x=x, y=y)


def _drag(t: Translator, action: str, args: Mapping[str, Any]) -> None:
    start = t.here(action)
    end = t.at(args.get("coordinate"))
    t.add("drag_and_drop", start_x=start[0], start_y=start[1], end_x=end[0], end_y=end[1])


def _key(t: Translator, action: str, args: Mapping[str, Any]) -> None:
    keys = keys_of(args.get("keys", args.get("key", args.get("text"))))
    if len(keys) == 1:
        t.add("press_key", key=keys[0])
    else:
        t.add("hotkey", keys=keys)


def _type(t: Translator, action: str, args: Mapping[str, Any]) -> None:
    typed(t, text_arg(args, "text"))


def _finite(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ParseError(f"{what!r} must be a number.")
    return float(value)


def _amount(args: Mapping[str, Any]) -> float:
    return _finite(args.get("pixels", -SCROLL_PIXELS), "pixels")


def _scroll(t: Translator, action: str, args: Mapping[str, Any]) -> None:
    pixels = _amount(args)
    if action == "hscroll":  # sign not documented by Qwen: positive is taken as right
        direction = "right" if pixels > 0 else "left"
    else:
        direction = "up" if pixels > 0 else "down"
    if "coordinate" in args:
        x, y = t.at(args["coordinate"])
    else:
        x, y = t.pointer or (500, 500)
    magnitude = min(999, round(abs(pixels)))
    t.add("scroll", x=x, y=y, direction=direction, magnitude_in_pixels=magnitude)


def _wait(t: Translator, action: str, args: Mapping[str, Any]) -> None:
    seconds = _finite(args.get("time", 1), "time")
    if seconds < 0:
        raise ParseError("'time' must be a number of seconds.")
    t.add("wait", seconds=min(60, round(seconds)))


def _terminate(t: Translator, action: str, args: Mapping[str, Any]) -> None:
    status = args.get("status", "success")
    t.done(t.intent or f"Task ended: {status}.", failed=reports_failure(status))


def _answer(t: Translator, action: str, args: Mapping[str, Any]) -> None:
    text = args.get("text")
    t.done(text if isinstance(text, str) and text else t.intent)


def _screenshot(t: Translator, action: str, args: Mapping[str, Any]) -> None:
    t.add("take_screenshot")


_HANDLERS: dict[str, Callable[[Translator, str, Mapping[str, Any]], None]] = {
    **dict.fromkeys(_CLICKS, _click),
    "mouse_move": _move,
    "left_click_drag": _drag,
    "key": _key,
    "type": _type,
    "scroll": _scroll,
    "hscroll": _scroll,
    "wait": _wait,
    "terminate": _terminate,
    "answer": _answer,
    "screenshot": _screenshot,
}


def translate(t: Translator, call: RawCall) -> None:
    """One ``computer_use`` call into grid calls (or a finish) on ``t``."""
    if call.name not in FUNCTION_NAMES:
        raise ParseError(f"Unknown function {call.name!r}; call computer_use.")
    action = call.arguments.get("action")
    handler = _HANDLERS.get(action) if isinstance(action, str) else None
    if handler is None or not isinstance(action, str):
        raise ParseError(f"Unknown action {action!r}; use one of {', '.join(sorted(_HANDLERS))}.")
    t.source_id = call.id
    handler(t, action, call.arguments)


def parse(message: AssistantMessage, frame: Frame) -> Parsed:
    """A Qwen reply: ``<tool_call>`` blocks (or native tool calls) of ``computer_use``; the
    text around them is the intent. Free text without a call is an error."""
    content = message.get("content")
    text = strip_tool_call_blocks(content) if isinstance(content, str) else ""
    calls = raw_calls(message)
    if not calls:
        raise ParseError("No <tool_call> block: answer with one computer_use call.")
    thought = thought_of(text)
    t = Translator(frame, thought)
    for call in calls:
        translate(t, call)
    return t.result(thought)
