"""OpenAI ``computer_call`` actions in vnc-use's own vocabulary, on the 0-999 grid.

A GA ``computer_call`` carries ``actions[]``; each becomes one or more calls of the Gemini 3.5
desktop action set (:data:`~vnc_use.actions.GEMINI_35_DESKTOP_TABLE`), so the journal, the
approval gate, progress lines and the report never know the provider:

- coordinates are pixels of the screenshot the model was sent; ``x / width * 1000`` on the
  grid (the one grid-to-pixel mapping, :mod:`vnc_use.actions.pixels`, takes them to the
  screen), so a downscaled screenshot maps back to the real screen;
- ``click`` ``left`` / ``right`` / ``wheel`` (the middle button) -> ``click`` /
  ``right_click`` / ``middle_click``; ``back`` / ``forward`` (buttons 8/9) are refused as an
  error for the model (VNC has no such buttons);
- ``keys`` on a mouse action are modifiers held during it: ``key_down`` each, the action,
  ``key_up`` in reverse order;
- ``keypress`` is a chord, pressed together (``hotkey``: all down, then up in reverse), with
  OpenAI's upper-case names (``CTRL``, ``ENTER``, ``ARROWLEFT``, ``CMD`` ...) mapped;
- ``scroll_x`` / ``scroll_y`` are pixels of the screenshot (+y down, +x right), scaled to the
  screen; the desktop turns :data:`~vnc_use.desktops.vnc.PIXELS_PER_NOTCH` (100) pixels into
  one wheel click;
- ``drag`` with two points is ``drag_and_drop``; a longer path is ``mouse_down``, ``move``
  through the middle points, ``mouse_up``;
- ``wait`` (no duration in the API) waits :data:`WAIT_SECONDS`; ``screenshot`` is
  ``take_screenshot`` (the screenshot after the batch answers it).

An action that cannot be translated raises :class:`Untranslatable` with words for the model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "KEY_NAMES",
    "MAX_SCROLL_PIXELS",
    "WAIT_SECONDS",
    "Frame",
    "Untranslatable",
    "VocabularyCall",
    "key_name",
    "translate",
]

WAIT_SECONDS = 2
"""How long an OpenAI ``wait`` waits (the API gives no duration; OpenAI's guide sleeps 2 s)."""

MAX_SCROLL_PIXELS = 900
"""The longest single ``scroll`` call (the vocabulary caps ``magnitude_in_pixels`` at 999);
a longer OpenAI scroll becomes several calls."""

KEY_NAMES: dict[str, str] = {
    "CTRL": "control",
    "CONTROL": "control",
    "SHIFT": "shift",
    "ALT": "alt",
    "OPTION": "alt",
    "META": "meta",
    "CMD": "meta",
    "COMMAND": "meta",
    "SUPER": "meta",
    "WIN": "meta",
    "ENTER": "enter",
    "RETURN": "enter",
    "ESC": "escape",
    "ESCAPE": "escape",
    "TAB": "tab",
    "SPACE": "space",
    "BACKSPACE": "backspace",
    "DELETE": "delete",
    "DEL": "delete",
    "INSERT": "insert",
    "HOME": "home",
    "END": "end",
    "PAGEUP": "pageup",
    "PAGE_UP": "pageup",
    "PAGEDOWN": "pagedown",
    "PAGE_DOWN": "pagedown",
    "UP": "up",
    "DOWN": "down",
    "LEFT": "left",
    "RIGHT": "right",
    "ARROWUP": "up",
    "ARROWDOWN": "down",
    "ARROWLEFT": "left",
    "ARROWRIGHT": "right",
    "MINUS": "minus",
    "PLUS": "plus",
    **{f"F{n}": f"f{n}" for n in range(1, 13)},
}
"""OpenAI's key names (upper-case; the guide's normalisation list plus the sample apps') ->
the names vnc-use's key handling reads. Single characters stand for themselves."""

_BUTTONS = {"left": "click", "right": "right_click", "wheel": "middle_click"}


class Untranslatable(ValueError):
    """An action vnc-use cannot perform; the message is written for the model, ``index`` is
    the action's position in its ``computer_call`` (when known)."""

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


@dataclass(frozen=True)
class Frame:
    """The screenshot the model's pixels refer to, and the screen it shows."""

    image: tuple[int, int]
    """(width, height) of the image sent."""
    screen: tuple[int, int]
    """(width, height) of the real screen (scroll distances are scaled by screen / image)."""


@dataclass(frozen=True)
class VocabularyCall:
    """One call of the vnc-use vocabulary that an OpenAI action became."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)


_Translator = Callable[[Mapping[str, Any], Frame, str], list[VocabularyCall]]


def key_name(raw: Any) -> str:
    """One OpenAI key name as vnc-use's key name (:class:`Untranslatable` when unknown)."""
    if not isinstance(raw, str) or not raw:
        raise Untranslatable(f"key {raw!r} is not a key name")
    if len(raw) == 1:
        return raw
    name = KEY_NAMES.get(raw.upper().replace("-", "_"))
    if name is None:
        name = KEY_NAMES.get(raw.upper().replace("_", ""))
    if name is None:
        raise Untranslatable(
            f"unknown key {raw!r}; use single characters or names such as CTRL, SHIFT, ALT, "
            "META, ENTER, ESC, TAB, SPACE, BACKSPACE, DELETE, ARROWLEFT, PAGEUP, HOME, F5"
        )
    return name


def _grid(value: Any, size: int, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise Untranslatable(f"{what} must be an integer pixel, got {value!r}")
    if not 0 <= value < size:
        raise Untranslatable(f"{what}={value} is outside the {size}-pixel screenshot")
    return min(999, max(0, round(value * 1000 / size)))


def _point(action: Mapping[str, Any], frame: Frame) -> dict[str, int]:
    return {
        "x": _grid(action.get("x"), frame.image[0], "x"),
        "y": _grid(action.get("y"), frame.image[1], "y"),
    }


def _held(
    action: Mapping[str, Any], body: list[VocabularyCall], intent: str
) -> list[VocabularyCall]:
    """``body`` with the action's ``keys`` held around it (down in order, up in reverse)."""
    keys = action.get("keys") or []
    if not isinstance(keys, list):
        raise Untranslatable(f"keys must be a list of key names, got {keys!r}")
    names = [key_name(k) for k in keys]
    down = [VocabularyCall("key_down", {"key": k, "intent": intent}) for k in names]
    up = [VocabularyCall("key_up", {"key": k, "intent": intent}) for k in reversed(names)]
    return [*down, *body, *up]


def _click(action: Mapping[str, Any], frame: Frame, intent: str) -> list[VocabularyCall]:
    button = action.get("button", "left")
    name = _BUTTONS.get(str(button))
    if name is None:
        raise Untranslatable(
            f"mouse button {button!r} is not available on this desktop; use left, right or "
            "wheel (for a browser's back/forward press ALT+LEFT / ALT+RIGHT)"
        )
    call = VocabularyCall(name, {**_point(action, frame), "intent": intent})
    return _held(action, [call], intent)


def _scroll(action: Mapping[str, Any], frame: Frame, intent: str) -> list[VocabularyCall]:
    at = _point(action, frame)
    calls: list[VocabularyCall] = []
    for axis, negative, positive, scale in (
        ("scroll_y", "up", "down", frame.screen[1] / frame.image[1]),
        ("scroll_x", "left", "right", frame.screen[0] / frame.image[0]),
    ):
        value = action.get(axis) or 0
        if not isinstance(value, int) or isinstance(value, bool):
            raise Untranslatable(f"{axis} must be an integer number of pixels, got {value!r}")
        remaining = round(abs(value) * scale)
        direction = negative if value < 0 else positive
        while remaining > 0:
            step = min(remaining, MAX_SCROLL_PIXELS)
            remaining -= step
            args = {**at, "direction": direction, "magnitude_in_pixels": step, "intent": intent}
            calls.append(VocabularyCall("scroll", args))
    if not calls:
        raise Untranslatable("a scroll needs a non-zero scroll_x or scroll_y (pixels)")
    return _held(action, calls, intent)


def _drag(action: Mapping[str, Any], frame: Frame, intent: str) -> list[VocabularyCall]:
    path = action.get("path")
    if not isinstance(path, list) or len(path) < 2 or not all(isinstance(p, Mapping) for p in path):
        raise Untranslatable("a drag needs a path of at least two {x, y} points")
    points = [_point(p, frame) for p in path]
    if len(points) == 2:
        (start, end) = points
        args = {
            "start_x": start["x"],
            "start_y": start["y"],
            "end_x": end["x"],
            "end_y": end["y"],
            "intent": intent,
        }
        return _held(action, [VocabularyCall("drag_and_drop", args)], intent)
    body = [VocabularyCall("mouse_down", {**points[0], "intent": intent})]
    body += [VocabularyCall("move", {**p, "intent": intent}) for p in points[1:-1]]
    body.append(VocabularyCall("mouse_up", {**points[-1], "intent": intent}))
    return _held(action, body, intent)


def _keypress(action: Mapping[str, Any], intent: str) -> list[VocabularyCall]:
    keys = action.get("keys")
    if not isinstance(keys, list) or not keys:
        raise Untranslatable("keypress needs keys: a list of key names, e.g. ['CTRL', 'A']")
    return [VocabularyCall("hotkey", {"keys": [key_name(k) for k in keys], "intent": intent})]


def _on_point(name: str) -> _Translator:
    def run(action: Mapping[str, Any], frame: Frame, intent: str) -> list[VocabularyCall]:
        call = VocabularyCall(name, {**_point(action, frame), "intent": intent})
        return _held(action, [call], intent)

    return run


def _type(action: Mapping[str, Any], frame: Frame, intent: str) -> list[VocabularyCall]:
    text = action.get("text")
    if not isinstance(text, str):
        raise Untranslatable("type needs text")
    return [VocabularyCall("type", {"text": text, "intent": intent})]


def _wait(action: Mapping[str, Any], frame: Frame, intent: str) -> list[VocabularyCall]:
    return [VocabularyCall("wait", {"seconds": WAIT_SECONDS, "intent": intent})]


def _screenshot(action: Mapping[str, Any], frame: Frame, intent: str) -> list[VocabularyCall]:
    return [VocabularyCall("take_screenshot", {"intent": intent})]


_TRANSLATORS: dict[str, _Translator] = {
    "click": _click,
    "double_click": _on_point("double_click"),
    "move": _on_point("move"),
    "scroll": _scroll,
    "drag": _drag,
    "keypress": lambda action, frame, intent: _keypress(action, intent),
    "type": _type,
    "wait": _wait,
    "screenshot": _screenshot,
}


def _one(action: Mapping[str, Any], frame: Frame) -> list[VocabularyCall]:
    kind = action.get("type")
    translator = _TRANSLATORS.get(str(kind))
    if translator is None:
        raise Untranslatable(f"unknown action type {kind!r}; use one of {', '.join(_TRANSLATORS)}")
    return translator(action, frame, f"OpenAI {kind}")


def translate(actions: Sequence[Mapping[str, Any]], frame: Frame) -> list[list[VocabularyCall]]:
    """Each action of a ``computer_call`` as its vocabulary calls, in order.

    Raises :class:`Untranslatable` (its message names the action's position) at the first
    action that cannot run; the caller runs none of the later ones.
    """
    out: list[list[VocabularyCall]] = []
    for i, action in enumerate(actions):
        if not isinstance(action, Mapping):
            raise Untranslatable(f"action {i + 1} is not an object")
        try:
            out.append(_one(action, frame))
        except Untranslatable as exc:
            raise Untranslatable(
                f"action {i + 1} ({action.get('type')}) cannot run: {exc}", i
            ) from None
    return out
