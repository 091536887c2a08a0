"""Text in any script on an X-based VNC server: keys mapped for it before it is typed (issue 38).

An X server types a character only when a keycode of its keyboard map carries the character's
keysym. TigerVNC's ``Xvnc`` adds a missing keysym to a *spare* keycode (one the map leaves
empty) the first time a client presses it; TigerVNC 1.12 (Debian 12, Ubuntu 22.04) never frees
one again, and once the spare keycodes are used it drops every further new character with only
a line in its own log ("Failure adding new keysym"; ``vncAddKeysym`` in
``unix/xserver/hw/vnc/vncInputXKB.c``; reused since 1.15). Its default map has 19 spare
keycodes: measured, a Russian sentence arrived up to its 27th character, then with holes; a
Greek one after it as its spaces only; a Japanese one as nothing.

What vnc-use does, so that text arrives exactly or the step fails saying which characters
could not be typed:

* **An Xvnc on this machine whose display vnc-use can open** (the local desktop of ``vnc-use
  desktop up``, a ``vncserver`` of the same user, the tests' desktops; found from the process
  that runs ``Xvnc`` with that ``-rfbport``): before typing, vnc-use itself puts the
  characters the map lacks on the spare keycodes (a lower/upper case pair on one keycode, the
  upper one typed with Shift), so Xvnc never has to add one. A text needing more keycodes than
  there are spare ones is typed in rounds: between rounds vnc-use waits until the server has
  handed over every key and the screen is quiet (the app has taken them), then maps the next
  characters onto the same keycodes. When the connection closes, the keycodes vnc-use
  filled are emptied again (the pool is the server's for the next client). Spare keycodes
  are those with no keysym, or with only Unicode keysyms (what Xvnc or vnc-use added; the
  keys of the map, such as the keypad's ``±``, are never taken).
* **Any other VNC server** (remote, or one vnc-use cannot open): its keymap cannot be seen and
  what arrived cannot be checked (no OCR). A connection types at most
  :data:`REMOTE_NEW_KEYS` distinct characters beyond ASCII (a case pair counts once, the pool
  of a fresh TigerVNC 1.12), and a text that would go past that is refused before any key is
  sent, naming the characters: never a silent loss. On wayvnc (its desktop name ``WayVNC``),
  which drops every character its keyboard layout lacks, nothing beyond ASCII is typed.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

__all__ = [
    "REMOTE_NEW_KEYS",
    "KeyRound",
    "RemoteKeys",
    "XKeymap",
    "case_pair",
    "needs_key",
    "plan_rounds",
    "refocus_keyboard",
    "xvnc_display",
]

#: Distinct characters beyond ASCII (case pairs counted once) one connection to a VNC server
#: whose keymap vnc-use cannot see may type: the spare keycodes of a fresh TigerVNC 1.12 Xvnc
#: (its default map, measured).
REMOTE_NEW_KEYS = 19

_UNICODE_KEYSYMS = range(0x01000100, 0x01110000)
_LATIN1_UPPER = range(0xA0, 0x100)


def needs_key(keysym: int) -> bool:
    """Whether ``keysym`` is a typed character a US keymap lacks (Latin-1 or Unicode)."""
    return keysym in _LATIN1_UPPER or keysym in _UNICODE_KEYSYMS


def _char(keysym: int) -> str:
    return chr(keysym - 0x01000000 if keysym >= 0x01000000 else keysym)


def _keysym_of(ch: str) -> int:
    code = ord(ch)
    return code if code < 0x100 else 0x01000000 + code


def case_pair(keysym: int) -> tuple[int, int]:
    """``(lower, upper)`` keysyms of a character (the same twice when it has no case)."""
    ch = _char(keysym)
    lower, upper = ch.lower(), ch.upper()
    if len(lower) != 1 or len(upper) != 1 or lower == upper or lower.upper() != upper:
        return keysym, keysym
    if _char(_keysym_of(lower)) != lower or ord(lower) < 0xA0 or ord(upper) < 0xA0:
        return keysym, keysym
    return _keysym_of(lower), _keysym_of(upper)


def _spare(keysyms: Sequence[int]) -> bool:
    """A keycode with no keysym, or only Unicode ones (what Xvnc or vnc-use added: a real key
    has a named keysym, such as the keypad's ``plusminus``, which stays as it is)."""
    used = [k for k in keysyms if k]
    return all(k in _UNICODE_KEYSYMS for k in used) and len(set(used)) <= 2


# ------------------------------------------------------------------------- finding the Xvnc
def xvnc_display(host: str, port: int, proc: Path = Path("/proc")) -> str | None:
    """The display (``":N"``) of the Xvnc on this machine that serves VNC on ``port``, when
    ``host`` is this machine and one of the user's processes is that Xvnc; else None."""
    if host not in ("127.0.0.1", "localhost", "::1", "[::1]"):
        return None
    uid = os.getuid()
    try:
        entries = list(proc.iterdir())
    except OSError:  # no /proc (macOS): no Xvnc to find
        return None
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        display = _xvnc_on_port([a.decode(errors="replace") for a in argv if a], port)
        if display is not None:
            return display
    return None


def _xvnc_on_port(argv: list[str], port: int) -> str | None:
    if not argv or not argv[0].endswith("Xvnc"):
        return None
    number = next((a[1:] for a in argv[1:] if a.startswith(":") and a[1:].isdigit()), None)
    if number is None:
        return None
    rfbport = 5900 + int(number)
    for i, arg in enumerate(argv):
        name, _, value = arg.lstrip("-").partition("=")
        if name.lower() == "rfbport":
            value = value or (argv[i + 1] if i + 1 < len(argv) else "")
            if value.isdigit():
                rfbport = int(value)
    return f":{number}" if rfbport == port else None


# ------------------------------------------------------------------------- the X keymap
class _X:
    """The few libX11 calls the keymap needs (ctypes; X errors are recorded, never fatal)."""

    _lock = threading.Lock()
    _lib: ctypes.CDLL | None = None
    _errors: ClassVar[list[int]] = []
    _handler: object = None

    @classmethod
    def lib(cls) -> ctypes.CDLL | None:
        with cls._lock:
            if cls._lib is None:
                name = ctypes.util.find_library("X11") or "libX11.so.6"
                try:
                    lib = ctypes.CDLL(name)
                except OSError:
                    return None
                lib.XOpenDisplay.restype = ctypes.c_void_p
                lib.XOpenDisplay.argtypes = [ctypes.c_char_p]
                lib.XCloseDisplay.argtypes = [ctypes.c_void_p]
                lib.XSync.argtypes = [ctypes.c_void_p, ctypes.c_int]
                lib.XDisplayKeycodes.argtypes = [
                    ctypes.c_void_p,
                    ctypes.POINTER(ctypes.c_int),
                    ctypes.POINTER(ctypes.c_int),
                ]
                lib.XGetKeyboardMapping.restype = ctypes.POINTER(ctypes.c_ulong)
                lib.XGetKeyboardMapping.argtypes = [
                    ctypes.c_void_p,
                    ctypes.c_ubyte,
                    ctypes.c_int,
                    ctypes.POINTER(ctypes.c_int),
                ]
                lib.XChangeKeyboardMapping.argtypes = [
                    ctypes.c_void_p,
                    ctypes.c_int,
                    ctypes.c_int,
                    ctypes.POINTER(ctypes.c_ulong),
                    ctypes.c_int,
                ]
                lib.XFree.argtypes = [ctypes.c_void_p]
                lib.XGetInputFocus.argtypes = [
                    ctypes.c_void_p,
                    ctypes.POINTER(ctypes.c_ulong),
                    ctypes.POINTER(ctypes.c_int),
                ]
                lib.XSetInputFocus.argtypes = [
                    ctypes.c_void_p,
                    ctypes.c_ulong,
                    ctypes.c_int,
                    ctypes.c_ulong,
                ]
                handler_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)

                def on_error(_display: int, event: int) -> int:
                    cls._errors.append(1)
                    return 0

                cls._handler = handler_type(on_error)  # kept: libX11 holds a pointer to it
                lib.XSetErrorHandler.argtypes = [handler_type]
                lib.XSetErrorHandler(cls._handler)
                cls._lib = lib
            return cls._lib


