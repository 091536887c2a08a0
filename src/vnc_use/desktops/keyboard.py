"""Keyboards with limits: what a desktop behind a scancode-only link can be typed.

An RDP desktop reached through the FreeRDP bridge (:mod:`vnc_use.desktops.rdp`) gets its
keys as *scancodes*: ``xfreerdp`` (FreeRDP 2) turns each X key press into the scancode of a
US keyboard key and sends no Unicode input events. Two things follow, both measured:

* only characters of a US keyboard can be typed (printable ASCII, Tab, Return); anything
  else is refused with one line naming the characters, never dropped silently;
* the bridge's Xvnc (TigerVNC) makes an upper-case keysym sent without Shift by toggling
  Caps Lock around the key; ``xfreerdp`` forwards those toggles (and a synchronize event
  after each), and xrdp received each toggle twice, so ``M`` arrived as ``m``. On the RDP
  path every key is therefore sent as the *scancode* of its US key (QEMU's extended key
  event, which Xvnc presses as that key, with no keysym lookup and no faked modifiers), with
  Shift held when the character needs it (:func:`scancode_events`). No lock key is ever sent:
  the remote lock state is the one FreeRDP's synchronize event set when the bridge connected
  (the bridge's: all off; measured on xrdp, which honours it), and typing never changes it;
* ``xfreerdp`` reads a key's release followed at once by a press of the *same key* as
  auto-repeat and drops the pair (``hello`` arrived as ``helo``, ``:;`` as ``:``). Typing
  therefore waits for a round trip and :attr:`KeyboardLimits.repeat_gap` before pressing
  again a key that was just released (``l`` then ``L``, ``;`` then ``:`` are one key).
"""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "RDP_KEYBOARD",
    "KeyEvent",
    "KeyboardLimits",
    "TextPaster",
    "combo_scancode_events",
    "scancode_events",
    "us_key",
]

#: Shifted characters of a US keyboard and the unshifted character of their key.
_US_SHIFTED = dict(zip('~!@#$%^&*()_+{}|:"<>?', "`1234567890-=[]\\;',./", strict=True))
_TYPEABLE = frozenset(string.printable) - frozenset("\x0b\x0c")


#: XT (set 1) scancodes of the keys of a US keyboard, numbered as QEMU's extended key event
#: wants them (an 0xE0-prefixed key: ``0x80 | code``), by the key's unshifted character.
_US_SCANCODES: dict[str, int] = {
    "`": 0x29, "-": 0x0C, "=": 0x0D, "[": 0x1A, "]": 0x1B, "\\": 0x2B, ";": 0x27, "'": 0x28,
    ",": 0x33, ".": 0x34, "/": 0x35, " ": 0x39, "\t": 0x0F, "\n": 0x1C, "\r": 0x1C,
    **{d: 0x02 + i for i, d in enumerate("123456789")}, "0": 0x0B,
    **{c: 0x10 + i for i, c in enumerate("qwertyuiop")},
    **{c: 0x1E + i for i, c in enumerate("asdfghjkl")},
    **{c: 0x2C + i for i, c in enumerate("zxcvbnm")},
}  # fmt: skip
#: Scancodes of the named keys (vnc-use's vncdotool names) and their X keysyms.
_NAMED_SCANCODES: dict[str, tuple[int, int]] = {
    "enter": (0x1C, 0xFF0D), "esc": (0x01, 0xFF1B), "tab": (0x0F, 0xFF09),
    "bsp": (0x0E, 0xFF08), "del": (0xD3, 0xFFFF), "space": (0x39, 0x20),
    "up": (0xC8, 0xFF52), "down": (0xD0, 0xFF54), "left": (0xCB, 0xFF51),
    "right": (0xCD, 0xFF53), "pgup": (0xC9, 0xFF55), "pgdn": (0xD1, 0xFF56),
    "home": (0xC7, 0xFF50), "end": (0xCF, 0xFF57), "ins": (0xD2, 0xFF63),
    "ctrl": (0x1D, 0xFFE3), "alt": (0x38, 0xFFE9), "shift": (0x2A, 0xFFE1),
    "super": (0xDB, 0xFFEB), "minus": (0x0C, 0x2D),
    **{f"f{n}": (0x3A + n, 0xFFBD + n) for n in range(1, 11)},
    "f11": (0x57, 0xFFC8), "f12": (0x58, 0xFFC9),
}  # fmt: skip
_SHIFT = _NAMED_SCANCODES["shift"]

KeyEvent = tuple[int, int, bool]
"""One key event on the scancode path: ``(keysym, scancode, down)``."""


