"""A managed local desktop: TigerVNC ``Xvnc`` + openbox + xterm + a browser, on 127.0.0.1.

``vnc-use desktop up`` starts one, ``vnc-use run`` uses it when no ``--vnc`` is given, and
``vnc-use view`` shows it in a browser. Everything comes from Debian/Ubuntu packages.

>>> desk = LocalDesktop()                        # doctest: +SKIP
>>> state, started = desk.up()                   # doctest: +SKIP
>>> state.server, desk.credentials().password    # doctest: +SKIP
>>> desk.down()                                  # doctest: +SKIP

How it is kept safe and manageable:

* The state lives in a per-user directory (mode 0700): ``$VNC_USE_DESKTOP_DIR``, else
  ``$XDG_STATE_HOME/vnc-use/desktop``, else ``~/.local/state/vnc-use/desktop``. It holds
  ``state.json`` (display, port, the processes; no secrets), ``credentials.json`` (the full and
  the view-only VNC password, mode 0600), ``passwd`` (the same two passwords in the form Xvnc
  reads, mode 0600), the browser profile and the logs.
* Xvnc listens on 127.0.0.1 only (``-interface 127.0.0.1 -UseIPv6=0``, no X11 over TCP)
  and asks for VncAuth. Its password file holds two passwords: the second one gives **view-only**
  access, enforced by Xvnc itself (it drops the viewer's key and pointer events).
* Every process is started in its own session (``start_new_session``), so it outlives the
  command that started it. ``state.json`` records each one's PID, its start time (field 22 of
  ``/proc/PID/stat``) and the boot id. :meth:`LocalDesktop.down` signals a PID only after
  checking that it still has that start time in that boot, so a recycled PID is never
  touched; it stops the members of each recorded session too (a browser's helpers). Nothing
  is ever looked up or killed by process name.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import os
import re
import secrets
import shutil
import string
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from vnc_use import config
from vnc_use.desktops import processes
from vnc_use.desktops.processes import (
    ProcessRecord,
    boot_id,
    keep_child,
    process_start_time,
    reap,
    session_members,
    stop_session,
    terminate,
    write_private,
)
from vnc_use.desktops.xserver import (
    XvncError,
    display_free,
    free_port,
    port_free,
    vnc_password_file,
    wait_for_xvnc,
    xvnc_argv,
)
from vnc_use.errors import ConfigError, VncUseError

__all__ = [
    "APT_PACKAGES",
    "BROWSERS",
    "DESKTOP_COLOR",
    "ENV_STATE_DIR",
    "TERMINAL_COLOR",
    "Credentials",
    "DesktopState",
    "DesktopStatus",
    "LocalDesktop",
    "LocalDesktopError",
    "MissingPackagesError",
    "ProcessRecord",
    "default_state_dir",
    "install_command",
    "marked_processes",
    "parse_size",
    "process_start_time",
    "session_members",
]

log = logging.getLogger(__name__)

#: Environment variable that overrides the state directory (tests point it at a temp dir).
ENV_STATE_DIR = config.DESKTOP_DIR_VARIABLE
#: Background colour of the desktop (the X root window).
DESKTOP_COLOR = "#3a6ea5"
#: Background colour of the desktop's terminal.
TERMINAL_COLOR = "#1e2a36"
#: Browser choices for :class:`LocalDesktop` (``auto``: Chromium, else Firefox ESR).
BROWSERS = ("auto", "chromium", "firefox", "none")
#: The Debian/Ubuntu package that provides each program the desktop uses.
APT_PACKAGES: dict[str, str] = {
    "Xvnc": "tigervnc-standalone-server",
    "vncpasswd": "tigervnc-tools",
    "openbox": "openbox",
    "xterm": "xterm",
    "chromium": "chromium",
    "firefox-esr": "firefox-esr",
    "xsetroot": "x11-xserver-utils",
    "xprop": "x11-utils",
    "xwininfo": "x11-utils",
}
_STATE_VERSION = 1
_OPENBOX_RC = Path("/etc/xdg/openbox/rc.xml")
_ID_VARIABLE = "VNC_USE_DESKTOP_ID"
#: The only variables of the caller's environment the desktop's programs see: no API keys,
#: no VNC passwords, nothing the agent could read off a terminal on the screen.
_ENV_KEEP = ("PATH", "LANG", "LANGUAGE", "TZ", "USER", "LOGNAME", "SHELL", "TMPDIR")
_PASSWORD_ALPHABET = string.ascii_letters + string.digits
# One line of ``xwininfo -root -tree``: ... ("instance" "Class")  WIDTHxHEIGHT+X+Y ...
_WINDOW_RE = re.compile(r'\("([^"]*)" "([^"]*)"\)\s+(\d+)x(\d+)')
#: Cell size of xterm's font (Monospace 11: DejaVu Sans Mono at 96 dpi), to lay out windows.
_CELL = (10, 21)

#: Chromium switches: no background traffic (this machine's network may be closed), no
#: first-run UI, a profile of our own.
_CHROMIUM_FLAGS = (
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--disable-default-apps",
    "--disable-breakpad",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider",
    "--password-store=basic",
    "--disable-gpu",
    "--test-type",
)
#: Firefox preferences with the same intent (written to the new profile's ``user.js``).
_FIREFOX_PREFS: dict[str, bool | str] = {
    "app.update.auto": False,
    "app.update.enabled": False,
    "app.normandy.enabled": False,
    "app.shield.optoutstudies.enabled": False,
    "browser.shell.checkDefaultBrowser": False,
    "browser.startup.homepage_override.mstone": "ignore",
    "browser.aboutwelcome.enabled": False,
    "browser.discovery.enabled": False,
    "browser.region.update.enabled": False,
    "browser.search.update": False,
    "browser.safebrowsing.malware.enabled": False,
    "browser.safebrowsing.phishing.enabled": False,
    "browser.safebrowsing.downloads.enabled": False,
    "browser.newtabpage.activity-stream.feeds.topsites": False,
    "browser.topsites.contile.enabled": False,
    "datareporting.policy.dataSubmissionEnabled": False,
    "datareporting.healthreport.uploadEnabled": False,
    "extensions.update.enabled": False,
    "extensions.getAddons.cache.enabled": False,
    "media.gmp-manager.updateEnabled": False,
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False,
    "network.dns.disablePrefetch": True,
    "network.prefetch-next": False,
    "services.settings.server": "",
    "toolkit.telemetry.enabled": False,
    "toolkit.telemetry.unified": False,
}


class LocalDesktopError(VncUseError):
    """The local desktop could not be started, read or stopped."""


class MissingPackagesError(ConfigError):
    """Programs the local desktop needs are not installed; the message has the install command."""

    def __init__(self, programs: Sequence[str]) -> None:
        self.programs = list(programs)
        self.packages = sorted({APT_PACKAGES.get(p, p) for p in programs})
        self.command = install_command(self.packages)
        super().__init__(
            f"the local desktop needs {', '.join(self.programs)}, which "
            f"{'is' if len(self.programs) == 1 else 'are'} not installed; run: {self.command}"
        )


def install_command(packages: Sequence[str]) -> str:
    """The exact shell command that installs ``packages`` with apt-get (sudo unless root)."""
    sudo = "" if os.geteuid() == 0 else "sudo "
    return f"{sudo}apt-get install -y {' '.join(packages)}"


def default_state_dir() -> Path:
    """Where the desktop's state lives: ``$VNC_USE_DESKTOP_DIR``, ``$XDG_STATE_HOME/...``, ~."""
    return config.desktop_state_dir()