def refocus_keyboard(display: str) -> bool:
    """Take the keyboard focus of X display ``display`` away and give it back, so the window
    that had it gets FocusOut then FocusIn; False when the display cannot be opened.

    On an RDP bridge's display this makes ``xfreerdp`` send a *synchronize* event with the
    bridge's lock state (Caps Lock off) again (``xf_keyboard_focus_in``): see
    :attr:`vnc_use.desktops.keyboard.KeyboardLimits.resync`.
    """
    lib = _X.lib()
    if lib is None:
        return False
    dpy = lib.XOpenDisplay(display.encode())
    if not dpy:
        return False
    try:
        window, revert = ctypes.c_ulong(), ctypes.c_int()
        lib.XGetInputFocus(dpy, ctypes.byref(window), ctypes.byref(revert))
        lib.XSetInputFocus(dpy, 0, 0, 0)  # None, RevertToNone, CurrentTime
        lib.XSync(dpy, 0)
        lib.XSetInputFocus(dpy, window.value, revert.value, 0)  # back where it was
        lib.XSync(dpy, 0)
    finally:
        lib.XCloseDisplay(dpy)
    return True


@dataclass
class XKeymap:
    """The keyboard map of the X display ``display`` (an Xvnc on this machine)."""

    display: str
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def open(cls, display: str) -> XKeymap | None:
        """The keymap of ``display`` when it can be opened and read; else None."""
        keymap = cls(display)
        try:
            keymap.mapping()
        except OSError:
            return None
        return keymap

    @contextlib.contextmanager
    def _connection(self) -> Iterator[tuple[ctypes.CDLL, int]]:
        lib = _X.lib()
        if lib is None:
            raise OSError("libX11 is not installed")
        dpy = lib.XOpenDisplay(self.display.encode())
        if not dpy:
            raise OSError(f"cannot open X display {self.display}")
        try:
            yield lib, dpy
        finally:
            lib.XCloseDisplay(dpy)

    def mapping(self) -> dict[int, tuple[int, ...]]:
        """Every keycode's keysyms (the core map: group 1 lower, upper, group 2 ...)."""
        with self._lock, self._connection() as (lib, dpy):
            low, high = ctypes.c_int(), ctypes.c_int()
            lib.XDisplayKeycodes(dpy, ctypes.byref(low), ctypes.byref(high))
            per = ctypes.c_int()
            count = high.value - low.value + 1
            syms = lib.XGetKeyboardMapping(dpy, low.value, count, ctypes.byref(per))
            if not syms:
                raise OSError(f"cannot read the keyboard map of X display {self.display}")
            try:
                width = per.value
                return {
                    low.value + i: tuple(syms[i * width + j] for j in range(width))
                    for i in range(count)
                }
            finally:
                lib.XFree(syms)

    def release(self, codes: dict[int, tuple[int, int]]) -> None:
        """Empty the keycodes that still carry what :meth:`assign` put there (the spare pool
        back to the server: TigerVNC 1.12 adds the keysyms a viewer types there)."""
        try:
            now = self.mapping()
            self.assign({c: (0, 0) for c, pair in codes.items() if now.get(c, ())[:2] == pair})
        except OSError:
            return

    def assign(self, codes: dict[int, tuple[int, int]]) -> None:
        """Put ``(lower, upper)`` keysyms on each keycode (applied when this returns)."""
        if not codes:
            return
        with self._lock, self._connection() as (lib, dpy):
            for code, (lower, upper) in sorted(codes.items()):
                pair = (ctypes.c_ulong * 2)(lower, upper)
                lib.XChangeKeyboardMapping(dpy, code, 2, pair, 1)
            before = len(_X._errors)
            lib.XSync(dpy, 0)
            if len(_X._errors) > before:
                raise OSError(f"the X server {self.display} refused a keyboard map change")


