"""An in-memory desktop for fast tests: no X server, no VNC, no Twisted.

>>> from vnc_use import VncUseAgent
>>> from vnc_use.testing import FakeDesktop
>>> desk = FakeDesktop(1280, 800)
>>> agent = VncUseAgent(desktop=desk, planner=...)    # doctest: +SKIP
>>> agent.run(task="Click the middle")                # doctest: +SKIP
>>> desk.events                                       # doctest: +SKIP
[{'kind': 'click', 'x': 640, 'y': 400, 'button': 1}]

:class:`FakeDesktop` implements :class:`~vnc_use.desktops.base.Desktop`. Its screen is a
synthetic frame that changes visibly with every input: a mark where the pointer pressed (left
red, middle green, right blue), a line for a drag, the typed text in a bar at the top, and the
last event in a status bar at the bottom. Screenshots are real PNGs from the project's encoder.

Every input is appended to :attr:`FakeDesktop.events` as a plain dict; ``kind`` is the
:class:`~vnc_use.desktops.base.Desktop` method's name, the other keys its arguments in
pixels:

=================  ============================================================
``kind``           other keys
=================  ============================================================
``move``           ``x``, ``y``
``click``          ``x``, ``y``, ``button`` (1 left, 2 middle, 3 right)
``double_click``   ``x``, ``y``
``triple_click``   ``x``, ``y``
``mouse_down``     ``x``, ``y``, ``button``
``mouse_up``       ``x``, ``y``, ``button``
``drag_and_drop``  ``x``, ``y``, ``destination_x``, ``destination_y``
``scroll``         ``direction``, ``magnitude``
``scroll_at``      ``x``, ``y``, ``direction``, ``magnitude``
``type_text``      ``text``, ``press_enter``, ``clear_first``
``key_combo``      ``keys`` (as given, e.g. ``"control+l"``)
``key_down``       ``key``
``key_up``         ``key``
=================  ============================================================

Like a real desktop it raises ``ValueError`` for a point off the screen or a bad scroll
direction (the agent answers the model with the error), and
:class:`~vnc_use.errors.VncConnectionError` after :meth:`FakeDesktop.disconnect`. It does
not check key names, and every screenshot counts as settled at once.
"""

from __future__ import annotations

import operator
import threading
from typing import TYPE_CHECKING, Any

from PIL import Image, ImageDraw

from vnc_use.desktops.base import CaptureRule, Settled
from vnc_use.desktops.png import PngEncoder, encode_screenshot
from vnc_use.errors import ConfigError, VncConnectionError

if TYPE_CHECKING:
    from vnc_use.desktops.base import Desktop

__all__ = ["FakeDesktop"]

_BACKGROUND = (40, 56, 72)
_BAR = (230, 230, 230)
_INK = (20, 20, 20)
_BUTTON_COLORS = {1: (220, 40, 40), 2: (40, 180, 60), 3: (40, 90, 220)}
_BAR_HEIGHT = 24
_DIRECTIONS = ("up", "down", "left", "right")