def parse_size(text: str) -> tuple[int, int]:
    """``"1440x900"`` -> ``(1440, 900)``; raises :class:`ConfigError` on anything else."""
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ConfigError(f"bad desktop size {text!r}; use WIDTHxHEIGHT, e.g. 1440x900") from None
    if not (320 <= width <= 8192 and 240 <= height <= 8192):
        raise ConfigError(f"desktop size {width}x{height} is out of range (320x240 to 8192x8192)")
    return width, height


# --------------------------------------------------------------------------- /proc


def marked_processes(desktop_id: str) -> dict[int, int]:
    """Live processes whose environment has ``VNC_USE_DESKTOP_ID=desktop_id``: ``{pid: start}``.

    Only this desktop's processes and their descendants can carry that random value.
    """
    return processes.marked_processes(_ID_VARIABLE, desktop_id)


# --------------------------------------------------------------------------- records


@dataclass
class DesktopState:
    """What ``state.json`` holds: where the desktop is and which processes make it up."""

    display: str
    port: int
    width: int
    height: int
    browser: str
    boot_id: str
    started_at: str
    processes: list[ProcessRecord] = field(default_factory=list)
    #: A random id put in every desktop process's environment (``VNC_USE_DESKTOP_ID``), so
    #: helpers that leave the recorded sessions (Chromium's crash handler) are found too.
    desktop_id: str = ""
    version: int = _STATE_VERSION

    @property
    def server(self) -> str:
        """The VNC address, ``"127.0.0.1::PORT"``."""
        return f"127.0.0.1::{self.port}"

    def process(self, name: str) -> ProcessRecord | None:
        """The record named ``name`` (``"Xvnc"``, ``"openbox"``, ...), if any."""
        return next((p for p in self.processes if p.name == name), None)

    def to_json(self) -> str:
        """Serialise for ``state.json``."""
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> DesktopState:
        """Parse ``state.json``; raises ``ValueError``/``KeyError``/``TypeError`` if malformed."""
        data: dict[str, Any] = json.loads(text)
        procs = [ProcessRecord(**p) for p in data.pop("processes", [])]
        return cls(**data, processes=procs)