# ------------------------------------------------------------------------- planning
@dataclass(frozen=True)
class KeyRound:
    """A part of a text typed with one keymap: the keycodes to set first, the characters."""

    text: str
    assign: dict[int, tuple[int, int]]
    shifted: frozenset[int]
    """Keysyms typed with Shift held (upper cases of the pairs vnc-use mapped)."""


def _who_cannot(chars: Iterable[str]) -> str:
    return " ".join(repr(ch) for ch in dict.fromkeys(chars))


def plan_rounds(text: str, mapping: dict[int, tuple[int, ...]]) -> list[KeyRound]:
    """``text`` split into rounds that fit the spare keycodes of ``mapping`` (see the module).

    Raises ``ValueError`` naming the characters when the map has no spare keycode at all."""
    spare = sorted(code for code, syms in mapping.items() if _spare(syms))
    present = {s for code, syms in mapping.items() if code not in spare for s in syms[:2] if s}
    resident = {(syms[0], syms[1] or syms[0]): code for code, syms in mapping.items()
                if code in spare and syms[0]}  # fmt: skip
    rounds: list[KeyRound] = []
    part, pairs = "", list[tuple[int, int]]()
    for ch in text:
        sym = _keysym_of(ch) if ch not in "\r\n\t" else 0
        if sym and needs_key(sym) and sym not in present:
            pair = case_pair(sym)
            if pair not in pairs:
                if not spare:
                    bad = (
                        c for c in text if needs_key(_keysym_of(c)) and _keysym_of(c) not in present
                    )
                    raise ValueError(
                        f"cannot type {_who_cannot(bad)} on this desktop: its keyboard map has "
                        "no spare keycode for characters it lacks; nothing was typed"
                    )
                if len(pairs) == len(spare):
                    rounds.append(_round(part, pairs, spare, resident))
                    part, pairs = "", []
                pairs.append(pair)
        part += ch
    if part or not rounds:
        rounds.append(_round(part, pairs, spare, resident))
    return rounds


