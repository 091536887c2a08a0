"""Claude's computer actions in vnc-use's own vocabulary, on the 0-999 grid.

Every member of the toolset (``computer_toolset_20260801``, one ``tool_use`` per action, ``name``
the member) and every action of the legacy tools (``name: "computer"``, ``input.action``) is
read into calls of the Gemini 3.5 desktop action set; one ``tool_use`` may become several calls,
all carrying its id (a modifier-held click is ``key_down`` ..., ``click``, ``key_up`` ...). Points
are pixels of the image sent (``Frame``), mapped onto the grid by ``round(v * 1000 / extent)``;
a point off the image is an error for that block, never clamped (the SDK guide's rule).

``cursor_position`` and ``zoom`` take a screenshot on the desktop; what the model is answered
(the pointer in image pixels, a full-resolution crop of the region) is built from the block's
:class:`Reply` when the results go back (:mod:`.request`). A block that cannot run becomes one
call carrying ``{"problem": ...}`` (the planner's ``validate`` refuses it with that message, so
it is answered with ``is_error`` and nothing runs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MEMBERS",
    "NOT_EXECUTED",
    "PIXELS_PER_CLICK",
    "PROBLEM_KEY",
    "Frame",
    "Reply",
    "Translation",
    "ack_text",
    "translate",
]

GRID = 1000
PROBLEM_KEY = "problem"
NOT_EXECUTED = "Not executed: an earlier computer action in this turn failed."
"""The SDK's answer to a block left unrun after a failure (``_runnable.py``): the toolset's
batch rule is to stop at the first block that cannot run."""
PIXELS_PER_CLICK = 100
"""Pixels per wheel click: how vnc-use's ``scroll`` turns ``magnitude_in_pixels`` into clicks
(:data:`vnc_use.desktops.vnc.PIXELS_PER_NOTCH`)."""
_MAX_SCROLL_CALL = 9
"""Wheel clicks per ``scroll`` call (``magnitude_in_pixels`` is at most 999)."""
_MODIFIERS = {"shift", "ctrl", "control", "alt", "super", "meta", "cmd", "command", "win"}

_CLICKS = {
    "left_click": "click",
    "right_click": "right_click",
    "middle_click": "middle_click",
    "double_click": "double_click",
    "triple_click": "triple_click",
}
MEMBERS: tuple[str, ...] = (
    "screenshot",
    "zoom",
    *_CLICKS,
    "left_click_drag",
    "mouse_move",
    "left_mouse_down",
    "left_mouse_up",
    "cursor_position",
    "scroll",
    "type",
    "key",
    "hold_key",
    "wait",
)
"""The 17 members of the toolset (the legacy tools' actions use the same names)."""

_ACKS = {
    "left_click": "Clicked.",
    "right_click": "Right-clicked.",
    "middle_click": "Middle-clicked.",
    "double_click": "Double-clicked.",
    "triple_click": "Triple-clicked.",
    "left_click_drag": "Dragged.",
    "mouse_move": "Moved the mouse.",
    "left_mouse_down": "Left mouse button pressed.",
    "left_mouse_up": "Left mouse button released.",
    "type": "Typed.",
    "screenshot": "Screenshot taken.",
    "zoom": "Zoomed.",
}


def ack_text(member: str, args: Mapping[str, Any]) -> str:
    """The SDK's own acknowledgement of a member that ran (``anthropic`` ``_render.py``)."""
    if member == "scroll":
        return f"Scrolled {args.get('scroll_direction')}."
    if member == "key":
        return f"Pressed {args.get('text')}."
    if member == "hold_key":
        return f"Held {args.get('text')} for {args.get('duration')}s."
    if member == "wait":
        return f"Waited {args.get('duration')}s."
    return _ACKS.get(member, "OK")


@dataclass(frozen=True)
class Frame:
    """The image the model's points refer to (its size as sent) and the pointer, in pixels of
    that image (None: not known yet)."""

    width: int
    height: int
    pointer: tuple[float, float] | None = None


@dataclass
class Reply:
    """What answering one ``tool_use`` block needs besides the calls' results."""

    id: str
    member: str
    args: dict[str, Any]
    toolset: bool
    cursor: list[float] | None = None
    """``cursor_position``: the pointer in pixels of the image sent."""
    zoom: list[float] | None = None
    """``zoom``: the region as fractions of the screen (x0, y0, x1, y1)."""

    def record(self) -> dict[str, Any]:
        """JSON-able, for the planner's turn record."""
        out: dict[str, Any] = {
            "id": self.id,
            "member": self.member,
            "args": self.args,
            "toolset": self.toolset,
        }
        if self.cursor is not None:
            out["cursor"] = self.cursor
        if self.zoom is not None:
            out["zoom"] = self.zoom
        return out


@dataclass
class Translation:
    """The calls of a turn in vnc-use's vocabulary, and how to answer each block."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    """``{"id", "name", "args"}`` on the grid, in order."""
    replies: list[Reply] = field(default_factory=list)
    pointer: tuple[float, float] | None = None
    """The pointer after the turn, in pixels of the image sent."""


class _Problem(ValueError):
    """A block that cannot run; the message is for the model."""


class _Block:
    """Translates one block, adding its calls."""

    def __init__(self, out: Translation, frame: Frame, reply: Reply, intent: str) -> None:
        self.out = out
        self.frame = frame
        self.reply = reply
        self.intent = intent or reply.member.replace("_", " ")
        self.calls: list[dict[str, Any]] = []

    def add(self, name: str, **args: Any) -> None:
        self.calls.append(
            {"id": self.reply.id, "name": name, "args": {**args, "intent": self.intent}}
        )

    def point(self, name: str, required: bool = True) -> tuple[int, int]:
        """The grid point of ``name`` (or of the pointer when absent and not required)."""
        value = self.reply.args.get(name)
        if value is None:
            if required:
                raise _Problem(f"{name} is required: give [x, y] in pixels of the screenshot.")
            if self.out.pointer is None:
                raise _Problem(f"{name} is needed: the cursor's place is not known yet.")
            return self.grid(self.out.pointer)
        if (
            not isinstance(value, Sequence)
            or isinstance(value, str)
            or len(value) != 2
            or not all(_is_number(v) for v in value)
        ):
            raise _Problem(f"{name}: expected [x, y]")
        xy = (float(value[0]), float(value[1]))
        grid = self.grid(xy)
        self.out.pointer = xy
        return grid

    def grid(self, xy: tuple[float, float]) -> tuple[int, int]:
        return _axis(xy[0], self.frame.width, "x"), _axis(xy[1], self.frame.height, "y")

    def modifiers(self) -> list[str]:
        text = self.reply.args.get("text")
        if text is None or text == "":
            return []
        if not isinstance(text, str):
            raise _Problem("text: the modifiers to hold, e.g. 'shift' or 'ctrl+shift'")
        keys = [k.strip() for k in text.split("+") if k.strip()]
        unknown = [k for k in keys if k.lower() not in _MODIFIERS]
        if unknown or not keys:
            raise _Problem(f"text: {text!r} is not a modifier (shift, ctrl, alt, super)")
        return keys

    def held(self, keys: list[str], add_action: Any) -> None:
        for key in keys:
            self.add("key_down", key=key)
        add_action()
        for key in reversed(keys):
            self.add("key_up", key=key)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _axis(value: float, extent: int, axis: str) -> int:
    if extent <= 0:
        raise _Problem("No screenshot has been taken yet: take one before pointing.")
    if not 0 <= value < extent:
        raise _Problem(
            f"{axis}={value:g} is outside the display (0 to {extent - 1}); give a point on the "
            "screenshot."
        )
    return min(GRID - 1, round(value * GRID / extent))


def _number(args: Mapping[str, Any], name: str, low: float, high: float, default: Any) -> float:
    value = args.get(name, default)
    if not _is_number(value) or not low <= value <= high:
        raise _Problem(f"{name} must be a number from {low:g} to {high:g}, got {value!r}")
    return float(value)


def _keys(text: Any) -> list[str]:
    if not isinstance(text, str) or not text.strip():
        raise _Problem("text: the key or combination to press, e.g. 'Return' or 'ctrl+s'")
    if text.strip() == "+":
        return ["+"]
    keys = [k.strip() for k in text.strip().split("+")]
    if not all(keys):
        raise _Problem(f"text: {text!r} is not a key combination")
    return keys


def _press(b: _Block, keys: list[str]) -> None:
    if len(keys) == 1:
        b.add("press_key", key=keys[0])
    else:
        b.add("hotkey", keys=keys)


def _click(b: _Block) -> None:
    name = _CLICKS[b.reply.member]
    mods = b.modifiers()
    x, y = b.point("coordinate", required=False)
    b.held(mods, lambda: b.add(name, x=x, y=y))


def _drag(b: _Block) -> None:
    mods = b.modifiers()
    sx, sy = b.point("start_coordinate", required=False)
    ex, ey = b.point("coordinate")
    b.held(mods, lambda: b.add("drag_and_drop", start_x=sx, start_y=sy, end_x=ex, end_y=ey))


def _scroll(b: _Block) -> None:
    args = b.reply.args
    direction = args.get("scroll_direction")
    if direction not in ("up", "down", "left", "right"):
        raise _Problem("scroll_direction must be up, down, left or right")
    amount = int(_number(args, "scroll_amount", 1, 100, None))
    mods = b.modifiers()
    x, y = b.point("coordinate", required=False)

    def wheel() -> None:
        left = amount
        while left > 0:
            clicks = min(left, _MAX_SCROLL_CALL)
            b.add(
                "scroll",
                x=x,
                y=y,
                direction=direction,
                magnitude_in_pixels=clicks * PIXELS_PER_CLICK,
            )
            left -= clicks

    b.held(mods, wheel)


def _key(b: _Block) -> None:
    keys = _keys(b.reply.args.get("text"))
    repeat = int(_number(b.reply.args, "repeat", 1, 100, 1))
    for _ in range(repeat):
        _press(b, keys)


def _hold_key(b: _Block) -> None:
    keys = _keys(b.reply.args.get("text"))
    seconds = _number(b.reply.args, "duration", 0, 300, None)
    b.held(keys, lambda: b.add("wait", seconds=math.ceil(seconds)))


def _wait(b: _Block) -> None:
    b.add("wait", seconds=math.ceil(_number(b.reply.args, "duration", 0, 300, 1)))


def _type(b: _Block) -> None:
    text = b.reply.args.get("text")
    if not isinstance(text, str):
        raise _Problem("text: the text to type")
    b.add("type", text=text)


def _at_pointer(b: _Block, name: str) -> None:
    if b.out.pointer is None:
        raise _Problem("the cursor's place is not known yet: use mouse_move first")
    x, y = b.grid(b.out.pointer)
    b.add(name, x=x, y=y)


def _cursor(b: _Block) -> None:
    if b.out.pointer is None:
        raise _Problem("the cursor's place is not known yet: use mouse_move first")
    b.reply.cursor = [b.out.pointer[0], b.out.pointer[1]]
    b.add("take_screenshot")


def _zoom(b: _Block) -> None:
    region = b.reply.args.get("region")
    if (
        not isinstance(region, Sequence)
        or isinstance(region, str)
        or len(region) != 4
        or not all(_is_number(v) for v in region)
    ):
        raise _Problem("region: expected [x0, y0, x1, y1]")
    x0, y0, x1, y1 = (float(v) for v in region)
    w, h = b.frame.width, b.frame.height
    if not (0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h):
        raise _Problem(f"region {list(region)} is not a box inside the display ({w}x{h})")
    b.reply.zoom = [x0 / w, y0 / h, x1 / w, y1 / h]
    b.add("take_screenshot")


_HANDLERS: dict[str, Any] = {
    **dict.fromkeys(_CLICKS, _click),
    "left_click_drag": _drag,
    "mouse_move": lambda b: b.add("move", **dict(zip("xy", b.point("coordinate"), strict=True))),
    "left_mouse_down": lambda b: _at_pointer(b, "mouse_down"),
    "left_mouse_up": lambda b: _at_pointer(b, "mouse_up"),
    "cursor_position": _cursor,
    "scroll": _scroll,
    "type": _type,
    "key": _key,
    "hold_key": _hold_key,
    "wait": _wait,
    "screenshot": lambda b: b.add("take_screenshot"),
    "zoom": _zoom,
}


def _reply_of(block: Mapping[str, Any]) -> Reply:
    """The block as a :class:`Reply`: toolset (``toolset_name: "computer"``) or legacy."""
    raw = block.get("input")
    args = dict(raw) if isinstance(raw, Mapping) else {}
    if block.get("toolset_name") == "computer":
        return Reply(str(block.get("id")), str(block.get("name")), args, toolset=True)
    member = args.pop("action", None)
    return Reply(str(block.get("id")), str(member), args, toolset=False)


def translate(blocks: Sequence[Mapping[str, Any]], frame: Frame, intent: str) -> Translation:
    """Every ``tool_use`` block of a turn, in order (see the module docstring)."""
    out = Translation(pointer=frame.pointer)
    failed = False
    for block in blocks:
        reply = _reply_of(block)
        out.replies.append(reply)
        b = _Block(out, frame, reply, intent)
        handler = _HANDLERS.get(reply.member)
        if failed:  # the batch stops at its first failure; later blocks are answered so
            out.calls.append(
                {"id": reply.id, "name": reply.member, "args": {PROBLEM_KEY: NOT_EXECUTED}}
            )
            continue
        try:
            if block.get("name") != "computer" and block.get("toolset_name") != "computer":
                raise _Problem(f"unknown tool {block.get('name')!r}: use the computer tool")
            if handler is None:
                raise _Problem(
                    f"unknown computer action {reply.member!r}; known: {', '.join(MEMBERS)}"
                )
            handler(b)
        except _Problem as exc:
            failed = True
            b.calls = [
                {
                    "id": reply.id,
                    "name": reply.member,
                    "args": {
                        PROBLEM_KEY: f"invalid input for computer member '{reply.member}': {exc}"
                    },
                }
            ]
        out.calls.extend(b.calls)
    return out
