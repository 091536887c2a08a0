"""RDP desktops (Windows, xrdp, ...) through a private FreeRDP bridge.

``vnc-use run --rdp HOST[:PORT]`` starts an :class:`RdpBridge`: a TigerVNC ``Xvnc`` on a free
display, bound to 127.0.0.1 with a random password, and FreeRDP's ``xfreerdp`` full screen
inside it at the requested size (the remote session is created at that size). The agent then
drives that Xvnc like any VNC desktop; :meth:`RdpBridge.stop` ends both processes.

Security, before ``xfreerdp`` starts (:mod:`vnc_use.desktops.rdp_probe`): the server's TLS
certificate is fetched and its SHA-256 checked against ``--rdp-cert-fingerprint``, else
against the one recorded the first time (trust on first use, in :class:`TrustStore`); a
changed certificate is refused with one line naming both. FreeRDP is then told to accept that
fingerprint only (``/cert:deny,fingerprint:sha256:...``), never ``/cert:ignore``. TLS or NLA is
what FreeRDP and the server negotiate. The password reaches ``xfreerdp`` on its standard input
(``/from-stdin:force``), never on a command line; no child process inherits the caller's
environment (API keys, ``RDP_PASSWORD``).

Failures are one line each (:class:`RdpError` and its kinds): FreeRDP's own status for a
refused login, "needs NLA credentials", unreachable within the connect timeout, a changed
certificate, ``xfreerdp`` missing (with the Debian package), and the session ending mid-run.
FreeRDP's output goes to ``log_path`` only (the run folder's ``freerdp.log``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import ipaddress
import json
import logging
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from vnc_use import config
from vnc_use.desktops.keyboard import RDP_KEYBOARD, KeyboardLimits
from vnc_use.desktops.rdp_clipboard import ClipboardPaster
from vnc_use.desktops.rdp_probe import RdpProbe, RdpUnreachableError, colon_hex, probe_server
from vnc_use.desktops.service import Service
from vnc_use.desktops.xkeymap import refocus_keyboard
from vnc_use.desktops.xserver import (
    XvncError,
    display_free,
    free_port,
    stop_process,
    vnc_password_file,
    wait_for_xvnc,
    xvnc_argv,
)
from vnc_use.errors import ConfigError, VncUseError

__all__ = [
    "APT_PACKAGES",
    "DEFAULT_RDP_SIZE",
    "PASTE_PACKAGES",
    "RdpAuthError",
    "RdpBridge",
    "RdpCertificateError",
    "RdpError",
    "RdpOptions",
    "RdpTarget",
    "RdpUnreachableError",
    "RdpUnverifiedLoginError",
    "TrustStore",
    "bridge_keyboard",
    "parse_fingerprint",
]

log = logging.getLogger(__name__)

DEFAULT_RDP_SIZE = (1280, 800)
#: The Debian/Ubuntu package of each program the bridge runs.
APT_PACKAGES = {
    "xfreerdp": "freerdp2-x11",
    "Xvnc": "tigervnc-standalone-server",
    "vncpasswd": "tigervnc-tools",
    "xmodmap": "x11-xserver-utils",
    "xwininfo": "x11-utils",
}
#: Programs only ``--rdp-paste-text`` needs, and their packages.
PASTE_PACKAGES = {"xclip": "xclip"}
_ENV_KEEP = ("PATH", "LANG", "LANGUAGE", "TZ", "USER", "LOGNAME", "TMPDIR")
_HOST_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.\-_]*[A-Za-z0-9])?$")
_FREERDP_STATUS = re.compile(r"\b(ERRCONNECT_[A-Z_]+|ERRINFO_[A-Z_]+)")
_LOGIN_REFUSED = (
    "LOGON_FAILURE",
    "AUTHENTICATION_FAILED",
    "WRONG_PASSWORD",
    "ACCOUNT_",
    "PASSWORD_",
    "LOGON_TYPE_NOT_GRANTED",
    "INSUFFICIENT_PRIVILEGES",
)
#: Keycodes of Xvnc's keymap whose keysyms ``(`` and ``)`` (keypad keys) FreeRDP has no
#: scancode for: cleared, so Xvnc types them as Shift+9 / Shift+0.
_KEYPAD_PARENS = (187, 188)
#: FreeRDP's log tag of its clipboard channel (read by vnc_use.desktops.rdp_clipboard).
CLIPRDR_LOG_TAG = "com.freerdp.channels.cliprdr.client"


class RdpError(VncUseError):
    """The RDP bridge could not be started (one line: what, and the fix)."""


class RdpAuthError(RdpError):
    """The RDP server refused the login (FreeRDP's status in the message)."""


class RdpCertificateError(RdpError):
    """The server's certificate is not the one pinned or trusted on first use."""


class RdpUnverifiedLoginError(RdpError):
    """Credentials for a server without NLA: a failed login could not be told from success."""


@dataclass(frozen=True)
class RdpTarget:
    """An RDP server address: ``HOST``, ``HOST:PORT``, ``[IPv6]:PORT`` (default port 3389)."""

    host: str
    port: int = 3389

    @classmethod
    def parse(cls, text: str) -> RdpTarget:
        """Read ``HOST[:PORT]``; :class:`ConfigError` with a hint on anything else."""
        raw = text.strip()
        if raw.startswith("rdp://"):
            raw = raw[len("rdp://") :]
        host, port = raw, ""
        if raw.startswith("["):
            host, bracket, rest = raw[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else rest
            ok = bool(bracket) and _is_ipv6(host) and (not rest or rest.startswith(":"))
        else:
            if raw.count(":") == 1:
                host, port = raw.split(":")
            ok = bool(_HOST_RE.match(host))
        if not ok or (port and not (port.isdigit() and 0 < int(port) < 65536)):
            raise ConfigError(
                f"bad RDP address {text!r}; use HOST or HOST:PORT (e.g. 192.168.1.20, "
                "winbox:3389, [::1]:3390)"
            )
        return cls(host, int(port) if port else 3389)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def label(self) -> str:
        """How runs name the desktop: ``rdp://HOST:PORT (via FreeRDP)``."""
        return f"rdp://{self} (via FreeRDP)"


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def parse_fingerprint(text: str) -> str:
    """A SHA-256 fingerprint as given (hex, colons or not, ``sha256:`` prefix) -> bare hex."""
    value = text.strip().lower()
    value = value.removeprefix("sha256:").removeprefix("sha256=").replace(":", "")
    if not re.fullmatch(r"[0-9a-f]{64}", value):
        raise ConfigError(
            f"bad --rdp-cert-fingerprint {text!r}: give the certificate's SHA-256 as 64 hex "
            "digits (colons allowed), as vnc-use shows it"
        )
    return value


@dataclass(frozen=True)
class RdpOptions:
    """Where and how to connect (no secrets: run.json keeps these for resume)."""

    target: RdpTarget
    username: str | None = None
    domain: str | None = None
    size: tuple[int, int] = DEFAULT_RDP_SIZE
    fingerprint: str | None = None
    """A pinned SHA-256 (hex); None: trust on first use."""
    connect_timeout: float = 5.0
    allow_unverified_login: bool = False
    """Give credentials to a server without NLA (``--rdp-allow-unverified-login``)."""
    paste_text: bool = False
    """Text the keyboard cannot type goes through the RDP clipboard (``--rdp-paste-text``)."""

    def to_json(self) -> dict[str, object]:
        """What run.json records (``rdp``)."""
        return {
            "server": str(self.target),
            "username": self.username,
            "domain": self.domain,
            "size": f"{self.size[0]}x{self.size[1]}",
            "cert_fingerprint": self.fingerprint,
            "allow_unverified_login": self.allow_unverified_login,
            "paste_text": self.paste_text,
        }


class TrustStore:
    """Certificates trusted on first use: ``known_hosts.json`` (mode 0600) in ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / "known_hosts.json"

    def _read(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.path.read_text("utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise RdpError(
                f"cannot read {self.path} ({exc}); move it away to start afresh"
            ) from None
        return data if isinstance(data, dict) else {}

    def check(self, target: RdpTarget, seen: str, pinned: str | None) -> str:
        """Whether ``seen`` may be trusted: ``"pinned"``, ``"known"`` or ``"first use"``
        (recorded now); raises :class:`RdpCertificateError` naming both fingerprints."""
        where = f"the RDP server at {target}"
        if pinned is not None:
            if seen != pinned:
                raise RdpCertificateError(
                    f"{where} shows certificate SHA-256 {colon_hex(seen)}, not the pinned "
                    f"{colon_hex(pinned)} (--rdp-cert-fingerprint); refusing to connect"
                )
            return "pinned"
        known = self._read()
        entry = known.get(str(target))
        if entry is not None:
            if entry.get("sha256") != seen:
                raise RdpCertificateError(
                    f"{where} shows certificate SHA-256 {colon_hex(seen)}, but "
                    f"{colon_hex(entry.get('sha256', '?'))} was trusted on first use "
                    f"({self.path}); refusing to connect. If the server's certificate was "
                    f"replaced on purpose, pass --rdp-cert-fingerprint {seen}"
                )
            return "known"
        known[str(target)] = {
            "sha256": seen,
            "first_seen": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(known, out, indent=2)
        tmp.replace(self.path)
        return "first use"


def _alive(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is None


def _programs(paste_text: bool = False) -> dict[str, str]:
    wanted = {**APT_PACKAGES, **(PASTE_PACKAGES if paste_text else {})}
    found = {name: shutil.which(name) for name in wanted}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        packages = sorted({wanted[m] for m in missing})
        sudo = "" if os.geteuid() == 0 else "sudo "
        raise ConfigError(
            f"--rdp needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} "
            f"not installed; run: {sudo}apt-get install -y {' '.join(packages)}"
        )
    return {name: str(path) for name, path in found.items()}


def bridge_keyboard(paste_text: bool, display: str, log_path: Path) -> KeyboardLimits:
    """The keyboard of a bridge on X display ``display`` (its FreeRDP log: ``log_path``)."""
    resync = functools.partial(refocus_keyboard, display)
    if not paste_text:
        return dataclasses.replace(RDP_KEYBOARD, resync=resync)
    xclip = shutil.which("xclip")
    if xclip is None:
        raise ConfigError(
            f"--rdp-paste-text needs xclip; run: apt-get install -y {PASTE_PACKAGES['xclip']}"
        )
    env = config.child_environment(_ENV_KEEP, prefixes=("LC_",))
    env["DISPLAY"] = display
    paster = ClipboardPaster(xclip, env, log_path)
    return dataclasses.replace(RDP_KEYBOARD, paster=paster, resync=resync)


class RdpBridge(Service):
    """Xvnc + ``xfreerdp`` on 127.0.0.1: an RDP desktop as a VNC server (see the module).

    After :meth:`start`: :attr:`server` and :attr:`vnc_password` reach it, :attr:`probe` says
    what the server negotiated, :attr:`trust` how its certificate was trusted. ``log_path``
    receives FreeRDP's output. ``detached`` starts the processes in their own sessions so
    they outlive this process (``vnc-use desktop rdp``), with their files in ``work_dir``;
    ``xfreerdp`` then runs under a ``sh`` that stops Xvnc when the session ends, so a run on
    the bridge sees the desktop go away.
    """

    def __init__(
        self,
        options: RdpOptions,
        password: str | None,
        *,
        log_path: Path,
        trust_store: TrustStore | None = None,
        start_timeout: float = 20.0,
        detached: bool = False,
        work_dir: Path | None = None,
    ) -> None:
        self.options = options
        self._password = password
        self.log_path = log_path
        self.trust_store = trust_store or TrustStore(config.rdp_state_dir())
        self.start_timeout = start_timeout
        self.detached = detached
        self.work_dir = work_dir
        self.probe: RdpProbe | None = None
        self.trust = ""
        self.display = ""
        self.port = 0
        self.vnc_password = ""
        self.view_password = ""
        """A second password of the bridge's Xvnc that gives view-only access (live views)."""
        self.ended: str | None = None
        """Why the session ended while the bridge ran (None while it runs)."""
        self._tmp: Path | None = None
        self._xvnc: subprocess.Popen[bytes] | None = None
        self._rdp: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._keyboard: KeyboardLimits | None = None

    @property
    def server(self) -> str:
        """The bridge's VNC address, ``127.0.0.1::PORT``."""
        return f"127.0.0.1::{self.port}"

    @property
    def pids(self) -> list[int]:
        """PIDs of the running bridge processes (Xvnc, xfreerdp)."""
        return [p.pid for p in self.processes]

    @property
    def processes(self) -> list[subprocess.Popen[bytes]]:
        """The running bridge processes (Xvnc, xfreerdp)."""
        return [p for p in (self._xvnc, self._rdp) if p is not None and p.poll() is None]

    def describe(self) -> dict[str, object]:
        """What run.json and the first progress line say about the connection."""
        probe = self.probe
        nla = probe is not None and probe.protocol_name == "NLA"
        return {
            **self.options.to_json(),
            "label": self.options.target.label,
            "protocol": probe.protocol_name if probe else None,
            # NLA: a wrong password ends the connection before any session shows; without
            # it the server's own login screen checks the password inside the session
            "nla": nla,
            "cert_sha256": colon_hex(probe.fingerprint) if probe and probe.fingerprint else None,
            "cert_trust": self.trust,
        }

    def keyboard(self) -> KeyboardLimits:
        """The keyboard a run on this bridge types with: US scancodes, and with
        ``--rdp-paste-text`` a paster for the rest (see :mod:`vnc_use.desktops.rdp_clipboard`)."""
        if self._keyboard is None:
            self._keyboard = bridge_keyboard(self.options.paste_text, self.display, self.log_path)
        return self._keyboard

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> RdpBridge:
        """Check the server, start Xvnc and ``xfreerdp``, wait until the session shows."""
        opts = self.options
        programs = _programs(opts.paste_text)
        has_credentials = bool(opts.username and self._password)
        self.probe = probe_server(
            opts.target.host,
            opts.target.port,
            opts.connect_timeout,
            allow_nla=has_credentials,
        )
        self._refuse_unverified_login(has_credentials)
        if self.probe.fingerprint:
            self.trust = self.trust_store.check(
                opts.target, self.probe.fingerprint, opts.fingerprint
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.detached and self.work_dir is not None:
            self.work_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._tmp = self.work_dir
        else:
            self._tmp = Path(tempfile.mkdtemp(prefix="vnc-use-rdp-"))
        try:
            self._start_xvnc(programs)
            self._clear_keypad_parens(programs["xmodmap"])
            self._start_xfreerdp(programs["xfreerdp"], has_credentials)
            self._wait_connected(programs["xwininfo"])
        except BaseException:
            self.stop()
            raise
        if not self.detached:
            threading.Thread(target=self._watch, name="rdp-bridge-watch", daemon=True).start()
        return self

    def _refuse_unverified_login(self, has_credentials: bool) -> None:
        """Credentials for a server without NLA are refused unless the user allowed it.

        Without NLA, FreeRDP connects whatever the password and the server checks it in its
        own login screen inside the session (xrdp: "login failed for user ..."). Neither
        FreeRDP's status nor the session's behaviour tells that screen from a desktop on
        every server, and vnc-use never reads the screen (no OCR), so such a run could not
        end ``error`` on a wrong password: it is refused before connecting.
        """
        assert self.probe is not None
        if not has_credentials or self.probe.protocol_name == "NLA":
            return
        if self.options.allow_unverified_login:
            return
        raise RdpUnverifiedLoginError(
            f"the RDP server at {self.options.target} offers {self.probe.protocol_name} "
            "without NLA, so it checks the password in its own login screen and vnc-use "
            "cannot tell a failed login from a desktop; refusing to send credentials: pass "
            "--rdp-allow-unverified-login to run anyway (a wrong password then shows the "
            "server's login screen to the model)"
        )

    def stop(self) -> None:
        """Stop ``xfreerdp`` and Xvnc (by PID) and remove the private folder."""
        self._stopping.set()
        paster = self._keyboard.paster if self._keyboard is not None else None
        if isinstance(paster, ClipboardPaster):
            paster.close()
        self._keyboard = None
        for proc in (self._rdp, self._xvnc):
            if proc is not None:
                stop_process(proc)
        self._rdp = self._xvnc = None
        if self._tmp is not None and self._tmp != self.work_dir:
            shutil.rmtree(self._tmp, ignore_errors=True)
        self._tmp = None

    # -- steps ------------------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        env = config.child_environment(_ENV_KEEP, prefixes=("LC_",))
        assert self._tmp is not None
        env.update(DISPLAY=self.display, HOME=str(self._tmp), XDG_CONFIG_HOME=str(self._tmp))
        return env

    def _popen(self, argv: list[str], stdin: int) -> subprocess.Popen[bytes]:
        with open(self.log_path, "ab") as out:
            return subprocess.Popen(
                argv,
                stdin=stdin,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._env(),
                cwd=self._tmp,
                start_new_session=self.detached,
            )

    def _start_xvnc(self, programs: dict[str, str]) -> None:
        assert self._tmp is not None
        self.vnc_password = secrets.token_hex(4)
        self.view_password = secrets.token_hex(4)
        while self.view_password == self.vnc_password:  # pragma: no cover - 1 in 2**32
            self.view_password = secrets.token_hex(4)
        passwd = self._tmp / "passwd"
        try:
            data = vnc_password_file(programs["vncpasswd"], [self.vnc_password, self.view_password])
        except XvncError as exc:
            raise RdpError(str(exc)) from None
        fd = os.open(passwd, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        for _attempt in range(8):
            number = next(n for n in range(20, 600) if display_free(n))
            self.display, self.port = f":{number}", free_port()
            argv = xvnc_argv(
                programs["Xvnc"],
                number,
                size=self.options.size,
                port=self.port,
                passwd_file=passwd,
                # keys sent as scancodes are pressed as those keys (no keysym lookup, no
                # faked Shift or Caps Lock): see vnc_use.desktops.keyboard
                extra=("-desktop", f"vnc-use rdp {self.options.target}", "-RawKeyboard=1"),
            )
            proc = self._popen(argv, subprocess.DEVNULL)
            alive = functools.partial(_alive, proc)
            outcome = wait_for_xvnc(number, self.port, proc.pid, alive, 15.0)
            if outcome == "ready":
                self._xvnc = proc
                return
            stop_process(proc)
        raise RdpError(f"the bridge's Xvnc did not start; see {self.log_path}")

    def _clear_keypad_parens(self, xmodmap: str) -> None:
        exprs = [arg for code in _KEYPAD_PARENS for arg in ("-e", f"keycode {code} =")]
        subprocess.run(
            [xmodmap, *exprs], env=self._env(), capture_output=True, timeout=10, check=False
        )

    def _xfreerdp_argv(self, xfreerdp: str, has_credentials: bool) -> list[str]:
        opts = self.options
        width, height = opts.size
        argv = [
            xfreerdp,
            f"/v:{opts.target}",
            f"/size:{width}x{height}",
            "/f",
            "/bpp:24",
            "/kbd:0x409",  # the US layout the bridge's Xvnc types with
            "/log-level:WARN",
            f"/timeout:{int(opts.connect_timeout * 1000)}",
        ]
        if opts.paste_text:  # the clipboard carries what the keyboard cannot type
            argv += ["+clipboard", f"/log-filters:{CLIPRDR_LOG_TAG}:DEBUG"]
        else:
            argv.append("-clipboard")
        if self.probe is not None and self.probe.fingerprint:
            argv.append(f"/cert:deny,fingerprint:sha256:{colon_hex(self.probe.fingerprint)}")
        else:
            argv.append("/cert:deny")
        # Nothing about this machine: FreeRDP sends the local account's name when no user is
        # given (the server pre-fills its login screen with it) and the host name always.
        argv.append("/client-hostname:vnc-use")
        argv.append(f"/u:{opts.username or ''}")
        if opts.domain:
            argv.append(f"/d:{opts.domain}")
        if has_credentials:
            argv.append("/from-stdin:force")  # the password: on stdin, never in argv
        else:
            argv.append("-sec-nla")
        stdbuf = shutil.which("stdbuf")
        return [stdbuf, "-oL", "-eL", *argv] if stdbuf else argv

    def _start_xfreerdp(self, xfreerdp: str, has_credentials: bool) -> None:
        argv = self._xfreerdp_argv(xfreerdp, has_credentials)
        if self.detached and self._xvnc is not None:  # the session's end stops Xvnc too
            script = f'"$@"; s=$?; kill -TERM {self._xvnc.pid} 2>/dev/null; exit $s'
            argv = ["/bin/sh", "-c", script, "sh", *argv]
        self._rdp = self._popen(argv, subprocess.PIPE)
        assert self._rdp.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            if has_credentials and self._password:
                self._rdp.stdin.write(self._password.encode() + b"\n")
            self._rdp.stdin.close()

    def _wait_connected(self, xwininfo: str) -> None:
        assert self._rdp is not None
        allowed = self.options.connect_timeout + self.start_timeout
        deadline = time.monotonic() + allowed
        while True:
            code = self._rdp.poll()
            if code is not None:
                raise self._failure(code)
            if self._window_shown(xwininfo):
                return
            if time.monotonic() > deadline:
                raise RdpError(
                    f"FreeRDP did not show the session of {self.options.target} within "
                    f"{allowed:g} s; see {self.log_path}"
                )
            time.sleep(0.05)

    def _window_shown(self, xwininfo: str) -> bool:
        result = subprocess.run(
            [xwininfo, "-root", "-tree"],
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        return '("xfreerdp" "xfreerdp")' in result.stdout

    def _statuses(self) -> list[str]:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return []
        return _FREERDP_STATUS.findall(text)

    def _failure(self, code: int) -> RdpError:
        """The one-line error of an ``xfreerdp`` that exited before the session showed."""
        where = f"the RDP server at {self.options.target}"
        statuses = self._statuses()
        status = statuses[0] if statuses else f"exit code {code}"
        nla = self.probe is not None and self.probe.protocol_name == "NLA"
        user = self.options.username or "?"
        if any(part in status for part in _LOGIN_REFUSED):
            return RdpAuthError(
                f"{where} refused the login of {user!r} (FreeRDP: {status}); check --rdp-user "
                "(RDP_USERNAME), --rdp-domain and RDP_PASSWORD"
            )
        if nla and "TRANSPORT_FAILED" in status:
            return RdpAuthError(
                f"{where} closed the connection during NLA authentication of {user!r} "
                f"(FreeRDP: {status}): wrong user name or password? check --rdp-user "
                "(RDP_USERNAME), --rdp-domain and RDP_PASSWORD"
            )
        if "NO_OR_MISSING_CREDENTIALS" in status:
            return RdpAuthError(
                f"{where} asks for credentials (FreeRDP: {status}): give --rdp-user "
                "(or RDP_USERNAME) and set RDP_PASSWORD"
            )
        if "TLS_CONNECT_FAILED" in status:
            return RdpCertificateError(
                f"FreeRDP refused the TLS connection to {where} (FreeRDP: {status}): its "
                f"certificate may have changed since it was checked; see {self.log_path}"
            )
        return RdpError(
            f"FreeRDP could not connect to {where} (FreeRDP: {status}, exit code {code}); "
            f"see {self.log_path}"
        )

    def _watch(self) -> None:
        """The session ended on its own: say why, and stop Xvnc so the agent sees it lost."""
        proc = self._rdp
        if proc is None:
            return
        code = proc.wait()
        if self._stopping.is_set():
            return
        statuses = [s for s in self._statuses() if s.startswith("ERRINFO_")] or self._statuses()
        status = statuses[-1] if statuses else f"exit code {code}"
        self.ended = f"the RDP session to {self.options.target} ended (FreeRDP: {status})"
        log.info("%s", self.ended)
        if self._xvnc is not None:
            stop_process(self._xvnc)