def _round(
    text: str,
    pairs: list[tuple[int, int]],
    spare: list[int],
    resident: dict[tuple[int, int], int],
) -> KeyRound:
    """One round: pairs already on a spare keycode stay; the others take the free ones."""
    keep = {pair: resident[pair] for pair in pairs if pair in resident}
    free = [code for code in spare if code not in keep.values()]
    assign: dict[int, tuple[int, int]] = {}
    for pair in pairs:
        if pair not in keep:
            code = free.pop(0)
            for old, where in list(resident.items()):
                if where == code:
                    del resident[old]
            assign[code] = pair
            resident[pair] = code
    shifted = frozenset(upper for lower, upper in pairs if lower != upper)
    return KeyRound(text, assign, shifted)


# ------------------------------------------------------------------------- remote servers
@dataclass
class RemoteKeys:
    """The characters beyond ASCII one connection to an unseen keymap has typed (see the
    module): at most :data:`REMOTE_NEW_KEYS` distinct ones, case pairs counted once; none on
    wayvnc (:meth:`for_server`)."""

    limit: int = REMOTE_NEW_KEYS
    typed: set[tuple[int, int]] = field(default_factory=set)
    wayvnc: bool = False

    @classmethod
    def for_server(cls, name: bytes | str | None) -> RemoteKeys:
        """The limit for a server whose RFB desktop name is ``name``: wayvnc (``WayVNC``)
        types only what its keyboard layout has and drops the rest (its log: "Failed to look
        up keyboard symbol"; measured with wayvnc 0.5), so nothing beyond ASCII there."""
        text = name.decode(errors="replace") if isinstance(name, bytes) else (name or "")
        return cls(limit=0, wayvnc=True) if text.strip() == "WayVNC" else cls()

    def take(self, text: str) -> None:
        """Count ``text``'s characters in, or raise ``ValueError`` naming those past the
        limit (then nothing is counted, and nothing may be typed)."""
        new: list[tuple[int, int]] = []
        over: list[str] = []
        for ch in text:
            sym = _keysym_of(ch) if ch not in "\r\n\t" else 0
            if not (sym and needs_key(sym)):
                continue
            pair = case_pair(sym)
            if pair in self.typed or pair in new:
                continue
            new.append(pair)
            if len(self.typed) + len(new) > self.limit:
                over.append(ch)
        if over:
            raise ValueError(
                f"cannot type {_who_cannot(over)} on this VNC server: {self._why(new)}"
            )
        self.typed.update(new)

    def _why(self, new: list[tuple[int, int]]) -> str:
        if self.wayvnc:
            return (
                "wayvnc types only the characters of its keyboard layout and silently drops "
                "the others, and vnc-use cannot see that layout; nothing was typed: type "
                "ASCII only"
            )
        left = self.limit - len(self.typed)
        return (
            "vnc-use cannot see its keyboard map, and an X-based VNC server (TigerVNC before "
            f"1.15) has about {self.limit} spare keys for characters its map lacks and silently "
            f"drops the rest; this text needs {len(new)} new keys, this connection has {left} "
            "left; nothing was typed: type it in fewer distinct characters, or run on the "
            "local desktop (any text arrives there)"
        )