def us_key(ch: str) -> str:
    """The US keyboard key (as its unshifted character) that types ``ch``."""
    return _US_SHIFTED.get(ch, ch.lower())


def _needs_shift(ch: str) -> bool:
    return ch in _US_SHIFTED or ch.isupper()


def scancode_events(text: str) -> list[KeyEvent]:
    """Key events that type ``text`` (printable ASCII, Tab, Return) on a US keyboard: each
    character the scancode of its key, inside a Shift press when the character needs it."""
    events: list[KeyEvent] = []
    for ch in text:
        base = us_key(ch)
        code = _US_SCANCODES[base]
        sym = _NAMED_SCANCODES["tab" if ch == "\t" else "enter"][1] if ch in "\t\n\r" else ord(ch)
        press = [(sym, code, True), (sym, code, False)]
        if _needs_shift(ch):
            press = [(_SHIFT[1], _SHIFT[0], True), *press, (_SHIFT[1], _SHIFT[0], False)]
        events += press
    return events


def combo_scancode_events(names: list[str]) -> list[KeyEvent] | None:
    """Key events for vncdotool key names pressed together (down in order, up in reverse);
    a character that needs Shift brings its own. None when a name has no US key."""
    keys: list[tuple[int, int]] = []
    for name in names:
        if name in _NAMED_SCANCODES:
            code, sym = _NAMED_SCANCODES[name]
            keys.append((sym, code))
        elif len(name) == 1 and us_key(name) in _US_SCANCODES:
            base = us_key(name)
            if _needs_shift(name) and _SHIFT[::-1] not in keys:
                keys.append((_SHIFT[1], _SHIFT[0]))
            keys.append((ord(name), _US_SCANCODES[base]))
        else:
            return None
    return [(s, c, True) for s, c in keys] + [(s, c, False) for s, c in reversed(keys)]


class TextPaster(Protocol):
    """Puts text the keyboard path cannot type into the desktop through its clipboard."""

    def paste(self, text: str, press_paste: Callable[[], None]) -> None:
        """Offer ``text`` on the clipboard, call ``press_paste`` (Ctrl+V), then restore the
        clipboard; raise :class:`~vnc_use.errors.VncUseError` when the text did not go."""


@dataclass(frozen=True)
class KeyboardLimits:
    """What a desktop's keyboard path can type, and how fast one key may be pressed again."""

    repeat_gap: float
    """Seconds to wait (after a round trip) before pressing again the key just released."""
    why: str
    """Why other characters cannot be typed (ends the one-line refusal)."""
    scancodes: bool = False
    """Send keys as scancodes with Shift held, never a lock key (no Caps Lock toggle)."""
    paster: TextPaster | None = None
    """Pastes text the keyboard cannot type (``--rdp-paste-text``); None: such text is refused."""
    resync: Callable[[], object] | None = None
    """Called before typing: makes the remote lock state the bridge's again (Caps Lock off).
    xorgxrdp applies a synchronize event by pressing Caps Lock when the state differs, and two
    synchronize events close together (xrdp's own when the session attaches, FreeRDP's at
    connect) can both see the old state and toggle it twice: Caps Lock stayed on and a
    loaded machine typed ``aBC`` as ``Abc``. A person may also lock it during a takeover."""

    def typeable(self, text: str) -> bool:
        """Whether every character of ``text`` can be typed."""
        return all(ch in _TYPEABLE for ch in text)

    def refuse_untypeable(self, text: str) -> None:
        """Raise ``ValueError`` naming every character of ``text`` this keyboard cannot type."""
        bad = sorted({ch for ch in text if ch not in _TYPEABLE})
        if bad:
            shown = " ".join(repr(ch) for ch in bad)
            raise ValueError(
                f"cannot type {shown} on this desktop: {self.why}; nothing was typed, type "
                "the text with ASCII characters only"
            )

    @staticmethod
    def chunks(text: str) -> list[str]:
        """``text`` split where one key would be pressed again right after its release."""
        parts = [""]
        for ch in text:
            if parts[-1] and us_key(parts[-1][-1]) == us_key(ch):
                parts.append("")
            parts[-1] += ch
        return [p for p in parts if p]


RDP_KEYBOARD = KeyboardLimits(
    repeat_gap=0.01,
    scancodes=True,
    why="the RDP link (FreeRDP 2's X11 client) sends US keyboard scancodes and no Unicode "
    "input, so only printable ASCII, Tab and Return can be typed",
)
"""The FreeRDP bridge's keyboard (gap measured: a round trip plus 5 ms was enough, 10 ms kept)."""
