"""Probe: a full-screen Tk app that records every input event it receives.

Run it on a desktop to check that a VNC set-up delivers clicks, keys and scrolls exactly::

    DISPLAY=:1 python -m vnc_use.testing.probe --out events.jsonl

Each event is one JSON object per line, flushed at once. Types: ``ready`` (window mapped and
focused; carries ``width``, ``height`` and the ``entry`` box), ``press``/``release``
(``x``, ``y`` root pixels, ``button``, ``state`` modifier mask: 1 Shift, 4 Control, 8 Alt),
``double``/``triple`` (multi-clicks), ``motion``
(``x``, ``y``, ``buttons`` mask), ``wheel`` (``button`` 4 up, 5 down, 6 left, 7 right, or a
``delta`` on Tk 8.7+), ``key``/``keyup`` (``keysym``, ``char``, ``state``), ``text`` (the
entry's text after every change) and ``submit`` (Return in the entry, with ``text``).

The window is override-redirect at ``+0+0`` and covers the whole screen, so clicks at every
pixel (corners included) land on it without a window manager; the text entry keeps the
keyboard focus. In the entry, Ctrl+A selects all (as in most toolkits; stock Tk moves to the
line start) and Tab is recorded but does not move the focus.

For settle-detection tests and benchmarks the probe can also keep the screen busy:

* ``--animate MS`` (with ``--animate-delay MS``): each left press starts, after the delay, an
  animation of about MS ms in the *animation panel* (``ready`` carries its box as ``panel``):
  grey frames every :data:`ANIMATION_FRAME_MS` ms, then a final colour that differs for every
  animation and is never grey. Events ``animation`` (start, with ``n`` and the ``final``
  colour) and ``animated`` (the final colour is drawn: ``n``, ``color``).
* ``--ticker``: F9 toggles a *ticker*, a 240x40 box near the bottom left that changes every
  25 ms, like a clock or a video (events ``ticker`` with ``on``).
* ``--dialog MS`` (with ``--dialog-delay MS``): the first left press shows, after the delay,
  a *dialog* (a magenta box in the middle of the screen, :data:`DIALOG_COLOR`) for MS ms,
  then removes it: events ``dialog`` with ``on`` true (drawn, with its ``box``) and false
  (removed), each with its own time. Something that flashes between two screenshots, for
  the video tests.
* ``--no-status``: the status line does not echo events, so the first thing a click changes
  is its cursor-sized square (what a slow link's first update after an action often holds).

For stall-detection tests (``ready`` carries each box it shows):

* ``--static``: a click on the canvas changes nothing on the screen (no square, no status
  echo, no blinking cursor in the entry): a model clicking it again and again sees the same
  screen;
* ``--blink MS``: the focused entry's text cursor blinks (MS ms on, MS ms off; with
  ``--static`` too), as a caret in a terminal or a search box does on a real desktop;
* ``--counter``: a button (box ``counter``) whose big number goes up by one on every left
  click on it (events ``counter`` with ``n``);
* ``--list N``: a list of N lines (box ``list``) that the mouse wheel scrolls;
* ``--slow-draw MS``: F8 starts drawing a bar (box ``bar``) of :data:`BAR_SEGMENTS`
  segments, one every MS ms, like a page loading slowly (events ``bar`` with ``segments``).

With ``--window WxH+X+Y`` the probe is an ordinary window of that size and place instead,
managed by the window manager (for focus tests with several windows): ``ready`` also carries
its ``origin`` (root pixels of its top-left corner; the ``entry`` box is relative to it), and
``focus`` events (``on`` true/false) tell when it gains or loses the keyboard focus.

:class:`ProbeLog` reads the file from tests and waits for events without fixed sleeps.
This module imports :mod:`tkinter` only when the app runs.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

__all__ = [
    "ANIMATION_FRAME_MS",
    "BAR_SEGMENTS",
    "DIALOG_COLOR",
    "ProbeLog",
    "animation_color",
    "main",
]

#: The colour of the probe's dialog (``--dialog``).
DIALOG_COLOR = (255, 0, 255)

#: Milliseconds between two frames of the probe's click animation.
ANIMATION_FRAME_MS = 15
#: Segments of the bar ``--slow-draw`` draws after F8.
BAR_SEGMENTS = 12

Event = dict[str, Any]

_COLORS = ("#e02020", "#20a020", "#2050e0", "#e0a000", "#a020c0", "#00a0a0")
_BACKGROUND = "#f4f4f4"
_BUTTON_MASK = 0x1F00  # Button1Mask .. Button5Mask in an X event state


def animation_color(n: int) -> tuple[int, int, int]:
    """The final colour of the probe's ``n``-th click animation (never grey; differs for
    256 animations in a row)."""
    return ((37 + 53 * n) % 256, 0, 255)


def _hex(rgb: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


class ProbeLog:
    """Reads a probe's JSON-lines file; :meth:`clear` sets a mark, later reads start there."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._mark = 0

    def all_events(self) -> list[Event]:
        """Every complete event in the file, from the start."""
        try:
            data = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        lines = data.split("\n")[:-1]  # the last piece is empty or still being written
        return [json.loads(line) for line in lines if line.strip()]

    def events(self, type: str | None = None) -> list[Event]:
        """Events since the mark, optionally only those of one ``type``."""
        found = self.all_events()[self._mark :]
        return [e for e in found if type is None or e.get("type") == type]

    def clear(self) -> int:
        """Set the mark after the events seen so far; returns their count."""
        self._mark = len(self.all_events())
        return self._mark

    def wait_for(
        self, predicate: Callable[[Event], bool], timeout: float = 5.0, what: str = "event"
    ) -> Event:
        """Poll until an event since the mark matches ``predicate``; return the first one.

        Raises :class:`TimeoutError` listing the last events seen when none matches in time.
        """
        deadline = time.monotonic() + timeout
        while True:
            seen = self.events()
            for event in seen:
                if predicate(event):
                    return event
            if time.monotonic() >= deadline:
                tail = ", ".join(json.dumps(e, ensure_ascii=False) for e in seen[-8:])
                raise TimeoutError(f"probe: no {what} within {timeout:g} s; last events: {tail}")
            time.sleep(0.005)

    def wait_type(self, type: str, timeout: float = 5.0, **fields: Any) -> Event:
        """Wait for an event of ``type`` whose listed fields equal the given values."""

        def matches(event: Event) -> bool:
            return event.get("type") == type and all(event.get(k) == v for k, v in fields.items())

        return self.wait_for(matches, timeout, what=f"{type} {fields or ''}".strip())


