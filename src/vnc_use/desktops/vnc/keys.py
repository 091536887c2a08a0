"""Key names as the model and the user spell them, turned into X keysyms for RFB key events
(the VNC client sends them; the RDP bridge's keyboard rules are in
:mod:`vnc_use.desktops.keyboard`).
"""

from __future__ import annotations

from vncdotool.keys import KEYMAP
from vncdotool.rfb import Encoding

__all__ = ["to_vnc_keys"]

_MODIFIERS = {
    "control": "ctrl",
    "ctrl": "ctrl",
    "alt": "alt",
    "option": "alt",
    "shift": "shift",
    "meta": "super",
    "super": "super",
    "command": "super",
    "cmd": "super",
    "win": "super",
    "windows": "super",
}
_NAMED = {
    "enter": "enter",
    "return": "enter",
    "escape": "esc",
    "esc": "esc",
    "tab": "tab",
    "backspace": "bsp",
    "delete": "del",
    "del": "del",
    "space": "space",
    "up": "up",
    "down": "down",
    "left": "left",
    "right": "right",
    "arrowup": "up",
    "arrowdown": "down",
    "arrowleft": "left",
    "arrowright": "right",
    "pageup": "pgup",
    "pgup": "pgup",
    "pagedown": "pgdn",
    "pgdn": "pgdn",
    "home": "home",
    "end": "end",
    "insert": "ins",
    "ins": "ins",
    "minus": "minus",
    "plus": "+",
}
_NAMED.update({f"f{n}": f"f{n}" for n in range(1, 13)})

# vncdotool names this module emits that are not in vncdotool's KEYMAP (single characters
# are sent as keysyms directly).
_CHAR_KEYSYMS = {"\n": 0xFF0D, "\r": 0xFF0D, "\t": 0xFF09}


def _split_combo(keys: str) -> list[str]:
    if keys == "+":
        return ["+"]
    if keys.endswith("++"):
        return [*keys[:-2].split("+"), "+"]
    return keys.split("+")


def to_vnc_keys(keys: str) -> list[str]:
    """Map the model's ``"+"``-joined key names to vncdotool key names, in press order.

    Names are case-insensitive (``control``/``ctrl``, ``alt``, ``shift``,
    ``meta``/``super``/``command``/``cmd``/``win``, ``enter``/``return``, ``escape``/``esc``,
    ``tab``, ``backspace``, ``delete``/``del``, ``space``, arrows ``up``/``arrowup``...,
    ``pageup``/``page_up``/``pagedown``, ``home``, ``end``, ``insert``, ``f1``-``f12``).
    Single characters stand for themselves; ``-`` becomes ``minus`` and ``+`` may be the last
    key (``"control++"``). A single letter keeps its case when it is the only key, is sent
    upper-case with ``shift`` (``"shift+a"`` -> ``["shift", "A"]``) and lower-case with other
    modifiers only (``"Control+A"`` means ctrl+a, as in shortcut notation).
    Unknown names raise :class:`ValueError` naming them.
    """
    if not isinstance(keys, str) or not keys.strip():
        raise ValueError(f"empty key combination {keys!r}")
    tokens = _split_combo(keys.strip())
    out: list[str] = []
    for raw in tokens:
        token = raw if raw == " " else raw.strip()
        if not token:
            raise ValueError(f"empty key name in {keys!r}")
        if len(token) == 1:
            out.append("minus" if token == "-" else token)
            continue
        name = token.lower().replace("_", "").replace(" ", "")
        if name in _MODIFIERS:
            out.append(_MODIFIERS[name])
        elif name in _NAMED:
            out.append(_NAMED[name])
        else:
            raise ValueError(f"unknown key name {token!r} in {keys!r}")
    if len(out) > 1 and len(out[-1]) == 1 and out[-1].isalpha():
        mods = set(out[:-1])
        out[-1] = out[-1].upper() if "shift" in mods else out[-1].lower()
    return out


def _keysym(name: str) -> int:
    """The X keysym for one vncdotool key name or one character."""
    if len(name) == 1:
        if name in _CHAR_KEYSYMS:
            return _CHAR_KEYSYMS[name]
        code = ord(name)
        if code < 0x20 or 0x7F <= code < 0xA0:
            raise ValueError(f"cannot type control character {name!r}")
        # Latin-1 keysyms equal their code points; others use the Unicode keysym range.
        return code if code < 0x100 else 0x01000000 + code
    if name in KEYMAP:
        return int(KEYMAP[name])
    raise ValueError(f"unknown vncdotool key name {name!r}")


def _text_keysyms(text: str) -> list[int]:
    return [_keysym(ch) for ch in text.replace("\r\n", "\n")]


_SHIFT_L = 0xFFE1


def _text_events(text: str, shift: frozenset[int] = frozenset()) -> list[tuple[int, bool]]:
    """Key events typing ``text`` as keysyms; an upper-case ASCII letter (and each keysym in
    ``shift``: the upper cases vnc-use mapped, see :mod:`vnc_use.desktops.xkeymap`) inside a
    Shift press.

    TigerVNC's Xvnc makes an upper-case keysym sent without Shift by toggling Caps Lock
    around the key (measured, issue 30): the text arrives, but the X server's lock state flips
    and apps see Caps Lock presses (a nested remote-desktop client forwards them). With Shift
    held the letter's key matches as it is, on any Latin layout.
    """
    events: list[tuple[int, bool]] = []
    for sym in _text_keysyms(text):
        press = [(sym, True), (sym, False)]
        if ord("A") <= sym <= ord("Z") or sym in shift:
            press = [(_SHIFT_L, True), *press, (_SHIFT_L, False)]
        events += press
    return events


#: QEMU's extended key event pseudo-encoding (keys as scancodes); vncdotool announces it.
QEMU_KEYS = int(Encoding.PSEUDO_QEMU_EXTENDED_KEY_EVENT)


def _maybe_unmapped(keysym: int) -> bool:
    """Whether a US keymap lacks ``keysym`` (so the server may have to add it)."""
    return keysym >= 0x80 and not 0xFF00 <= keysym <= 0xFFFF


def key_label(keysym: int) -> str:
    """The name a key mark on the run's video shows: a named key (Return, ctrl...), never a
    typed character ("" for those)."""
    if 0x20 <= keysym < 0x7F or (keysym >= 0x100 and not 0xFF00 <= keysym <= 0xFFFF):
        return ""
    return str(_KEY_NAMES.get(keysym, ""))


_KEY_NAMES = {sym: name for name, sym in sorted(KEYMAP.items(), reverse=True)}
