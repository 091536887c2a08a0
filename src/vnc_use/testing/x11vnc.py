"""An x11vnc test desktop: ``Xvfb`` shared by ``x11vnc`` on 127.0.0.1, the other common way
Linux desktops are served over VNC (the way most people share an existing X session).

>>> with X11vncDesktop(1024, 768) as desk:                   # doctest: +SKIP
...     desk.launch(["xterm"])
...     print(desk.server, desk.password)

``password=None`` gives a random 8-character VNC password (``-rfbauth``, the same file format
TigerVNC's ``vncpasswd -f`` writes); ``password=""`` serves the desktop with no password
(``-nopw``), as many people run it. ``extra_args`` are passed to x11vnc as they are (e.g.
``["-ncache", "10"]``).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from vnc_use.desktops.xserver import display_owner, listens_on, port_open, stop_process
from vnc_use.testing.desktop import DesktopError, TestDesktop

__all__ = ["X11vncDesktop"]

_INSTALL_HINT = "apt-get install x11vnc xvfb"


class X11vncDesktop(TestDesktop):
    """Xvfb plus x11vnc on 127.0.0.1 (same interface as :class:`TestDesktop`)."""

    __test__ = False

    def __init__(
        self,
        width: int = 1440,
        height: int = 900,
        password: str | None = None,
        *,
        start_timeout: float = 20.0,
        depth: int = 24,
        extra_args: list[str] | None = None,
    ) -> None:
        self.no_password = password == ""
        super().__init__(
            width,
            height,
            None if self.no_password else password,
            start_timeout=start_timeout,
            depth=depth,
        )
        if self.no_password:
            self.password = ""
        self.extra_args = list(extra_args or [])
        self._xvfb: subprocess.Popen[bytes] | None = None

    def running(self) -> bool:
        """Whether both Xvfb and x11vnc are alive."""
        return super().running() and self._xvfb is not None and self._xvfb.poll() is None

    def _try_start(self, xvnc: str, number: int, port: int, passwd_file: Path) -> bool:
        xvfb, x11vnc = shutil.which("Xvfb"), shutil.which("x11vnc")
        if xvfb is None or x11vnc is None:
            missing = "Xvfb" if xvfb is None else "x11vnc"
            raise DesktopError(f"{missing} not found on PATH; install it: {_INSTALL_HINT}")
        width, height = self.size
        with open(self.log_path, "ab") as logfile:
            self._xvfb = subprocess.Popen(
                [*(xvfb, f":{number}", "-screen", "0"), f"{width}x{height}x{self.depth}"],
                stdin=subprocess.DEVNULL,
                stdout=logfile,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + self.start_timeout
        socket_path = Path(f"/tmp/.X11-unix/X{number}")
        xvfb_pid = self._xvfb.pid
        # the display is ours once its lock names our Xvfb (another server may have taken the
        # number since it was found free: ours then exits, and start() tries another)
        while not (socket_path.exists() and display_owner(number) == xvfb_pid):
            if self._xvfb.poll() is not None or time.monotonic() > deadline:
                stop_process(self._xvfb)
                self._xvfb = None
                return False
            time.sleep(0.02)
        auth = ["-nopw"] if self.no_password else ["-rfbauth", str(passwd_file)]
        argv = [
            x11vnc,
            "-display",
            f":{number}",
            "-rfbport",
            str(port),
            "-listen",
            "127.0.0.1",
            "-localhost",
            "-noipv6",
            "-forever",
            "-shared",
            *auth,
            *self.extra_args,
        ]
        with open(self.log_path, "ab") as logfile:
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=logfile, stderr=subprocess.STDOUT
            )
        self.display, self.port = f":{number}", port
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self._proc = None
                stop_process(self._xvfb)
                self._xvfb = None
                return False
            if listens_on(self._proc.pid, port) and port_open(port):
                return True
            time.sleep(0.05)
        self.stop()
        raise DesktopError(
            f"x11vnc on :{number} did not accept connections within {self.start_timeout:g} s; "
            f"see {self.log_path}"
        )

    def _stop_server(self) -> None:
        super()._stop_server()
        if self._xvfb is not None:
            stop_process(self._xvfb)
            self._xvfb = None
