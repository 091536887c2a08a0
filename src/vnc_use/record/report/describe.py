"""How an action reads to a person: its arguments in short, the text it types, its intent.

Progress lines, ``vnc-use show``, the HTML report and the GIF all describe calls through these
functions, so what a person is shown of typed text is decided in one place:
:func:`typed_text`. Events reach here already redacted by the run folder's
:class:`~vnc_use.record.folder.Redactor`; an action marked sensitive (``"sensitive": true`` on
its event or in its arguments) additionally never shows its text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vnc_use.actions import TABLES, point_arguments

__all__ = [
    "HIDDEN",
    "call_args",
    "call_text",
    "grid_pixels",
    "intent",
    "is_sensitive",
    "marker_label",
    "short",
    "typed_text",
]

HIDDEN = "[REDACTED]"
"""What is shown instead of the text of a sensitive action."""

INTENT_KEY = "intent"
_TEXT_KEYS = ("text",)
# grid argument names of a point, by the pixel keys the action event reports it under
_AT, _TO = point_arguments(TABLES)
_POINTS = ((("x", "y"), _AT), (("destination_x", "destination_y"), _TO))


def is_sensitive(event: Mapping[str, Any]) -> bool:
    """True when an action (event or call) is marked sensitive: its typed text is never shown."""
    args = event.get("args")
    flag = event.get("sensitive") or (isinstance(args, Mapping) and args.get("sensitive"))
    return bool(flag)


def typed_text(args: Mapping[str, Any], *, sensitive: bool) -> str | None:
    """The text a call types, as it may be shown (:data:`HIDDEN` when sensitive), or None."""
    for key in _TEXT_KEYS:
        value = args.get(key)
        if isinstance(value, str):
            return HIDDEN if sensitive else value
    return None


def intent(args: Mapping[str, Any]) -> str | None:
    """What the model says the call is for (Gemini 3.5 actions carry an ``intent``)."""
    value = args.get(INTENT_KEY)
    return str(value) if value else None


def short(value: Any, limit: int = 48) -> str:
    """``repr`` of a value on one line, cut to ``limit`` characters."""
    text = repr(value).replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def call_args(args: Mapping[str, Any], *, sensitive: bool, limit: int = 48) -> str:
    """``x=500, y=118, text='hello', press_enter=True`` (without ``intent``)."""
    parts = []
    for key, value in args.items():
        if key in (INTENT_KEY, "sensitive"):
            continue
        shown = typed_text(args, sensitive=sensitive) if key in _TEXT_KEYS else value
        parts.append(f"{key}={short(shown, limit)}")
    return ", ".join(parts)


def call_text(name: str, args: Mapping[str, Any], *, sensitive: bool, limit: int = 48) -> str:
    """``click_at(x=500, y=118)``: the call as the model made it, in short."""
    return f"{name}({call_args(args, sensitive=sensitive, limit=limit)})"


def grid_pixels(
    args: Mapping[str, Any], pixels: Mapping[str, int]
) -> list[tuple[tuple[Any, Any] | None, tuple[int, int]]]:
    """Each target point: its grid coordinates (0-999, as the model sent them) and its pixels."""
    out: list[tuple[tuple[Any, Any] | None, tuple[int, int]]] = []
    for (px, py), grid_keys in _POINTS:
        if px not in pixels or py not in pixels:
            continue
        grid = next(((args[a], args[b]) for a, b in grid_keys if a in args and b in args), None)
        out.append((grid, (int(pixels[px]), int(pixels[py]))))
    return out


def marker_label(name: str, args: Mapping[str, Any], *, sensitive: bool, limit: int = 40) -> str:
    """A short caption for the marker drawn on a screenshot: the action and what it carries."""
    bits = [name]
    text = typed_text(args, sensitive=sensitive)
    if text is not None:
        bits.append(HIDDEN if sensitive else short(text, limit))
    for key in ("keys", "direction", "url"):
        value = args.get(key)
        if value:
            bits.append("+".join(map(str, value)) if isinstance(value, list) else str(value))
    why = intent(args)
    if why:
        bits.append(f"— {why if len(why) <= limit else why[: limit - 1] + '…'}")
    return " ".join(bits)
