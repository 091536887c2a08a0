"""FreeRDP's shadow server on 127.0.0.1, sharing an X screen: a real RDP server for tests.

>>> with X11vncDesktop(1280, 800) as desk, RdpShadowServer(desk.display) as rdp:  # doctest: +SKIP
...     print(rdp.address)                      # "127.0.0.1:PORT", for --rdp

``user``/``password`` turn on NLA (``+auth /sec:nla``) with a SAM file written by
``winpr-hash``; without them anyone may connect (TLS). The server keeps its self-signed
certificate in its own config folder: :meth:`RdpShadowServer.new_certificate` restarts it
with a fresh one (a "changed certificate"). Packages: ``freerdp2-shadow-x11``, ``winpr-utils``.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from vnc_use.desktops.service import Service
from vnc_use.desktops.xserver import free_port, port_open, stop_process

__all__ = ["RdpShadowError", "RdpShadowServer"]

_INSTALL_HINT = "apt-get install freerdp2-shadow-x11 winpr-utils"


class RdpShadowError(RuntimeError):
    """The shadow server could not be started."""


class RdpShadowServer(Service):
    """``freerdp-shadow-cli`` serving X display ``display`` on 127.0.0.1:``port``."""

    def __init__(
        self,
        display: str,
        *,
        user: str | None = None,
        password: str | None = None,
        port: int | None = None,
        start_timeout: float = 15.0,
    ) -> None:
        self.display = display
        self.user, self.password = user, password
        self.port = port or 0
        self.start_timeout = start_timeout
        self.tmpdir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``, as ``--rdp`` takes it."""
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The server's PID while it runs."""
        return self._proc.pid if self._proc is not None else None

    @property
    def log_path(self) -> Path:
        """Where the server's output goes."""
        if self.tmpdir is None:
            raise RdpShadowError("the shadow server is not started")
        return self.tmpdir / "shadow.log"

    def start(self) -> RdpShadowServer:
        """Start the server and wait until it accepts connections."""
        shadow = shutil.which("freerdp-shadow-cli")
        if shadow is None:
            raise RdpShadowError(f"freerdp-shadow-cli not found; install it: {_INSTALL_HINT}")
        if self.tmpdir is None:
            self.tmpdir = Path(tempfile.mkdtemp(prefix="vnc-use-rdp-shadow-"))
        self.port = self.port or free_port()
        argv = [shadow, f"/port:{self.port}", "/bind-address:127.0.0.1"]
        if self.user and self.password:
            argv += ["+auth", "/sec:nla", f"/sam-file:{self._sam_file()}"]
        else:
            argv += ["-auth"]
        home = self.tmpdir / "home"
        home.mkdir(exist_ok=True)
        env = {
            "PATH": "/usr/bin:/bin",
            "DISPLAY": self.display,
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
        }
        with open(self.log_path, "ab") as out:
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env
            )
        deadline = time.monotonic() + self.start_timeout
        while not port_open(self.port):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RdpShadowError(f"freerdp-shadow-cli did not start; see {self.log_path}")
            time.sleep(0.05)
        return self

    def _sam_file(self) -> Path:
        winpr_hash = shutil.which("winpr-hash")
        if winpr_hash is None:
            raise RdpShadowError(f"winpr-hash not found; install it: {_INSTALL_HINT}")
        assert self.tmpdir is not None and self.user and self.password
        result = subprocess.run(
            [winpr_hash, "-u", self.user, "-p", self.password, "-f", "sam"],
            capture_output=True,
            timeout=10,
            check=True,
        )
        sam = self.tmpdir / "SAM"
        sam.write_bytes(result.stdout)
        sam.chmod(0o600)
        return sam

    def new_certificate(self) -> None:
        """Restart on the same port with a newly generated certificate."""
        self.stop_server()
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir / "home", ignore_errors=True)
        self.start()

    def stop_server(self) -> None:
        """Stop the server process only (its folder and certificate stay for :meth:`start`)."""
        if self._proc is not None:
            stop_process(self._proc)
            self._proc = None

    def stop(self) -> None:
        """Stop the server and remove its folder."""
        self.stop_server()
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None
