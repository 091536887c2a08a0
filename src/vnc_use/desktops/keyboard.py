"""Keyboards with limits: what a desktop behind a scancode-only link can be typed.

An RDP desktop reached through the FreeRDP bridge (:mod:`vnc_use.desktops.rdp`) gets its
keys as *scancodes*: ``xfreerdp`` (FreeRDP 2) turns each X key press into the scancode of a
US keyboard key and sends no Unicode input events. Two things follow, both measured:

* only characters of a US keyboard can be typed (printable ASCII, Tab, Return); anything
  else is refused with one line naming the characters, never dropped silently;
* ``xfreerdp`` reads a key's release followed at once by a press of the *same key* as
  auto-repeat and drops the pair (``hello`` arrived as ``helo``, ``:;`` as ``:``). Typing
  therefore waits for a round trip and :attr:`KeyboardLimits.repeat_gap` before pressing
  again a key that was just released (``l`` then ``L``, ``;`` then ``:`` are one key).
"""

from __future__ import annotations

import string
from dataclasses import dataclass

__all__ = ["RDP_KEYBOARD", "KeyboardLimits", "us_key"]

#: Shifted characters of a US keyboard and the unshifted character of their key.
_US_SHIFTED = dict(zip('~!@#$%^&*()_+{}|:"<>?', "`1234567890-=[]\\;',./", strict=True))
_TYPEABLE = frozenset(string.printable) - frozenset("\x0b\x0c")


def us_key(ch: str) -> str:
    """The US keyboard key (as its unshifted character) that types ``ch``."""
    return _US_SHIFTED.get(ch, ch.lower())


@dataclass(frozen=True)
class KeyboardLimits:
    """What a desktop's keyboard path can type, and how fast one key may be pressed again."""

    repeat_gap: float
    """Seconds to wait (after a round trip) before pressing again the key just released."""
    why: str
    """Why other characters cannot be typed (ends the one-line refusal)."""

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
    why="the RDP link (FreeRDP 2's X11 client) sends US keyboard scancodes and no Unicode "
    "input, so only printable ASCII, Tab and Return can be typed",
)
"""The FreeRDP bridge's keyboard (gap measured: a round trip plus 5 ms was enough, 10 ms kept)."""