@dataclass(frozen=True)
class Credentials:
    """The desktop's two VNC passwords: full access, and view-only (enforced by Xvnc)."""

    password: str
    view_password: str

    def __repr__(self) -> str:  # never show the secrets in logs or tracebacks
        return "Credentials(password=***, view_password=***)"


@dataclass
class DesktopStatus:
    """The result of :meth:`LocalDesktop.status`."""

    state: DesktopState | None
    running: bool
    alive: dict[str, bool] = field(default_factory=dict)


# --------------------------------------------------------------------------- the desktop


class LocalDesktop:
    """The per-user managed desktop in ``state_dir`` (default :func:`default_state_dir`).

    :meth:`up` starts it (or finds it running), :meth:`status` reports on it, :meth:`down`
    stops exactly the processes it started. ``size``, ``browser``, ``display`` (the X
    display number; default the lowest free one from 1) and ``password`` (the full-access VNC
    password; default a new random one) apply when it starts.
    """

    def __init__(
        self,
        state_dir: str | Path | None = None,
        *,
        size: tuple[int, int] = (1440, 900),
        browser: str = "auto",
        start_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        display: int | None = None,
        password: str | None = None,
    ) -> None:
        if browser not in BROWSERS:
            raise ConfigError(f"unknown browser {browser!r}; choose one of {', '.join(BROWSERS)}")
        if display is not None and not 0 <= display <= MAX_DISPLAY:
            raise ConfigError(
                f"display number {display} is out of range; choose one from 0 to {MAX_DISPLAY}"
            )
        self.display = display
        self.password = password  # None: a new random one at each start
        self.state_dir = Path(state_dir).expanduser() if state_dir else default_state_dir()
        self.size = size
        self.browser = browser
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout

    # -- paths ------------------------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        """``state.json``: display, port and the recorded processes (no secrets)."""
        return self.state_dir / "state.json"

    @property
    def credentials_file(self) -> Path:
        """``credentials.json``: the full and view-only passwords (mode 0600)."""
        return self.state_dir / "credentials.json"

    @property
    def passwd_file(self) -> Path:
        """``passwd``: both passwords in Xvnc's ``-rfbauth`` format (mode 0600)."""
        return self.state_dir / "passwd"

    @property
    def log_dir(self) -> Path:
        """Where each process's output goes."""
        return self.state_dir / "logs"

    @property
    def home_dir(self) -> Path:
        """``HOME`` of the desktop's programs (their dotfiles stay out of the user's home)."""
        return self.state_dir / "home"

    @property
    def profile_dir(self) -> Path:
        """The browser's profile, new and empty at every start."""
        return self.state_dir / "browser-profile"

    # -- queries ----------------------------------------------------------------------------
    def read_state(self) -> DesktopState | None:
        """The recorded state, or None when there is none (or it is unreadable)."""
        try:
            return DesktopState.from_json(self.state_file.read_text("utf-8"))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring unreadable %s: %s", self.state_file, exc)
            return None

    def status(self) -> DesktopStatus:
        """Whether the desktop runs (its Xvnc is alive and ours), and which processes live."""
        state = self.read_state()
        if state is None:
            return DesktopStatus(None, False)
        alive = {p.name: p.is_ours(state.boot_id) for p in state.processes}
        return DesktopStatus(state, alive.get("Xvnc", False), alive)

    def credentials(self) -> Credentials:
        """The passwords of the current desktop; raises if there are none."""
        try:
            data = json.loads(self.credentials_file.read_text("utf-8"))
            return Credentials(str(data["password"]), str(data["view_password"]))
        except (OSError, ValueError, KeyError) as exc:
            raise LocalDesktopError(
                f"no readable credentials in {self.credentials_file} ({type(exc).__name__}); "
                "start the desktop with: vnc-use desktop up"
            ) from None

    def password_for(self, server: str | None) -> str | None:
        """The full password when ``server`` is this running desktop's address, else None."""
        if not server:
            return None
        status = self.status()
        if not status.running or status.state is None:
            return None
        from vnc_use.desktops.address import parse_server

        try:
            host, port = parse_server(server)
        except ConfigError:
            return None
        if host not in ("127.0.0.1", "localhost") or port != status.state.port:
            return None
        try:
            return self.credentials().password
        except LocalDesktopError:
            return None

    # -- lifecycle --------------------------------------------------------------------------
    def up(self) -> tuple[DesktopState, bool]:
        """Start the desktop unless it runs; returns ``(state, started)``.

        Raises :class:`MissingPackagesError` (with the install command) when a program is
        missing, and :class:`LocalDesktopError` when something does not start.
        """
        self._prepare_dir()
        with self._locked():
            status = self.status()
            if status.running and status.state is not None:
                wanted = f":{self.display}" if self.display is not None else None
                if wanted is not None and status.state.display != wanted:
                    raise ConfigError(
                        f"the local desktop already runs on display {status.state.display}, "
                        f"not {wanted}; stop it first (vnc-use desktop down) to move it"
                    )
                return status.state, False
            if status.state is not None:  # stale: stop whatever of it is left
                self._stop_all(status.state)
                self._forget()
            programs = self._programs()
            try:
                state = self._start(programs, self._new_credentials())
            except BaseException:
                stale = self.read_state()
                if stale is not None:
                    self._stop_all(stale)
                self._forget()
                raise
            log.info("local desktop %s on %s", state.display, state.server)
            return state, True

    def down(self) -> list[ProcessRecord]:
        """Stop the recorded processes that are still ours; returns those it stopped."""
        if not self.state_dir.exists():
            return []
        with self._locked():
            state = self.read_state()
            stopped = self._stop_all(state) if state is not None else []
            self._forget()
            return stopped

    # -- internals --------------------------------------------------------------------------
    def _prepare_dir(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = self.state_dir.stat()
        if info.st_uid != os.geteuid():
            raise LocalDesktopError(f"{self.state_dir} belongs to another user; choose another")
        self.state_dir.chmod(0o700)
        for folder in (self.log_dir, self.home_dir):
            folder.mkdir(exist_ok=True, mode=0o700)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Serialise ``up``/``down`` of the same state directory across processes."""
        fd = os.open(self.state_dir / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _programs(self) -> dict[str, str]:
        """Absolute paths of the programs to run; raises listing every missing one."""
        found: dict[str, str] = {}
        missing: list[str] = []
        for name in ("Xvnc", "vncpasswd", "openbox", "xterm"):
            path = shutil.which(name)
            if path is None:
                missing.append(name)
            else:
                found[name] = path
        if self.browser != "none":
            candidates = {
                "auto": ("chromium", "firefox-esr"),
                "chromium": ("chromium",),
                "firefox": ("firefox-esr", "firefox"),
            }[self.browser]
            browser = next((c for c in candidates if shutil.which(c)), None)
            if browser is None:
                missing.append(candidates[0])
            else:
                found["browser"] = str(shutil.which(browser))
                found["browser_kind"] = "chromium" if browser == "chromium" else "firefox"
        if missing:
            raise MissingPackagesError(missing)
        for optional in ("xsetroot", "xprop", "xwininfo"):
            path = shutil.which(optional)
            if path is not None:
                found[optional] = path
        return found

    def _new_credentials(self) -> Credentials:
        creds = Credentials(self.password or _new_password(), _new_password())
        while creds.view_password == creds.password:  # pragma: no cover - 1 in 2**47
            creds = Credentials(creds.password, _new_password())
        write_private(
            self.credentials_file,
            json.dumps({"password": creds.password, "view_password": creds.view_password}).encode(),
        )
        return creds

    def _write_passwd(self, vncpasswd: str, creds: Credentials) -> None:
        try:
            data = vnc_password_file(vncpasswd, [creds.password, creds.view_password])
        except XvncError as exc:
            raise LocalDesktopError(str(exc)) from None
        write_private(self.passwd_file, data)

    def _save(self, state: DesktopState) -> None:
        write_private(self.state_file, state.to_json())

    def _forget(self) -> None:
        for path in (self.state_file, self.credentials_file, self.passwd_file):
            path.unlink(missing_ok=True)
        shutil.rmtree(self.profile_dir, ignore_errors=True)

    def _env(self, state: DesktopState) -> dict[str, str]:
        env = config.child_environment(_ENV_KEEP, prefixes=("LC_",))
        env.update(
            DISPLAY=state.display,
            HOME=str(self.home_dir),
            **{_ID_VARIABLE: state.desktop_id},
        )
        return env

    def _spawn(self, state: DesktopState, name: str, argv: list[str]) -> ProcessRecord:
        env = self._env(state)
        with open(self.log_dir / f"{name}.log", "ab") as logfile:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=logfile,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.home_dir,
                start_new_session=True,  # outlives this command; a session we can stop whole
            )
        start = process_start_time(proc.pid)
        if start is None:
            proc.wait()
            raise LocalDesktopError(f"{name} exited at once; see {self.log_dir / (name + '.log')}")
        keep_child(proc)
        record = ProcessRecord(name, proc.pid, start, argv)
        state.processes.append(record)
        self._save(state)
        return record

    def _log_tail(self, name: str) -> str:
        try:
            lines = (self.log_dir / f"{name}.log").read_text(errors="replace").strip()
        except OSError:
            return "(no log)"
        return lines.splitlines()[-1] if lines else "(empty log)"

    def _start(self, programs: dict[str, str], creds: Credentials) -> DesktopState:
        self._write_passwd(programs["vncpasswd"], creds)
        state = self._start_xvnc(programs["Xvnc"])
        deadline = time.monotonic() + self.start_timeout
        if "xsetroot" in programs:
            subprocess.run(
                [programs["xsetroot"], "-solid", DESKTOP_COLOR],
                env=self._env(state),
                capture_output=True,
                timeout=10,
                check=False,
            )
        # The terminal on the left, the browser on the right.
        width, height = state.width, state.height
        term_cols = max(40, min(100, int(width * 0.45) // _CELL[0]))
        term_rows = max(10, (height - 40) // _CELL[1])
        left = min(width // 2, term_cols * _CELL[0] + 24)
        self._spawn(
            state, "openbox", [programs["openbox"], "--sm-disable", *self._openbox_config(left)]
        )
        if "xprop" in programs:
            self._wait(lambda: self._wm_ready(programs["xprop"], state), deadline, state, "openbox")
        self._spawn(
            state,
            "xterm",
            [
                programs["xterm"],
                *("-geometry", f"{term_cols}x{term_rows}+0+0"),
                *("-fa", "Monospace", "-fs", "11"),
                *("-bg", TERMINAL_COLOR, "-fg", "#e6e6e6"),
                *("-title", "Terminal"),
            ],
        )
        windows = ["xterm"]
        if "browser" in programs:
            kind = programs["browser_kind"]
            argv = self._browser_argv(kind, programs["browser"], left, width - left, height)
            self._spawn(state, "browser", argv)
            windows.append("chromium" if kind == "chromium" else "navigator")
        if "xwininfo" in programs:
            self._wait(
                lambda: set(windows) <= self._window_classes(programs["xwininfo"], state),
                deadline,
                state,
                "the windows",
            )
        return state

    def _openbox_config(self, browser_x: int) -> list[str]:
        """Openbox's own config: one virtual desktop (a wheel turn on the bare desktop would
        otherwise switch to an empty one, hiding every window from the agent), and the
        browser's window placed at ``browser_x`` (Firefox has no switch for its position)."""
        try:
            text = _OPENBOX_RC.read_text("utf-8")
        except OSError:
            return []
        text = re.sub(
            r"(<desktops>.*?<number>)\d+(</number>)", r"\g<1>1\g<2>", text, count=1, flags=re.S
        )
        rule = (
            '<application role="browser" type="normal"><position force="yes">'
            f"<x>{browser_x}</x><y>0</y></position></application>"
        )
        text = text.replace("<applications>", f"<applications>\n{rule}", 1)
        path = self.state_dir / "openbox-rc.xml"
        path.write_text(text, "utf-8")
        return ["--config-file", str(path)]

    def _browser_argv(self, kind: str, path: str, x: int, width: int, height: int) -> list[str]:
        shutil.rmtree(self.profile_dir, ignore_errors=True)
        self.profile_dir.mkdir(mode=0o700)
        if kind == "chromium":
            # The window manager draws the title bar (Chromium's own frame needs a compositor).
            default = self.profile_dir / "Default"
            default.mkdir(mode=0o700)
            (default / "Preferences").write_text(
                json.dumps({"browser": {"custom_chrome_frame": False}}), "utf-8"
            )
            argv = [path, *_CHROMIUM_FLAGS, f"--user-data-dir={self.profile_dir}"]
            if os.geteuid() == 0:
                argv.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
            return [
                *argv,
                f"--window-position={x},0",
                f"--window-size={width},{height}",
                "about:blank",
            ]
        prefs = "".join(
            f"user_pref({json.dumps(k)}, {json.dumps(v)});\n" for k, v in _FIREFOX_PREFS.items()
        )
        (self.profile_dir / "user.js").write_text(prefs, "utf-8")
        return [
            path,
            *("--no-remote", "--new-instance", "--profile", str(self.profile_dir)),
            *("--width", str(width), "--height", str(height)),
            "about:blank",
        ]

    def _start_xvnc(self, xvnc: str) -> DesktopState:
        width, height = self.size
        last_error = ""
        attempts = 8 if self.display is None else 1
        for attempt in range(attempts):
            number = self._display_number(attempt)
            port = 5900 + number if port_free(5900 + number) else free_port()
            state = DesktopState(
                display=f":{number}",
                port=port,
                width=width,
                height=height,
                browser=self.browser,
                boot_id=boot_id(),
                desktop_id=secrets.token_hex(16),
                started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            )
            argv = xvnc_argv(
                xvnc,
                number,
                size=(width, height),
                port=port,
                passwd_file=self.passwd_file,
                extra=("-desktop", "vnc-use"),
            )
            try:
                record = self._spawn(state, "Xvnc", argv)
            except LocalDesktopError:  # exited at once (the display was taken meanwhile)
                last_error = self._log_tail("Xvnc")
                if self.display is not None:
                    break
                continue
            alive = functools.partial(record.is_ours, state.boot_id)
            outcome = wait_for_xvnc(number, port, record.pid, alive, self.start_timeout)
            if outcome == "ready":
                return state
            if outcome == "timeout":
                self._stop_all(state)
                raise LocalDesktopError(
                    f"Xvnc :{number} did not accept connections within "
                    f"{self.start_timeout:g} s; see {self.log_dir / 'Xvnc.log'}"
                )
            reap(record.pid)
            last_error = self._log_tail("Xvnc")
            log.debug("Xvnc :%d exited early: %s", number, last_error)
        if self.display is not None:
            raise LocalDesktopError(
                f"Xvnc did not start on display :{self.display}: {last_error}; choose another "
                "--display, or leave it out to take a free one"
            )
        raise LocalDesktopError(f"Xvnc did not start after 8 attempts: {last_error}")

    def _display_number(self, attempt: int) -> int:
        """The chosen display (refused when busy), else the lowest free one from 1."""
        if self.display is None:
            return _free_display(start=1 + attempt)
        if not display_free(self.display):
            raise ConfigError(
                f"display :{self.display} is busy (an X server or its lock file "
                f"/tmp/.X{self.display}-lock is there); choose another --display, or leave it "
                "out to take a free one"
            )
        return self.display

    def _wait(
        self, ready: Callable[[], bool], deadline: float, state: DesktopState, what: str
    ) -> None:
        """Poll ``ready()`` until true; fail if a process died or the deadline passed."""
        while True:
            if ready():
                return
            dead = [p.name for p in state.processes if not p.is_ours(state.boot_id)]
            if dead:
                raise LocalDesktopError(
                    f"{dead[0]} exited while starting: {self._log_tail(dead[0])}; "
                    f"see {self.log_dir}"
                )
            if time.monotonic() > deadline:
                raise LocalDesktopError(
                    f"{what} did not appear within {self.start_timeout:g} s; see {self.log_dir}"
                )
            time.sleep(0.05)

    def _x_query(self, argv: list[str], state: DesktopState) -> str:
        result = subprocess.run(
            argv,
            env=self._env(state),
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        return result.stdout if result.returncode == 0 else ""

    def _wm_ready(self, xprop: str, state: DesktopState) -> bool:
        out = self._x_query([xprop, "-root", "_NET_SUPPORTING_WM_CHECK"], state)
        return "window id" in out

    def _window_classes(self, xwininfo: str, state: DesktopState) -> set[str]:
        """Instance names of window-sized windows (a browser's 10x10 leader does not count)."""
        out = self._x_query([xwininfo, "-root", "-tree"], state)
        return {
            m.group(1).split(" ")[0].lower()
            for m in _WINDOW_RE.finditer(out)
            if int(m.group(3)) >= 100 and int(m.group(4)) >= 100
        }

    def _stop_all(self, state: DesktopState) -> list[ProcessRecord]:
        stopped = [
            record
            for record in reversed(state.processes)
            if stop_session(record, state.boot_id, self.stop_timeout)
        ]
        if state.boot_id == boot_id():
            leftovers = marked_processes(state.desktop_id)
            if leftovers:
                log.info("stopping %d helper processes of the desktop", len(leftovers))
                terminate(leftovers, self.stop_timeout)
        return stopped


def _new_password() -> str:
    # VNC authentication uses the first 8 characters only.
    return "".join(secrets.choice(_PASSWORD_ALPHABET) for _ in range(8))


#: Highest display number ``--display`` accepts (its VNC port, 5900 + N, must exist).
MAX_DISPLAY = 59635


def _free_display(start: int) -> int:
    for number in range(start, start + 500):
        if display_free(number):
            return number
    raise LocalDesktopError(f"no free X display number between :{start} and :{start + 499}")