class FakeDesktop:
    """A ``width`` x ``height`` screen in memory that records every input in :attr:`events`.

    Safe to call from any thread. See the module docstring for the event kinds.
    """

    def __init__(self, width: int = 1280, height: int = 800) -> None:
        if width < 16 or height < 16:
            raise ConfigError(f"desktop size {width}x{height} is too small; use at least 16x16")
        self.events: list[dict[str, Any]] = []
        """Every input received, oldest first (plain dicts; see the module docstring)."""
        self.text = ""
        """What was typed so far, as a text field would hold it (``clear_first`` empties it,
        ``press_enter`` ends it with a newline)."""
        self._lock = threading.RLock()
        self._connected = True
        self._encoder = PngEncoder(threads=1)
        self._size = (int(width), int(height))
        self._image = Image.new("RGB", self._size, _BACKGROUND)
        self._draw_bars()

    # -- the test's side -------------------------------------------------------------------

    def events_of(self, kind: str) -> list[dict[str, Any]]:
        """The recorded events of one ``kind``."""
        with self._lock:
            return [e for e in self.events if e["kind"] == kind]

    def screenshot(self) -> Image.Image:
        """The current frame (a copy)."""
        with self._lock:
            return self._image.copy()

    def resize(self, width: int, height: int) -> None:
        """Change the screen size (as a user resizing a VM window would); marks are kept."""
        with self._lock:
            old = self._image
            self._size = (int(width), int(height))
            self._image = Image.new("RGB", self._size, _BACKGROUND)
            self._image.paste(old, (0, 0))
            self._draw_bars()

    def disconnect(self) -> None:
        """Act as a lost connection: every later call raises ``VncConnectionError``."""
        self._connected = False

    def reconnect(self) -> None:
        """Undo :meth:`disconnect`."""
        self._connected = True

    # -- Desktop: screen and connection ----------------------------------------------------

    def screen_size(self) -> tuple[int, int]:
        """The screen's ``(width, height)``."""
        return self._size

    def round_trip(self) -> tuple[int, int]:
        """Nothing to wait for in memory: the screen size."""
        self._check_connected()
        return self._size

    def is_connected(self) -> bool:
        """False after :meth:`disconnect`."""
        return self._connected

    def capture(self, rule: CaptureRule) -> Settled:
        """The current frame as a PNG (downscaled as ``rule`` says); always settled, after
        ``rule.fixed_s`` when that is set."""
        self._check_connected()
        if rule.fixed_s is not None:
            rule.sleep(rule.fixed_s)
        image = self.screenshot()
        enc = encode_screenshot(
            image, max_size=rule.max_size, max_bytes=rule.max_bytes, encoder=self._encoder
        )
        return Settled(enc.png, enc.size, True, 1, 0.0, enc.screen_size)

    def settle_input(self) -> None:
        """Input takes effect at once here; only checks the connection."""
        self._check_connected()

    # -- Desktop: pointer ------------------------------------------------------------------

    def move(self, x: int, y: int) -> None:
        """Record a pointer move."""
        self._record("move", x=x, y=y)

    def click(self, x: int, y: int, button: int = 1) -> None:
        """Record a click and draw a mark in the button's colour."""
        self._record("click", x=x, y=y, button=button)

    def double_click(self, x: int, y: int) -> None:
        """Record a double click and draw a mark."""
        self._record("double_click", x=x, y=y)

    def triple_click(self, x: int, y: int) -> None:
        """Record a triple click and draw a mark."""
        self._record("triple_click", x=x, y=y)

    def mouse_down(self, x: int, y: int, button: int = 1) -> None:
        """Record a button press and draw a mark."""
        self._record("mouse_down", x=x, y=y, button=button)

    def mouse_up(self, x: int, y: int, button: int = 1) -> None:
        """Record a button release."""
        self._record("mouse_up", x=x, y=y, button=button)

    def drag_and_drop(self, x0: int, y0: int, x1: int, y1: int, steps: int = 10) -> None:
        """Record a drag and draw its line."""
        self._point(x1, y1)
        self._record("drag_and_drop", x=x0, y=y0, destination_x=x1, destination_y=y1)

    def scroll(self, direction: str, magnitude: int = 800) -> None:
        """Record a scroll of the focused view."""
        self._record("scroll", direction=_direction(direction), magnitude=int(magnitude))

    def scroll_at(self, x: int, y: int, direction: str, magnitude: int = 800) -> None:
        """Record a scroll at a point."""
        self._record(
            "scroll_at", x=x, y=y, direction=_direction(direction), magnitude=int(magnitude)
        )

    # -- Desktop: keyboard -----------------------------------------------------------------

    def type_text(self, text: str, press_enter: bool = False, clear_first: bool = False) -> None:
        """Record typed text and show it in the text bar."""
        self._record("type_text", text=text, press_enter=press_enter, clear_first=clear_first)

    def key_combo(self, keys: str) -> None:
        """Record a key combination."""
        self._record("key_combo", keys=_key(keys))

    def key_down(self, key: str) -> None:
        """Record a key press."""
        self._record("key_down", key=_key(key))

    def key_up(self, key: str) -> None:
        """Record a key release."""
        self._record("key_up", key=_key(key))

    # -- internals -------------------------------------------------------------------------

    def _check_connected(self) -> None:
        if not self._connected:
            raise VncConnectionError("the fake desktop is disconnected")

    def _point(self, x: int, y: int) -> tuple[int, int]:
        x, y = operator.index(x), operator.index(y)
        width, height = self._size
        if not (0 <= x < width and 0 <= y < height):
            raise ValueError(
                f"point ({x}, {y}) is outside the {width}x{height} screen; clamp it first"
            )
        return x, y

    def _record(self, kind: str, **fields: Any) -> None:
        self._check_connected()
        if "x" in fields:
            fields["x"], fields["y"] = self._point(fields["x"], fields["y"])
        event = {"kind": kind, **fields}
        with self._lock:
            self.events.append(event)
            self._paint(event)

    def _paint(self, e: dict[str, Any]) -> None:
        draw = ImageDraw.Draw(self._image)
        kind = e["kind"]
        if kind == "drag_and_drop":
            draw.line((e["x"], e["y"], e["destination_x"], e["destination_y"]), _INK, 3)
        elif kind in ("click", "double_click", "triple_click", "mouse_down"):
            color = _BUTTON_COLORS.get(int(e.get("button", 1)), _INK)
            x, y = e["x"], e["y"]
            draw.rectangle((x - 4, y - 4, x + 4, y + 4), fill=color)
        elif kind == "type_text":
            if e["clear_first"]:
                self.text = ""
            self.text += e["text"] + ("\n" if e["press_enter"] else "")
        self._draw_bars(f"#{len(self.events)} {kind} " + _summary(e))

    def _draw_bars(self, status: str = "") -> None:
        width, height = self._size
        draw = ImageDraw.Draw(self._image)
        draw.rectangle((0, 0, width, _BAR_HEIGHT - 1), fill=_BAR)
        draw.text((4, 6), self.text.replace("\n", " / ")[-(width // 6) :], fill=_INK)
        draw.rectangle((0, height - _BAR_HEIGHT, width, height), fill=_BAR)
        draw.text((4, height - _BAR_HEIGHT + 6), status[: width // 6], fill=_INK)


def _summary(event: dict[str, Any]) -> str:
    return " ".join(f"{k}={v!r}" for k, v in event.items() if k != "kind")


def _direction(direction: str) -> str:
    if not isinstance(direction, str) or direction.lower() not in _DIRECTIONS:
        raise ValueError(f"bad scroll direction {direction!r}; use up, down, left or right")
    return direction.lower()


def _key(keys: str) -> str:
    if not isinstance(keys, str) or not keys.strip():
        raise ValueError(f"bad key {keys!r}: give a key name such as 'Return' or 'control+l'")
    return keys


if TYPE_CHECKING:

    def _is_a_desktop(desk: FakeDesktop) -> Desktop:  # mypy checks the protocol here
        return desk