class _Probe:
    """The Tk app. Kept in a class so ``tkinter`` is imported only by :func:`main`."""

    def __init__(
        self,
        out: IO[str],
        title: str,
        busy: bool = False,
        animate_ms: int = 0,
        animate_delay_ms: int = 0,
        ticker: bool = False,
        window: tuple[int, int, int, int] | None = None,
        status: bool = True,
        dialog: tuple[int, int] = (0, 0),
        extras: dict[str, Any] | None = None,
    ) -> None:
        import tkinter as tk

        self.dialog_ms, self.dialog_delay_ms = dialog
        self.dialog_item: Any = None

        self.tk = tk
        self.out = out
        self.animate_ms = animate_ms
        self.animate_delay_ms = animate_delay_ms
        self.ticker_key = ticker
        self.animations = 0
        self.animation_job: str | None = None
        self.ticker_job: str | None = None
        self.ticks = 0
        self.seq = 0
        self.clicks = 0
        self.shift_keys: set[str] = set()
        self.root = tk.Tk(className="vnc-use-probe")
        self.root.title(title)
        self.window = window
        self.show_status = status
        if window is None:
            width, height = self.root.winfo_screenwidth(), self.root.winfo_screenheight()
            self.root.overrideredirect(True)
            self.root.geometry(f"{width}x{height}+0+0")
        else:
            width, height, left, top = window
            self.root.geometry(f"{width}x{height}+{left}+{top}")
        self.size = (width, height)
        self.canvas = tk.Canvas(
            self.root, width=width, height=height, bg=_BACKGROUND, highlightthickness=0
        )
        self.canvas.place(x=0, y=0, width=width, height=height)
        if busy:
            self.backdrop = tk.PhotoImage(master=self.root, data=_busy_png(width, height))
            self.canvas.create_image(0, 0, image=self.backdrop, anchor="nw")
        self.text = tk.StringVar(self.root)
        self.entry = tk.Entry(self.root, textvariable=self.text, font=("TkFixedFont", 14))
        self.entry_box = (width // 4, max(10, height // 10), width // 2, 32)
        x, y, w, h = self.entry_box
        self.entry.place(x=x, y=y, width=w, height=h)
        self.status = self.canvas.create_text(
            width // 2, height - 24, text=f"vnc-use probe {width}x{height}", fill="#404040"
        )
        self.panel_box = (width * 11 // 20, height // 4, width * 9 // 10, height * 11 // 20)
        self.panel = self.canvas.create_rectangle(*self.panel_box, fill="", outline="")
        self.ticker_box = (20, height - 100, 260, height - 60)
        self.ticker = self.canvas.create_rectangle(*self.ticker_box, fill="", outline="")
        self.extras = _Extras(self, dict(extras or {}))
        for widget in (self.canvas, self.entry, self.root, *self.extras.widgets):
            widget.bindtags(("Probe", "ProbeMulti", *widget.bindtags()))
        self._bind()

    def _bind(self) -> None:
        r = self.root
        r.bind_class("Probe", "<ButtonPress>", self.on_press)
        r.bind_class("Probe", "<ButtonRelease>", self.on_release)
        r.bind_class("Probe", "<Motion>", self.on_motion)
        r.bind_class("Probe", "<MouseWheel>", self.on_mousewheel)
        r.bind_class("Probe", "<KeyPress>", self.on_key)
        r.bind_class("Probe", "<KeyRelease>", self.on_keyup)
        r.bind_class("ProbeMulti", "<Double-ButtonPress>", lambda e: self.on_multi(e, "double"))
        r.bind_class("ProbeMulti", "<Triple-ButtonPress>", lambda e: self.on_multi(e, "triple"))
        self.entry.bind("<Control-a>", self.on_select_all)
        self.entry.bind("<Return>", lambda e: self.emit("submit", text=self.text.get()))
        self.text.trace_add("write", lambda *_: self.emit("text", text=self.text.get()))
        if self.window is not None:
            # Tk hands a toplevel's keyboard focus to its entry: the entry's focus is the window's.
            self.entry.bind("<FocusIn>", lambda e: self.on_focus(e, True), add="+")
            self.entry.bind("<FocusOut>", lambda e: self.on_focus(e, False), add="+")

    def on_focus(self, e: Any, on: bool) -> None:
        self.emit("focus", on=on)

    def emit(self, type: str, **fields: Any) -> None:
        self.seq += 1
        event = {"type": type, "seq": self.seq, "t": round(time.time(), 6), **fields}
        self.out.write(json.dumps(event) + "\n")
        self.out.flush()
        if self.show_status and type not in ("motion", "text"):
            label = " ".join(f"{k}={v}" for k, v in fields.items())
            self.canvas.itemconfigure(self.status, text=f"#{self.seq} {type} {label}"[:160])

    def on_press(self, e: Any) -> None:
        if e.num in (4, 5, 6, 7):
            # Tk 8.6 reports X buttons 6/7 as Shift+4/5 (its horizontal-scroll convention);
            # a Shift state without a Shift key held down means buttons 6/7.
            horizontal = e.num in (4, 5) and e.state & 1 and not self.shift_keys
            button = e.num + 2 if horizontal else e.num
            self.emit("wheel", x=e.x_root, y=e.y_root, button=button, state=e.state)
            return
        self.emit("press", x=e.x_root, y=e.y_root, button=e.num, state=e.state)
        if self.extras.on_press(e):
            return
        color = _COLORS[self.clicks % len(_COLORS)]
        self.clicks += 1
        x, y = e.x_root, e.y_root
        self.canvas.create_rectangle(x - 6, y - 6, x + 6, y + 6, fill=color, outline=color)
        if self.animate_ms > 0 and e.num == 1:
            self.start_animation()
        if self.dialog_ms > 0 and e.num == 1:
            self.dialog_ms, ms = 0, self.dialog_ms  # once
            self.root.after(self.dialog_delay_ms, self.show_dialog, ms)

    def show_dialog(self, ms: int) -> None:
        width, height = self.size
        box = (width // 2 - 200, height // 2 - 100, width // 2 + 200, height // 2 + 100)
        fill = _hex(DIALOG_COLOR)
        self.dialog_item = self.canvas.create_rectangle(*box, fill=fill, outline="black")
        self.root.update_idletasks()
        self.emit("dialog", on=True, box=list(box))
        self.root.after(ms, self.hide_dialog)

    def hide_dialog(self) -> None:
        self.canvas.delete(self.dialog_item)
        self.root.update_idletasks()
        self.emit("dialog", on=False)

    # -- the click animation and the ticker (settle-detection tests) --------------------------

    def start_animation(self) -> None:
        if self.animation_job is not None:
            self.root.after_cancel(self.animation_job)
        self.animations += 1
        n = self.animations
        frames = max(1, self.animate_ms // ANIMATION_FRAME_MS)
        self.emit("animation", n=n, final=_hex(animation_color(n)), frames=frames)
        self.animation_job = self.root.after(self.animate_delay_ms, self.animation_frame, n, 0)

    def animation_frame(self, n: int, i: int) -> None:
        frames = max(1, self.animate_ms // ANIMATION_FRAME_MS)
        if i >= frames:
            color = _hex(animation_color(n))
            self.canvas.itemconfigure(self.panel, fill=color)
            self.animation_job = None
            self.emit("animated", n=n, color=color)
            return
        level = 60 + (i * 37) % 160
        self.canvas.itemconfigure(self.panel, fill=_hex((level, level, level)))
        self.animation_job = self.root.after(ANIMATION_FRAME_MS, self.animation_frame, n, i + 1)

    def toggle_ticker(self) -> None:
        if self.ticker_job is not None:
            self.root.after_cancel(self.ticker_job)
            self.ticker_job = None
            self.canvas.itemconfigure(self.ticker, fill="")
            self.emit("ticker", on=False)
            return
        self.emit("ticker", on=True)
        self.tick()

    def tick(self) -> None:
        self.ticks += 1
        level = (self.ticks * 47) % 256
        self.canvas.itemconfigure(self.ticker, fill=_hex((level, 255 - level, 128)))
        self.ticker_job = self.root.after(25, self.tick)

    def on_release(self, e: Any) -> None:
        if e.num not in (4, 5, 6, 7):
            self.emit("release", x=e.x_root, y=e.y_root, button=e.num, state=e.state)

    def on_multi(self, e: Any, kind: str) -> None:
        if e.num not in (4, 5, 6, 7):
            self.emit(kind, x=e.x_root, y=e.y_root, button=e.num)

    def on_motion(self, e: Any) -> None:
        self.emit("motion", x=e.x_root, y=e.y_root, buttons=(e.state & _BUTTON_MASK) >> 8)

    def on_mousewheel(self, e: Any) -> None:
        self.emit("wheel", x=e.x_root, y=e.y_root, delta=e.delta, state=e.state)

    def on_key(self, e: Any) -> str | None:
        if e.keysym in ("Shift_L", "Shift_R"):
            self.shift_keys.add(e.keysym)
        self.emit("key", keysym=e.keysym, char=e.char, state=e.state)
        if e.keysym == "F9" and self.ticker_key:
            self.toggle_ticker()
        if e.keysym == "F8":
            self.extras.start_bar()
        return "break" if e.keysym in ("Tab", "ISO_Left_Tab") else None

    def on_keyup(self, e: Any) -> None:
        self.shift_keys.discard(e.keysym)
        self.emit("keyup", keysym=e.keysym, char=e.char, state=e.state)

    def on_select_all(self, e: Any) -> str:
        self.entry.selection_range(0, self.tk.END)
        self.entry.icursor(self.tk.END)
        return "break"

    def wait_ready(self, deadline: float) -> None:
        """Grab the focus (no window manager does it for us), then announce ``ready``."""
        focused = self.root.focus_get() is self.entry
        if self.root.winfo_viewable() and focused:
            x, y, w, h = self.entry_box
            self.emit(
                "ready",
                width=self.size[0],
                height=self.size[1],
                entry=[x, y, w, h],
                panel=list(self.panel_box),
                ticker=list(self.ticker_box),
                origin=[self.root.winfo_rootx(), self.root.winfo_rooty()],
                **self.extras.boxes,
            )
            return
        if time.monotonic() > deadline:
            self.emit("error", message="could not get the keyboard focus")
            self.root.destroy()
            return
        self.root.lift()
        self.root.focus_force()
        self.entry.focus_force()
        self.root.after(20, self.wait_ready, deadline)

    def run(self) -> None:
        self.root.after(0, self.wait_ready, time.monotonic() + 10.0)
        self.root.mainloop()


class _Extras:
    """The stall-detection widgets (``--static``, ``--counter``, ``--list``, ``--slow-draw``)."""

    def __init__(self, probe: _Probe, options: dict[str, Any]) -> None:
        self.probe = probe
        self.static = bool(options.get("static"))
        self.slow_draw_ms = int(options.get("slow_draw_ms") or 0)
        self.widgets: list[Any] = []
        self.boxes: dict[str, list[int]] = {}
        self.count = 0
        self.bar_job: str | None = None
        blink_ms = int(options.get("blink_ms") or 0)
        if blink_ms:  # the focused entry's cursor blinks, as a caret does on a real desktop
            probe.entry.configure(insertontime=blink_ms, insertofftime=blink_ms)
        elif self.static:  # a screen that stays as it is: the entry's cursor does not blink
            probe.entry.configure(insertofftime=0)
        width, height = probe.size
        canvas = probe.canvas
        if options.get("counter"):
            box = (width // 20, height * 3 // 10, width // 20 + 220, height * 3 // 10 + 90)
            self.boxes["counter"] = list(box)
            canvas.create_rectangle(*box, fill="#dfe7f2", outline="#2f5fb3", width=2)
            cx, cy = (box[0] + box[2]) // 2, (box[1] + box[3]) // 2
            self.counter = canvas.create_text(cx, cy, text="0", font=("TkFixedFont", 36, "bold"))
        lines = int(options.get("list") or 0)
        if lines:
            tk = probe.tk
            box = (width // 20, height // 2, width // 20 + 320, height // 2 + 300)
            self.boxes["list"] = list(box)
            listbox = tk.Listbox(probe.root, font=("TkFixedFont", 14), activestyle="none")
            for i in range(1, lines + 1):
                listbox.insert(tk.END, f"line {i:04d} of the long list")
            listbox.place(x=box[0], y=box[1], width=box[2] - box[0], height=box[3] - box[1])
            self.widgets.append(listbox)
        if self.slow_draw_ms:
            self.boxes["bar"] = [width // 4, height * 3 // 4, width * 3 // 4, height * 3 // 4 + 40]

    def on_press(self, e: Any) -> bool:
        """Handle a press the extras own; True when the probe draws nothing more for it."""
        box = self.boxes.get("counter")
        if box and e.num == 1 and box[0] <= e.x_root <= box[2] and box[1] <= e.y_root <= box[3]:
            self.count += 1
            self.probe.canvas.itemconfigure(self.counter, text=str(self.count))
            self.probe.emit("counter", n=self.count)
            return True
        return self.static

    def start_bar(self) -> None:
        """F8: draw the bar again from its start, one segment every ``slow_draw_ms``."""
        if not self.slow_draw_ms:
            return
        if self.bar_job is not None:
            self.probe.root.after_cancel(self.bar_job)
        self.probe.canvas.delete("bar")
        self.bar_segment(0)

    def bar_segment(self, i: int) -> None:
        left, top, right, bottom = self.boxes["bar"]
        step = (right - left) // BAR_SEGMENTS
        if i >= BAR_SEGMENTS:
            self.bar_job = None
            return
        x = left + i * step
        self.probe.canvas.create_rectangle(
            x, top, x + step - 4, bottom, fill=_COLORS[i % len(_COLORS)], outline="", tags="bar"
        )
        self.probe.emit("bar", segments=i + 1)
        self.bar_job = self.probe.root.after(self.slow_draw_ms, self.bar_segment, i + 1)


def _busy_png(width: int, height: int) -> bytes:
    """A desktop-like backdrop (text, panels, a noisy "photo") for realistic screenshots."""
    import io
    import random

    from PIL import Image, ImageDraw

    rng = random.Random(1234)
    image = Image.new("RGB", (width, height), _BACKGROUND)
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, width, 28), fill="#2b3a55")
    words = [
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "lazy",
        "dog",
        "vnc",
        "use",
        "agent",
        "click",
        "type",
        "scroll",
    ]
    for y in range(40, height - 40, 16):
        line = " ".join(rng.choice(words) for _ in range(rng.randint(4, 22)))
        draw.text((20, y), line, fill=rng.choice(("#202020", "#303070", "#703030")))
    for _ in range(12):
        x, y = rng.randrange(width - 200), rng.randrange(height - 120)
        draw.rectangle(
            (x, y, x + rng.randint(60, 200), y + rng.randint(20, 120)),
            fill=rng.choice(_COLORS),
            outline="#000000",
        )
    noise = Image.effect_noise((width // 3, height // 3), 60).convert("RGB")
    image.paste(noise, (width // 2, height // 2))
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    """Run the probe app until it is closed (or the process is terminated)."""
    parser = argparse.ArgumentParser(
        prog="python -m vnc_use.testing.probe",
        description=(
            "Full-screen probe app: records every click, key, scroll and text change it "
            "receives as JSON lines. Run it on your VNC desktop, drive it over VNC, and read "
            "the file to check that input arrives where and as you sent it."
        ),
        epilog="Example: DISPLAY=:1 python -m vnc_use.testing.probe --out /tmp/probe.jsonl",
    )
    parser.add_argument(
        "--out", default="-", help="file to append JSON-lines events to ('-' = stdout)"
    )
    parser.add_argument("--title", default="vnc-use probe", help="window title")
    parser.add_argument(
        "--busy", action="store_true", help="paint a desktop-like backdrop (for benchmarks)"
    )
    parser.add_argument(
        "--animate",
        type=int,
        default=0,
        metavar="MS",
        help="after each left click, animate the panel for about MS ms, then show a final colour",
    )
    parser.add_argument(
        "--animate-delay",
        type=int,
        default=0,
        metavar="MS",
        help="start each animation MS ms after the click (an app slow to react)",
    )
    parser.add_argument(
        "--ticker",
        action="store_true",
        help="let F9 toggle a box that changes every 25 ms (a screen that never settles)",
    )
    parser.add_argument(
        "--window",
        default=None,
        metavar="WxH+X+Y",
        help="an ordinary window of this size and place (for a window manager) instead of "
        "the full screen",
    )
    parser.add_argument(
        "--no-status",
        action="store_true",
        help="do not echo events in the status line (a click then changes only a 12x12 square "
        "at once, and the animation panel if --animate)",
    )
    parser.add_argument(
        "--dialog",
        type=int,
        default=0,
        metavar="MS",
        help="after the first left click, show a dialog for MS ms (once)",
    )
    parser.add_argument(
        "--dialog-delay",
        type=int,
        default=0,
        metavar="MS",
        help="show the --dialog MS ms after the click",
    )
    parser.add_argument(
        "--static",
        action="store_true",
        help="a click on the canvas changes nothing on the screen (no square, no status echo)",
    )
    parser.add_argument(
        "--blink",
        type=int,
        default=0,
        metavar="MS",
        help="the entry's text cursor blinks: MS ms on, MS ms off (also with --static)",
    )
    parser.add_argument(
        "--counter", action="store_true", help="show a button whose number counts its clicks"
    )
    parser.add_argument(
        "--list", type=int, default=0, metavar="N", help="show a list of N lines to scroll"
    )
    parser.add_argument(
        "--slow-draw",
        type=int,
        default=0,
        metavar="MS",
        help=f"F8 draws a bar of {BAR_SEGMENTS} segments, one every MS ms (a slow load)",
    )
    args = parser.parse_args(argv)
    window = None
    if args.window is not None:
        match = re.fullmatch(r"(\d+)x(\d+)\+(\d+)\+(\d+)", args.window)
        if match is None:
            parser.error(f"bad --window {args.window!r}; use WxH+X+Y, e.g. 400x300+0+0")
        width, height, left, top = (int(v) for v in match.groups())
        window = (width, height, left, top)
    out: IO[str]
    out = sys.stdout if args.out == "-" else open(args.out, "a", encoding="utf-8")  # noqa: SIM115
    try:
        _Probe(
            out,
            args.title,
            busy=args.busy,
            animate_ms=args.animate,
            animate_delay_ms=args.animate_delay,
            ticker=args.ticker,
            window=window,
            status=not (args.no_status or args.static),
            dialog=(args.dialog, args.dialog_delay),
            extras={
                "static": args.static,
                "blink_ms": args.blink,
                "counter": args.counter,
                "list": args.list,
                "slow_draw_ms": args.slow_draw,
            },
        ).run()
    except KeyboardInterrupt:
        pass
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
