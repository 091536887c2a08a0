"""Dialect ``tools``: native OpenAI function calling of the Gemini 3.5 desktop action set.

vnc-use's own contract, for models that call functions well. Every action of
:data:`~vnc_use.actions.GEMINI_35_DESKTOP_TABLE` is declared as a function with the same
argument names, coordinates on the 0-999 grid and ``intent`` optional (filled from the
reply's text, else the action's name), plus ``finish(text)``.

Finishing (the convention): a ``finish(text)`` call, or a reply with text and no call at all
(OpenAI's ``finish_reason: "stop"``), ends the run with that text. An empty reply is an error.
A point may also come as a box, as small models often answer: ``[x, y]``,
``[x1, y1, x2, y2]`` or ``[[x1, y1], [x2, y2]]`` (its centre), under ``x`` or under
``point`` / ``coordinate`` / ``box``.
"""

from __future__ import annotations

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
    strip_tool_call_blocks,
    thought_of,
    typed,
)
from vnc_use.providers.openai_compat.resize import PixelLimits

__all__ = ["FINISH", "SYSTEM_PROMPT", "Tools", "function_tools"]

FINISH = "finish"
"""The declared function that ends the run with its ``text``."""

SYSTEM_PROMPT = (
    "You operate a computer desktop through the functions you are given, looking at "
    "screenshots. Coordinates are on a 0-999 grid laid over the screenshot whatever its size: "
    "(0, 0) is the top-left corner, (999, 999) the bottom-right. Call one or more functions "
    "per turn; after they run you get a new screenshot. Say in `intent` what each call is "
    "for. When the task is done, call finish(text) with your answer."
)

_GRID = {"type": "integer", "minimum": 0, "maximum": 999}
_POINT = {"x": _GRID, "y": _GRID}
_KEY = {"key": {"type": "string", "description": "a key name, e.g. Enter, shift, a"}}

_FUNCTIONS: list[tuple[str, str, dict[str, Any], list[str]]] = [
    ("click", "Left click at a grid point.", _POINT, ["x", "y"]),
    ("double_click", "Double click at a grid point.", _POINT, ["x", "y"]),
    ("triple_click", "Triple click at a grid point.", _POINT, ["x", "y"]),
    ("middle_click", "Middle click at a grid point.", _POINT, ["x", "y"]),
    ("right_click", "Right click at a grid point.", _POINT, ["x", "y"]),
    ("mouse_down", "Press and hold the left button at a grid point.", _POINT, ["x", "y"]),
    ("mouse_up", "Release the left button at a grid point.", _POINT, ["x", "y"]),
    ("move", "Move the pointer to a grid point.", _POINT, ["x", "y"]),
    (
        "type",
        "Type text where the keyboard focus is.",
        {"text": {"type": "string"}, "press_enter": {"type": "boolean", "default": False}},
        ["text"],
    ),
    (
        "drag_and_drop",
        "Drag from (start_x, start_y) to (end_x, end_y), grid points.",
        {"start_x": _GRID, "start_y": _GRID, "end_x": _GRID, "end_y": _GRID},
        ["start_x", "start_y", "end_x", "end_y"],
    ),
    (
        "wait",
        "Wait some seconds.",
        {"seconds": {"type": "integer", "minimum": 0, "default": 1}},
        [],
    ),
    ("press_key", "Press and release one key.", _KEY, ["key"]),
    ("key_down", "Press and hold one key.", _KEY, ["key"]),
    ("key_up", "Release one held key.", _KEY, ["key"]),
    (
        "hotkey",
        "Press a key combination, e.g. ['control', 'c'].",
        {"keys": {"type": "array", "items": {"type": "string"}}},
        ["keys"],
    ),
    ("take_screenshot", "Answer with a fresh screenshot.", {}, []),
    (
        "scroll",
        "Scroll at a grid point by some pixels.",
        {
            **_POINT,
            "direction": {"type": "string", "enum": ["up", "down", "left", "right"]},
            "magnitude_in_pixels": {
                "type": "integer",
                "minimum": 0,
                "maximum": 999,
                "default": 300,
            },
        },
        ["x", "y", "direction"],
    ),
]

_INTENT = {"intent": {"type": "string", "description": "what the action is meant to achieve"}}


def function_tools() -> list[dict[str, Any]]:
    """The ``tools`` request parameter: the 3.5 desktop set (intent optional) and finish."""
    tools = [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {
                    "type": "object",
                    "properties": {**params, **_INTENT},
                    "required": required,
                },
            },
        }
        for name, description, params, required in _FUNCTIONS
    ]
    tools.append(
        {
            "type": "function",
            "function": {
                "name": FINISH,
                "description": "The task is done: end with this answer or summary.",
                "parameters": {
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"],
                },
            },
        }
    )
    return tools


