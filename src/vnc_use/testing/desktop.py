"""Start and stop a real VNC test desktop (TigerVNC ``Xvnc``) on 127.0.0.1.

>>> with TestDesktop(width=1024, height=768) as desk:      # doctest: +SKIP
...     desk.launch(["xterm"])
...     print(desk.server, desk.password)

Run ``python -m vnc_use.testing.desktop`` to start one for yourself: it prints the address
and password and keeps the desktop up until Ctrl-C.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from vnc_use.desktops.service import Service
from vnc_use.desktops.xserver import (
    XvncError,
    display_free,
    free_port,
    stop_process,
    vnc_password_file,
    wait_for_xvnc,
    xvnc_argv,
)
from vnc_use.errors import ConfigError
from vnc_use.testing.ctrl_c import stop_on_ctrl_c

__all__ = ["DesktopError", "TestDesktop"]

log = logging.getLogger(__name__)

_INSTALL_HINT = "apt-get install tigervnc-standalone-server tigervnc-tools"


class DesktopError(RuntimeError):
    """The test desktop could not be started (missing program, server exited, ...)."""


class TestDesktop(Service):
    """A TigerVNC ``Xvnc`` desktop bound to 127.0.0.1 with VNC password authentication.

    ``security_types`` is passed to ``-SecurityTypes`` (default ``VncAuth``; TLS types such
    as ``TLSVnc`` or ``X509Vnc`` also work, the X509 ones with ``x509_cert``/``x509_key``).

    ``start()`` picks a free display number and TCP port, writes the password file with
    ``vncpasswd -f`` and waits until the server accepts connections. ``stop()`` ends every
    process it started (launched X clients first), by PID. Use it as a context manager.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        width: int = 1440,
        height: int = 900,
        password: str | None = None,
        *,
        start_timeout: float = 15.0,
        depth: int = 24,
        security_types: str = "VncAuth",
        x509_cert: Path | str | None = None,
        x509_key: Path | str | None = None,
    ) -> None:
        if width < 16 or height < 16:
            raise ConfigError(f"desktop size {width}x{height} is too small; use at least 16x16")
        if depth not in (16, 24):
            raise ConfigError(f"desktop depth {depth} is not supported; use 16 or 24")
        self.size = (int(width), int(height))
        self.depth = depth
        # VNC passwords are cut to 8 characters; make the visible one match what counts.
        self.password = (password if password is not None else secrets.token_hex(4))[:8]
        if not self.password:
            raise ConfigError("the desktop password must not be empty")
        self.start_timeout = start_timeout
        #: Xvnc's ``-SecurityTypes`` (e.g. ``"TLSVnc"``, ``"X509Vnc"``, ``"None"``).
        self.security_types = security_types
        #: PEM certificate and key for the X509 types (``-X509Cert``, ``-X509Key``).
        self.x509 = (str(x509_cert), str(x509_key)) if x509_cert is not None and x509_key else None
        self.display = ""
        self.port = 0
        self.tmpdir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._clients: list[subprocess.Popen[bytes]] = []

    # ------------------------------------------------------------------ properties

    @property
    def server(self) -> str:
        """The VNC address, ``"127.0.0.1::PORT"``."""
        return f"127.0.0.1::{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """A copy of the environment with ``DISPLAY`` set to this desktop."""
        env = dict(os.environ)
        env["DISPLAY"] = self.display
        env.pop("WAYLAND_DISPLAY", None)
        return env

    @property
    def log_path(self) -> Path:
        """Where Xvnc's output goes."""
        if self.tmpdir is None:
            raise DesktopError("the desktop is not started")
        return self.tmpdir / "Xvnc.log"

    @property
    def pid(self) -> int | None:
        """The Xvnc process id while it runs."""
        return self._proc.pid if self._proc is not None else None

    def running(self) -> bool:
        """Whether the Xvnc process is alive."""
        return self._proc is not None and self._proc.poll() is None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> TestDesktop:
        """Start Xvnc and wait until it accepts VNC and X connections; returns ``self``."""
        if self.running():
            return self
        xvnc, vncpasswd = shutil.which("Xvnc"), shutil.which("vncpasswd")
        if xvnc is None or vncpasswd is None:
            missing = "Xvnc" if xvnc is None else "vncpasswd"
            raise DesktopError(f"{missing} not found on PATH; install it: {_INSTALL_HINT}")
        self.tmpdir = Path(tempfile.mkdtemp(prefix="vnc-use-desktop-"))
        passwd_file = self.tmpdir / "passwd"
        try:
            passwd_file.write_bytes(vnc_password_file(vncpasswd, [self.password]))
        except XvncError as exc:
            raise DesktopError(str(exc)) from None
        passwd_file.chmod(0o600)

        last_error = ""
        for attempt in range(8):
            number = self._pick_display(attempt)
            port = free_port()
            if self._try_start(xvnc, number, port, passwd_file):
                log.info("test desktop %s on %s (%dx%d)", self.display, self.server, *self.size)
                return self
            last_error = self._log_tail()
        self._cleanup_dir()
        raise DesktopError(f"Xvnc did not start after 8 attempts: {last_error}")

    def _pick_display(self, attempt: int) -> int:
        base = 20 + (os.getpid() * 7 + attempt * 13) % 400
        for offset in range(400):
            number = 20 + (base - 20 + offset) % 400
            if display_free(number):
                return number
        raise DesktopError("no free X display number between :20 and :419")

    def kill_server(self) -> None:
        """Kill Xvnc abruptly (SIGKILL), as a crash would: connections drop, X clients die.

        For failure tests; :meth:`restart_server` brings it back on the same address.
        """
        if self._proc is None:
            raise DesktopError("the desktop is not running")
        self._proc.kill()
        self._proc.wait(timeout=10)
        self._proc = None

    def restart_server(self) -> None:
        """Start Xvnc again after :meth:`kill_server`, on the same display, port and password."""
        xvnc = shutil.which("Xvnc")
        if xvnc is None or self.tmpdir is None or not self.display:
            raise DesktopError("restart_server() needs a desktop that was started and killed")
        if self.running():
            return
        number = int(self.display[1:])
        for stale in (Path(f"/tmp/.X{number}-lock"), Path(f"/tmp/.X11-unix/X{number}")):
            stale.unlink(missing_ok=True)  # left behind by the Xvnc we killed ourselves
        if not self._try_start(xvnc, number, self.port, self.tmpdir / "passwd"):
            raise DesktopError(f"Xvnc did not restart on {self.server}: {self._log_tail()}")

    def _try_start(self, xvnc: str, number: int, port: int, passwd_file: Path) -> bool:
        extra = ["-X509Cert", self.x509[0], "-X509Key", self.x509[1]] if self.x509 else []
        argv = xvnc_argv(
            xvnc,
            number,
            size=self.size,
            port=port,
            passwd_file=passwd_file,
            depth=self.depth,
            security_types=self.security_types,
            extra=extra,
        )
        with open(self.log_path, "ab") as logfile:
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=logfile, stderr=subprocess.STDOUT
            )
        self.display, self.port = f":{number}", port
        proc = self._proc
        outcome = wait_for_xvnc(
            number, port, proc.pid, lambda: proc.poll() is None, self.start_timeout
        )
        if outcome == "ready":
            return True
        if outcome == "exited":
            log.debug("Xvnc :%d exited early: %s", number, self._log_tail())
            self._proc = None
            return False
        stop_process(proc)
        self._proc = None
        raise DesktopError(
            f"Xvnc :{number} did not accept connections within {self.start_timeout:g} s; "
            f"see {self.log_path}"
        )

    def _log_tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return lines[-1] if lines else "(empty log)"

    def launch(self, argv: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
        """Start an X client on this desktop (``DISPLAY`` set); it is stopped by :meth:`stop`.

        Its output goes to a log file next to Xvnc's unless ``stdout``/``stderr`` are given.
        """
        if not self.running() or self.tmpdir is None:
            raise DesktopError("start the desktop before launching clients")
        name = Path(argv[0]).name
        with open(self.tmpdir / f"{name}-{len(self._clients)}.log", "ab") as logfile:
            options: dict[str, object] = {
                "env": self.env,
                "stdin": subprocess.DEVNULL,
                "stdout": logfile,
                "stderr": subprocess.STDOUT,
            }
            options.update(kwargs)
            proc: subprocess.Popen[bytes] = subprocess.Popen(argv, **options)  # type: ignore[call-overload]
        self._clients.append(proc)
        return proc

    def stop(self) -> None:
        """Stop launched clients, then Xvnc (terminate, wait, kill), and remove temp files."""
        for proc in reversed(self._clients):
            stop_process(proc)
        self._clients.clear()
        self._stop_server()
        self._cleanup_dir()

    def _stop_server(self) -> None:
        if self._proc is not None:
            stop_process(self._proc)
            self._proc = None

    def _cleanup_dir(self) -> None:
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None


def main(argv: list[str] | None = None) -> int:
    """Start a test desktop for a person and wait until Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog="python -m vnc_use.testing.desktop",
        description="Start a TigerVNC test desktop on 127.0.0.1 and keep it up until Ctrl-C.",
    )
    parser.add_argument("--size", default="1440x900", help="WIDTHxHEIGHT (default 1440x900)")
    parser.add_argument("--password", help="VNC password (default: random, 8 characters)")
    parser.add_argument("--probe", action="store_true", help="run the probe app on it")
    parser.add_argument("--xterm", action="store_true", help="run an xterm on it")
    args = parser.parse_args(argv)
    try:
        width, height = (int(v) for v in args.size.lower().split("x"))
    except ValueError:
        parser.error(f"bad --size {args.size!r}; use WIDTHxHEIGHT, e.g. 1440x900")
    desktop = TestDesktop(width, height, args.password)
    stop_on_ctrl_c()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        desktop.start()
        if args.probe:
            out = Path(tempfile.gettempdir()) / f"vnc-use-probe-{desktop.port}.jsonl"
            desktop.launch([sys.executable, "-m", "vnc_use.testing.probe", "--out", str(out)])
            print(f"probe events: {out}")
        if args.xterm:
            desktop.launch(["xterm"])
        print(f"VNC address: {desktop.server}")
        print(f"password:    {desktop.password}")
        print(f"X display:   {desktop.display}")
        print("Press Ctrl-C to stop.", flush=True)
        assert desktop._proc is not None
        desktop._proc.wait()
        print(f"Xvnc exited: {desktop._log_tail()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    except (DesktopError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        desktop.stop()


if __name__ == "__main__":
    sys.exit(main())
