"""The desktops an evaluation runs its tasks on: one slot per parallel worker.

A :class:`LocalSlot` starts its own local desktop (:class:`~vnc_use.desktops.local.LocalDesktop`:
its own display, home folder and VNC password) and, by default, a fresh one for every task
(the home folder emptied too); with ``reuse`` it keeps the desktop between tasks. A
:class:`VncSlot` is a desktop someone else runs (``--vnc ADDR``), used as it is.
"""

from __future__ import annotations

import shutil
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from vnc_use import config
from vnc_use.desktops.local import DesktopState, LocalDesktop, LocalDesktopError
from vnc_use.desktops.target import ReachedDesktop

__all__ = ["DesktopSlot", "EvalDesktop", "LocalSlot", "VncSlot", "command_environment"]

#: Desktops of one process start one at a time: two at once would pick the same free display.
_START_LOCK = threading.Lock()
_START_ATTEMPTS = 3
_ENV_KEEP = ("PATH", "LANG", "LANGUAGE", "TZ", "USER", "LOGNAME", "SHELL", "TMPDIR")


@dataclass(frozen=True)
class EvalDesktop:
    """One desktop a task runs on: where the agent connects, and the commands' environment."""

    name: str
    server: str
    password: str | None = field(repr=False)
    env: dict[str, str]
    home: Path | None = None
    reached: ReachedDesktop | None = field(default=None, repr=False)
    """The desktop as :func:`~vnc_use.desktops.target.reach` made it reachable, when the slot
    holds it (an RDP bridge: its keyboard, its session's end)."""


class DesktopSlot(Protocol):
    """A worker's desktop: :meth:`open` before each task, :meth:`done` after it."""

    name: str

    def open(self) -> EvalDesktop:
        """The desktop for the next task (started or reset as the slot does)."""
        ...

    def done(self) -> None:
        """The task is over (a fresh-per-task slot stops its desktop)."""
        ...

    def close(self) -> None:
        """Stop whatever the slot started."""
        ...


def command_environment(**extra: str) -> dict[str, str]:
    """The environment of setup and check commands: a few of the caller's variables (no API
    keys, no passwords), this Python's ``bin`` folder first on PATH (``python`` there has
    vnc-use), and ``extra``."""
    env = config.child_environment(_ENV_KEEP, prefixes=("LC_",))
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + (":" + env["PATH"] if env.get("PATH") else ":/usr/bin:/bin")
    env.update(extra)
    return env


class LocalSlot:
    """A local desktop in ``root`` (``desktop-N`` of the eval's folder)."""

    def __init__(
        self,
        root: Path,
        size: tuple[int, int],
        *,
        reuse: bool = False,
        password: str | None = None,
    ) -> None:
        self.name = root.name
        self.reuse = reuse
        self.desktop = LocalDesktop(root, size=size, browser="none", password=password)
        self._current: EvalDesktop | None = None

    def open(self) -> EvalDesktop:
        if self._current is not None and self.reuse and self.desktop.status().running:
            return self._current
        self.desktop.down()
        shutil.rmtree(self.desktop.home_dir, ignore_errors=True)
        state = self._start()
        home = self.desktop.home_dir
        env = command_environment(
            DISPLAY=state.display,
            HOME=str(home),
            VNC_SERVER=state.server,
            # marks every program a setup starts, so stopping the desktop stops them too
            VNC_USE_DESKTOP_ID=state.desktop_id,
        )
        self._current = EvalDesktop(
            self.name, state.server, self.desktop.credentials().password, env, home
        )
        return self._current

    def _start(self) -> DesktopState:
        """Start the desktop; a display another process took meanwhile gets another try."""
        for attempt in range(_START_ATTEMPTS):
            try:
                with _START_LOCK:
                    state, _ = self.desktop.up()
                return state
            except LocalDesktopError:
                self.desktop.down()
                if attempt + 1 == _START_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def done(self) -> None:
        if not self.reuse:
            self.close()

    def close(self) -> None:
        self._current = None
        self.desktop.down()


class VncSlot:
    """A desktop at ``server`` that someone else runs: used as it is, never reset."""

    def __init__(self, name: str, server: str, password: str | None) -> None:
        self.name = name
        self.server = server
        self.password = password

    def open(self) -> EvalDesktop:
        # a desktop elsewhere: the commands run here, in the caller's home folder
        env = command_environment(VNC_SERVER=self.server, **config.child_environment(("HOME",)))
        return EvalDesktop(self.name, self.server, self.password, env, None)

    def done(self) -> None:
        pass

    def close(self) -> None:
        pass