_NAMES = frozenset(name for name, *_ in _FUNCTIONS)
_POINT_ACTIONS = frozenset(name for name, _, params, _ in _FUNCTIONS if params is _POINT)
_BOX_KEYS = ("point", "coordinate", "box", "bbox", "position")
_POINT_KEYS = frozenset(
    {"x", "y", "start_x", "start_y", "end_x", "end_y", "destination_x", "destination_y", *_BOX_KEYS}
)


def _point_of(args: dict[str, Any], x: str, y: str, aliases: tuple[str, ...]) -> Any:
    """The point value under ``x``/``y`` (popped), or under one of ``aliases`` (popped)."""
    for alias in aliases:
        if alias in args:
            return args.pop(alias)
    if x in args and not isinstance(args[x], (int, float, str)):
        args.pop(y, None)
        return args.pop(x)  # a box under "x"
    if x not in args or y not in args:
        raise ParseError(f"Missing the point: give {x} and {y} (0-999).")
    return [args.pop(x), args.pop(y)]


def _translate(t: Translator, call: RawCall) -> None:
    args = dict(call.arguments)
    name = call.name
    if name == FINISH:
        text = args.get("text")
        t.done(text if isinstance(text, str) else "")
        return
    if name not in _NAMES:
        raise ParseError(f"Unknown function {name!r}.")
    intent = args.pop("intent", None)
    saved = t.intent
    if isinstance(intent, str) and intent.strip():
        t.intent = intent.strip()
    if name in _POINT_ACTIONS or name == "scroll":
        args["x"], args["y"] = t.at(_point_of(args, "x", "y", _BOX_KEYS))
    elif name == "drag_and_drop":
        _drag(t, args)
    elif name == "hotkey" and isinstance(args.get("keys"), str):
        args["keys"] = keys_of(args["keys"])  # "ctrl+c"
    elif _POINT_KEYS & args.keys():
        raise ParseError(f"{name} takes no point; click first, then call {name}.")
    if name == "type" and isinstance(args.get("text"), str):
        press = args.pop("press_enter", False)
        typed(t, args.pop("text"))
        if press is True:
            t.calls[-1].args["press_enter"] = True
        t.calls[-1].args.update(args)
    else:
        t.add(name, **args)
    t.intent = saved


def _drag(t: Translator, args: dict[str, Any]) -> None:
    if "destination_x" in args or "destination_y" in args:  # the 2.5 spelling
        args["start_x"], args["start_y"] = args.pop("x", None), args.pop("y", None)
        args["end_x"], args["end_y"] = (
            args.pop("destination_x", None),
            args.pop("destination_y", None),
        )
    start = _point_of(args, "start_x", "start_y", ("start", "start_point", "start_box"))
    end = _point_of(args, "end_x", "end_y", ("end", "end_point", "end_box"))
    args["start_x"], args["start_y"] = t.at(start)
    args["end_x"], args["end_y"] = t.at(end)


class Tools:
    """Native function calling on the 0-999 grid (any model served with tool calling)."""

    name = "tools"
    resize: PixelLimits | None = None
    """The screenshot goes as it is (grid coordinates do not depend on its size)."""

    def system_prompt(self, image_size: tuple[int, int] | None) -> str:
        """How the grid and finishing work."""
        return SYSTEM_PROMPT

    def task_text(self, task: str) -> str:
        """The task as it is."""
        return task

    def tools(self) -> list[dict[str, Any]] | None:
        """:func:`function_tools`."""
        return function_tools()

    def frame(self, image_size: tuple[int, int] | None, pointer: tuple[int, int] | None) -> Frame:
        """The grid itself (1000 steps a side)."""
        return Frame(1000, 1000, pointer)

    def parse(self, message: AssistantMessage, frame: Frame) -> Parsed:
        """Tool calls into grid calls; a text-only reply is a finish."""
        content = message.get("content")
        text = content.strip() if isinstance(content, str) else ""
        calls = raw_calls(message)
        thought = thought_of(strip_tool_call_blocks(text))
        if not calls:
            if not text:
                raise ParseError("The answer is empty: call a function, or finish(text).")
            return Parsed(finished=True, text=text, thought=thought)
        t = Translator(frame, thought)
        for call in calls:
            t.source_id = call.id
            _translate(t, call)
        return t.result(thought)
