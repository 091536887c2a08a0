"""The desktop an outside model drives through the MCP tools, and the run folder of the session.

:class:`DesktopSession` keeps one VNC connection (opened on first use, again after it was lost)
and one *session run folder*: every low-level action an MCP client asks for is a step there,
as an agent step would be (the journal before and after it is sent, ``steps/``, an
``action`` event with the pixels and the settled screenshot that answered it), so a person
reads what the outside model did with ``vnc-use report ID``.

Coordinates are pixels of the last screenshot the session returned. Screenshots are the
screen's own size unless the PNG would be too big (then downscaled, like the agent's): a
point is mapped back to screen pixels by the same factor. An impossible request (a point off
the screen, an unknown key name, a bad direction) raises :class:`ToolInputError` before
anything is sent; a desktop that cannot be reached raises
:class:`~vnc_use.errors.VncError`. Nothing here imports the MCP SDK.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vnc_use import config
from vnc_use.desktops.base import CaptureRule, Desktop
from vnc_use.desktops.target import ReachedDesktop
from vnc_use.errors import VncError
from vnc_use.record import run_record
from vnc_use.record.folder import RunFolder
from vnc_use.record.report import ReportOnRunEnd
from vnc_use.record.video import DEFAULT_VIDEO_FPS, VideoRecorder, record_desktop, stop_recording
from vnc_use.runs.leg import run_record_of, write_run_record
from vnc_use.status import RunStatus
from vnc_use.store.journal import Journal
from vnc_use.store.storage import Storage, open_storage

if TYPE_CHECKING:
    from vnc_use.runs.spec import RunSpec

__all__ = [
    "BUTTONS",
    "DIRECTIONS",
    "DesktopSession",
    "Shot",
    "ToolInputError",
    "VncTarget",
    "new_session_id",
]

BUTTONS = {"left": 1, "middle": 2, "right": 3}
DIRECTIONS = ("up", "down", "left", "right")
SESSION_TASK = "MCP session: an outside model drives the desktop through vnc-use's MCP tools"


def new_session_id() -> str:
    """A new MCP session's thread id (its run folder's name)."""
    return f"mcp-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


class ToolInputError(ValueError):
    """The caller asked for something impossible (nothing was sent to the desktop)."""


VncTarget = ReachedDesktop
"""Where the session's desktop is and how to log in (the password is never recorded):
the desktop :func:`~vnc_use.desktops.target.reach` made reachable (its screen region too)."""


@dataclass(frozen=True)
class Shot:
    """A settled screenshot as the tools return it."""

    png: bytes
    image_size: tuple[int, int]
    screen_size: tuple[int, int]
    sha: str

    def describe(self) -> str:
        """One line for the model: the size its coordinates refer to."""
        w, h = self.image_size
        text = f"screenshot {w}x{h} pixels; x runs 0..{w - 1} left to right, y 0..{h - 1} down"
        if self.image_size != self.screen_size:
            sw, sh = self.screen_size
            text += f" (the screen is {sw}x{sh}; coordinates are scaled to it)"
        return text


class DesktopSession:
    """One VNC desktop and the session run folder of the MCP tools that act on it."""

    def __init__(
        self,
        target: VncTarget,
        runs_dir: str | Path,
        *,
        secrets: Sequence[str | None] = (),
        connect: Callable[[], Desktop] | None = None,
        thread_id: str | None = None,
        spec: RunSpec | None = None,
        video: bool = True,
        video_fps: float = DEFAULT_VIDEO_FPS,
    ) -> None:
        self.target = target
        self.spec = spec
        """The model and budgets of the runs ``run_task`` starts (None: the defaults)."""
        self.runs_dir = Path(runs_dir)
        self._secrets = [target.password, *secrets]
        self._connect = connect or target.connect
        self._desktop: Desktop | None = None
        self._folder: RunFolder | None = None
        self._journal: Journal | None = None
        self._storage: Storage | None = None
        self._step = 0
        self._last: Shot | None = None
        self.lock = threading.RLock()
        """Held while the desktop is used (a tool call, or a run of ``run_task``)."""
        self.thread_id = thread_id or new_session_id()
        #: Record the session's screen into its run folder's video.mp4 (a VNC connection).
        self.video, self.video_fps = video, video_fps
        self._recorder: VideoRecorder | None = None

    # -- the run folder --------------------------------------------------------------------
    @property
    def folder(self) -> RunFolder:
        """The session's run folder, created with its ``run.json`` on first use."""
        if self._folder is None:
            folder = RunFolder(self.runs_dir, self.thread_id, secrets=self._secrets)
            folder.add_listener(ReportOnRunEnd(folder))
            record = run_record_of(
                "mcp-session",
                self.thread_id,
                SESSION_TASK,
                None,  # no model, no budgets: an outside model drives
                where={
                    "vnc_server": self.target.label,
                    "rdp": dict(self.target.rdp) if self.target.rdp else None,
                    "vnc_username": self.target.username,
                    "vnc_ca": self.target.ca_file,
                    "screen_region": str(self.target.screen_region)
                    if self.target.screen_region
                    else None,
                    "video": self.video,
                    "video_fps": self.video_fps if self.video else None,
                },
                checkpointer=None,
            )
            write_run_record(folder, record)
            folder.event(
                "run_started",
                thread_id=self.thread_id,
                task=SESSION_TASK,
                vnc_server=self.target.label,
            )
            # the journal lives where the checkpoints of runs do (VNC_USE_DATABASE_URL, else
            # the runs folder's vnc-use.sqlite), as for an agent run
            self._storage = open_storage(config.database_url(), self.runs_dir)
            self._folder, self._journal = folder, self._storage.journal(self.thread_id)
        return self._folder

    def close(self) -> None:
        """End the session: its report is written, the connection closed."""
        with self.lock:
            stop_recording(self._desktop, self._recorder)  # finished before the last report
            self._recorder = None
            if self._folder is not None:
                self._folder.event(
                    "run_ended",
                    status=RunStatus.DONE.value,
                    steps=self._step,
                    final_text=f"MCP session ended after {self._step} actions",
                    error=None,
                    pending_call=None,
                )
                run_record.update(self._folder, status=RunStatus.DONE.value, reason=None)
            if self._desktop is not None:
                disconnect = getattr(self._desktop, "disconnect", None)
                if callable(disconnect):
                    disconnect()
                self._desktop = None
            if self._storage is not None:
                self._storage.close()
                self._storage = None

    # -- the desktop -----------------------------------------------------------------------
    @property
    def desktop(self) -> Desktop:
        """The connection, opened on first use and again after it was lost."""
        if self._desktop is None or not self._desktop.is_connected():
            lost, self._desktop = self._desktop, self._connect()
            if self.video:  # a segment per connection
                stop_recording(lost, self._recorder)
                self._recorder = record_desktop(self._desktop, self.folder.path, self.video_fps)
        return self._desktop

    def _capture(self) -> Shot:
        settled = self.desktop.capture(CaptureRule())
        sha = self.folder.put_screenshot(settled.png)
        screen = settled.screen_size if settled.screen_size != (0, 0) else settled.size
        shot = Shot(settled.png, settled.size, screen, sha)
        self._last = shot
        return shot

    def screenshot(self) -> Shot:
        """The settled screen, recorded as an observation of the session."""
        with self.lock:
            shot = self._capture()
            w, h = shot.image_size
            self.folder.event("observe", node="mcp", screenshot=shot.sha, width=w, height=h)
            self.folder.keep_summary()
            return shot

    # -- actions ---------------------------------------------------------------------------
    def click(self, x: int, y: int, button: str = "left", count: int = 1) -> Shot:
        """Click ``count`` times (1-3) with ``button`` at the point."""
        number = BUTTONS.get(button)
        if number is None:
            raise ToolInputError(f"unknown button {button!r}: use left, right or middle")
        if count not in (1, 2, 3):
            raise ToolInputError(f"count {count} is not 1, 2 or 3")

        def run(d: Desktop, px: dict[str, int]) -> None:
            at = px["x"], px["y"]
            if number == 1 and count == 2:
                d.double_click(*at)
            elif number == 1 and count == 3:
                d.triple_click(*at)
            else:
                for _ in range(count):
                    d.click(*at, button=number)

        args = {"x": x, "y": y, "button": button, "count": count}
        return self._act("click", args, {"x": x, "y": y}, run)

    def type_text(self, text: str, press_enter: bool = False) -> Shot:
        """Type ``text`` where the keyboard focus is (Return after it with ``press_enter``)."""
        if not text and not press_enter:
            raise ToolInputError("the text is empty: give the text to type")
        _check_text(text)
        return self._act(
            "type_text",
            {"text": text, "press_enter": press_enter},
            {},
            lambda d, _: d.type_text(text, press_enter=press_enter),
        )

    def press_keys(self, keys: str) -> Shot:
        """Press a ``+``-joined key combination such as ``control+s``."""
        from vnc_use.desktops.vnc import to_vnc_keys

        try:
            to_vnc_keys(keys)
        except ValueError as exc:
            raise ToolInputError(
                f"{exc}; use names such as control, shift, alt, super, enter, escape, tab, "
                "backspace, delete, up, pagedown, f5 or single characters, joined by '+'"
            ) from None
        return self._act("press_keys", {"keys": keys}, {}, lambda d, _: d.key_combo(keys))

    def scroll(self, x: int, y: int, direction: str, amount: int = 400) -> Shot:
        """Scroll the view under the point by about ``amount`` pixels."""
        if direction not in DIRECTIONS:
            raise ToolInputError(f"unknown direction {direction!r}: use up, down, left or right")
        if amount < 1:
            raise ToolInputError(f"amount {amount} must be at least 1 pixel")

        def run(d: Desktop, px: dict[str, int]) -> None:
            d.scroll_at(px["x"], px["y"], direction, amount)

        args = {"x": x, "y": y, "direction": direction, "amount": amount}
        return self._act("scroll", args, {"x": x, "y": y}, run)

    def drag(self, x: int, y: int, to_x: int, to_y: int) -> Shot:
        """Press the left button at the point, move to ``(to_x, to_y)``, release there."""

        def run(d: Desktop, px: dict[str, int]) -> None:
            d.drag_and_drop(px["x"], px["y"], px["destination_x"], px["destination_y"])

        args = {"x": x, "y": y, "to_x": to_x, "to_y": to_y}
        points = {"x": x, "y": y, "destination_x": to_x, "destination_y": to_y}
        return self._act("drag", args, points, run)

    def _pixels(self, points: dict[str, int]) -> dict[str, int]:
        """Points of the last screenshot as screen pixels, checked to be on the screen."""
        if not points:
            return {}
        shot = self._last or self._capture()
        (iw, ih), (sw, sh) = shot.image_size, shot.screen_size
        out: dict[str, int] = {}
        for name, value in points.items():
            limit = iw if "x" in name else ih
            if not 0 <= value < limit:
                axis = "x" if "x" in name else "y"
                raise ToolInputError(
                    f"{name}={value} is off the screen: {axis} must be 0..{limit - 1} "
                    f"(the last screenshot is {iw}x{ih} pixels)"
                )
            scale = sw / iw if "x" in name else sh / ih
            out[name] = min(int(value * scale), (sw if "x" in name else sh) - 1)
        return out

    def _act(
        self,
        name: str,
        args: dict[str, Any],
        points: dict[str, int],
        run: Callable[[Desktop, dict[str, int]], None],
    ) -> Shot:
        """Perform one action as a journaled step, and answer it with a settled screenshot."""
        with self.lock:
            pixels = self._pixels(points)
            desktop = self.desktop
            folder = self.folder
            assert self._journal is not None
            self._step += 1
            step, key = self._step, f"mcp:{self._step}"
            t0, started = time.monotonic(), time.time()
            self._journal.dispatched(key, name, step)
            try:
                run(desktop, pixels)
                action_ms = round((time.monotonic() - t0) * 1000, 1)
                pressed_at = _first_press(desktop, started)
                shot = self._capture()  # the round trip also proves the server received it
            except VncError as exc:  # sent or not, unknown: the journal keeps it uncertain
                folder.event("error", message=f"{name} (step {step}): {exc}", kind="vnc")
                self._desktop = None  # the next call connects again
                raise
            self._journal.done(key, name, step)
            record = {
                "step": step,
                "name": name,
                "args": args,
                "pixels": pixels,
                "screen_size": list(shot.screen_size),
                "result": "ok",
                "duration_ms": action_ms,
                "screenshot": shot.sha,
            }
            folder.write_step(step, name, record, shot.sha)
            folder.event(
                "action",
                node="mcp",
                step=step,
                name=name,
                args=args,
                pixels=pixels,
                screen_size=list(shot.screen_size),
                duration_ms=action_ms,
                started=round(started, 3),
                pressed_at=pressed_at,
                error=None,
                note=None,
                approved=False,
                screenshot=shot.sha,
            )
            folder.keep_summary()  # once a call: the runs list reads it until the next one
            return shot


def _first_press(desktop: Desktop, since: float) -> float | None:
    """When the action's first button or key press was sent (the report's video seeks
    there), for a desktop that knows."""
    first = getattr(desktop, "first_press_since", None)
    at = first(since) if callable(first) else None
    return None if at is None else round(float(at), 3)


def _check_text(text: str) -> None:
    for ch in text:
        code = ord(ch)
        if ch not in "\n\r\t" and (code < 0x20 or 0x7F <= code < 0xA0):
            raise ToolInputError(
                f"the text holds the control character {ch!r}, which cannot be typed; "
                "use press_keys for keys such as Escape"
            )
