"""xrdp on 127.0.0.1 with a throw-away user whose session runs a program: a real RDP server
for tests, the one Linux desktops use (Debian's ``xrdp`` + ``xorgxrdp``).

>>> with XrdpServer(["/usr/bin/python3", "probe.py"]) as xrdp:  # doctest: +SKIP
...     print(xrdp.address, xrdp.user, xrdp.password)   # "127.0.0.1:PORT", for --rdp

What it does (as root: xrdp, xrdp-sesman and the user need it):

* creates the user (``useradd --create-home``, a random password set with ``chpasswd``) when
  it starts and removes it with its home (``userdel --remove``) when it stops: nothing stays
  on the machine, and a developer's machine never gains a standing account with a known
  password. The name is unique per server (``vnc-use-xrdp-<random>``).
* writes private ``xrdp.ini`` / ``sesman.ini`` into a temp folder: xrdp listens on
  127.0.0.1 on a free port only (the packaged config listens on every interface, port 3389),
  sesman on 127.0.0.1 (port 3350, which xrdp 0.9 asks sesman on), a throw-away TLS
  certificate, no NLA (xrdp 0.9 has none): the login is checked by xrdp's own login screen.
* the session is Xorg with xorgxrdp, started by sesman as the user; the user's
  ``~/startwm.sh`` (sesman's ``UserWindowManager``) ``exec``-s ``session_argv``. The session
  runs as that user, so the program must be one it can run (the system ``python3``, a copy of
  a script in its home: see :meth:`XrdpServer.install_file`).

Stop kills every process of the throw-away user (the session) by PID, then sesman and xrdp.
Packages: ``xrdp``, ``xorgxrdp``.
"""

from __future__ import annotations

import configparser
import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from vnc_use.desktops.service import Service
from vnc_use.desktops.xserver import free_port, port_open, stop_process

__all__ = ["SESMAN_PORT", "XrdpError", "XrdpServer"]

_INSTALL_HINT = "apt-get install xrdp xorgxrdp"


def _sesman_port() -> int:
    """The port xrdp 0.9 connects to sesman on: ``ListenPort`` of the *system's*
    ``/etc/xrdp/sesman.ini`` (a path compiled into xrdp), 3350 by default."""
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    with contextlib.suppress(OSError, configparser.Error):
        parser.read("/etc/xrdp/sesman.ini")
    value = parser.get("Globals", "ListenPort", fallback="3350").strip()
    return int(value) if value.isdigit() else 3350


SESMAN_PORT = _sesman_port()
"""The port xrdp connects to sesman on (our private sesman listens there)."""

_XRDP_INI = """\
[Globals]
ini_version=1
fork=true
port=tcp://127.0.0.1:{port}
use_vsock=false
tcp_nodelay=true
tcp_keepalive=true
security_layer=negotiate
crypt_level=high
certificate={cert}
key_file={key}
ssl_protocols=TLSv1.2, TLSv1.3
autorun=Xorg
allow_channels=true
allow_multimon=false
bitmap_cache=true
bitmap_compression=true
bulk_compression=true
max_bpp=24
new_cursors=true
use_fastpath=both

[Logging]
LogFile={folder}/xrdp.log
LogLevel={log_level}
EnableSyslog=false

[Channels]
rdpdr=false
rdpsnd=false
drdynvc=false
cliprdr=true
rail=false
xrdpvr=false
tcutils=false

[Xorg]
name=Xorg
lib=libxup.so
username=ask
password=ask
ip=127.0.0.1
port=-1
code=20
"""

_SESMAN_INI = """\
[Globals]
ListenAddress=127.0.0.1
ListenPort={sesman_port}
EnableUserWindowManager=true
UserWindowManager=startwm.sh
DefaultWindowManager=startwm.sh
ReconnectScript=reconnectwm.sh

[Security]
AllowRootLogin=false
MaxLoginRetry=4
AlwaysGroupCheck=false
RestrictOutboundClipboard=none
RestrictInboundClipboard=none

[Sessions]
X11DisplayOffset=40
MaxSessions=10
KillDisconnected=false
DisconnectedTimeLimit=0
IdleTimeLimit=0
Policy=Default

[Logging]
LogFile={folder}/sesman.log
LogLevel=INFO
EnableSyslog=false

[Xorg]
param=/usr/lib/xorg/Xorg
param=-config
param=xrdp/xorg.conf
param=-noreset
param=-nolisten
param=tcp
param=-logfile
param=.xorgxrdp.%s.log

[Chansrv]
FuseMountName=thinclient_drives
FileUmask=077
EnableFuseMount=false

[ChansrvLogging]
LogLevel=INFO
EnableSyslog=false

[SessionVariables]
"""


class XrdpError(RuntimeError):
    """xrdp could not be started (missing package, not root, a process exited)."""


def _run(argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


class XrdpServer(Service):
    """xrdp + xrdp-sesman on 127.0.0.1:``port`` with a throw-away user (see the module)."""

    def __init__(
        self,
        session_argv: list[str],
        *,
        port: int | None = None,
        start_timeout: float = 15.0,
        log_level: str = "DEBUG",
    ) -> None:
        self.session_argv = session_argv
        self.log_level = log_level
        self.port = port or 0
        self.start_timeout = start_timeout
        self.user = f"vnc-use-xrdp-{secrets.token_hex(3)}"
        self.password = "Xr-" + secrets.token_urlsafe(12)
        self.tmpdir: Path | None = None
        self.home: Path | None = None
        self._uid = -1
        self._sesman: subprocess.Popen[bytes] | None = None
        self._xrdp: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``, as ``--rdp`` takes it."""
        return f"127.0.0.1:{self.port}"

    @property
    def cert_path(self) -> Path:
        """The server's TLS certificate (PEM)."""
        assert self.tmpdir is not None
        return self.tmpdir / "cert.pem"

    @property
    def xrdp_log(self) -> Path:
        """xrdp's log (at ``log_level``: DEBUG names the user name each client supplied)."""
        assert self.tmpdir is not None
        return self.tmpdir / "xrdp.log"

    def log_text(self) -> str:
        """xrdp's and sesman's logs (for failure messages)."""
        if self.tmpdir is None:
            return ""
        parts = []
        for name in ("xrdp.log", "sesman.log", "xrdp.out", "sesman.out"):
            path = self.tmpdir / name
            if path.exists():
                parts.append(f"== {name}\n{path.read_text(errors='replace')}")
        return "\n".join(parts)

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> XrdpServer:
        """Create the user, write the config, start sesman and xrdp, wait for the port."""
        programs = self._programs()
        if os.geteuid() != 0:
            raise XrdpError("XrdpServer needs root (it creates a user and runs sesman)")
        if _sesman_listening():
            raise XrdpError(
                f"port {SESMAN_PORT} (sesman) is taken: is the system's xrdp-sesman running? "
                "stop it (service xrdp stop) for the tests"
            )
        self.tmpdir = Path(tempfile.mkdtemp(prefix="vnc-use-xrdp-"))
        self.tmpdir.chmod(0o755)
        self.port = self.port or free_port()
        try:
            self._create_user()
            self._write_config()
            self._sockdir()
            self._sesman = self._popen(
                [
                    programs["xrdp-sesman"],
                    "--nodaemon",
                    "--config",
                    str(self.tmpdir / "sesman.ini"),
                ],
                "sesman.out",
            )
            self._wait(_sesman_listening, self._sesman, "xrdp-sesman")
            self._xrdp = self._popen(
                [programs["xrdp"], "--nodaemon", "--config", str(self.tmpdir / "xrdp.ini")],
                "xrdp.out",
            )
            self._wait(lambda: port_open(self.port), self._xrdp, "xrdp")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the session's processes, sesman and xrdp; remove the user and the folder."""
        self._kill_user_processes()
        for proc in (self._xrdp, self._sesman):
            if proc is not None:
                stop_process(proc)
        self._xrdp = self._sesman = None
        self._kill_user_processes()
        self._unmount_home()
        if self._uid >= 0:
            _run(["userdel", "--remove", "--force", self.user])
            self._uid = -1
        if self.home is not None and self.home.name == self.user:  # userdel may leave it
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None

    def install_file(self, source: Path, name: str) -> Path:
        """Copy ``source`` into the user's home as ``name`` (readable by the user)."""
        assert self.home is not None
        target = self.home / name
        shutil.copyfile(source, target)
        os.chown(target, self._uid, self._uid_gid())
        target.chmod(0o644)
        return target

    def session_run(self, argv: list[str], stdin: str | None = None) -> str:
        """Run ``argv`` as the user in the session's X display (once it started); its output."""
        display_file = self.user_path("display")
        deadline = time.monotonic() + self.start_timeout
        while not display_file.exists() or display_file.read_text().count("\n") < 2:
            if time.monotonic() > deadline:
                raise XrdpError("no session has started (nobody logged in?)")
            time.sleep(0.05)
        display, xauthority = display_file.read_text().splitlines()[:2]
        env = [f"DISPLAY={display}", f"XAUTHORITY={xauthority}", "PATH=/usr/bin:/bin"]
        result = subprocess.run(
            ["runuser", "-u", self.user, "--", "env", "-i", *env, *argv],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        )
        if result.returncode != 0:
            raise XrdpError(f"{argv[0]} in the session failed: {result.stderr.strip()}")
        return result.stdout

    def set_clipboard(self, text: str) -> None:
        """Put ``text`` on the session's clipboard (an ``xclip`` of the user holds it)."""
        self.session_run(["sh", "-c", "xclip -selection clipboard -i >/dev/null 2>&1"], stdin=text)

    def clipboard(self) -> str:
        """The session's clipboard, as text."""
        return self.session_run(["xclip", "-selection", "clipboard", "-o", "-t", "UTF8_STRING"])

    def set_caps_lock(self, on: bool) -> None:
        """Lock (or unlock) Caps Lock in the session's X server, from inside the session (as
        a person at that desktop would), with no key event through RDP."""
        script = (
            "import ctypes; x = ctypes.CDLL('libX11.so.6'); "
            "x.XOpenDisplay.restype = ctypes.c_void_p; d = ctypes.c_void_p(x.XOpenDisplay(None)); "
            f"x.XkbLockModifiers(d, 0x100, 2, {2 if on else 0}); x.XSync(d, 0)"
        )
        self.session_run(["/usr/bin/python3", "-c", script])

    def user_path(self, name: str) -> Path:
        """A path in the user's home (for files the session writes, e.g. an event log)."""
        assert self.home is not None
        return self.home / name

    # -- steps ----------------------------------------------------------------------------
    @staticmethod
    def _programs() -> dict[str, str]:
        found = {name: shutil.which(name) for name in ("xrdp", "xrdp-sesman")}
        missing = [name for name, path in found.items() if path is None]
        if missing or not Path("/usr/lib/xorg/modules/libxorgxrdp.so").exists():
            raise XrdpError(f"xrdp or xorgxrdp is not installed; install them: {_INSTALL_HINT}")
        return {name: str(path) for name, path in found.items()}

    def _uid_gid(self) -> int:
        return pwd.getpwnam(self.user).pw_gid

    def _create_user(self) -> None:
        result = _run(["useradd", "--create-home", "--user-group", "--shell", "/bin/sh", self.user])
        if result.returncode != 0:
            raise XrdpError(f"could not create the user {self.user}: {result.stderr.strip()}")
        entry = pwd.getpwnam(self.user)
        self._uid, self.home = entry.pw_uid, Path(entry.pw_dir)
        result = _run(["chpasswd"], stdin=f"{self.user}:{self.password}\n")
        if result.returncode != 0:
            raise XrdpError(f"could not set the password of {self.user}: {result.stderr.strip()}")
        argv = " ".join(_shell_quote(a) for a in self.session_argv)
        startwm = self.home / "startwm.sh"
        startwm.write_text(
            "#!/bin/sh\n"
            'printf "%s\\n%s\\n" "$DISPLAY" "${XAUTHORITY:-$HOME/.Xauthority}" > "$HOME/display"\n'
            f'exec {argv} > "$HOME/session.log" 2>&1\n'
        )
        os.chown(startwm, entry.pw_uid, entry.pw_gid)
        startwm.chmod(0o755)

    def _write_config(self) -> None:
        from vnc_use.testing.wayland import make_test_certificates

        assert self.tmpdir is not None
        _ca, cert, key = make_test_certificates(self.tmpdir / "certs")
        shutil.copyfile(cert, self.cert_path)
        shutil.copyfile(key, self.tmpdir / "key.pem")
        (self.tmpdir / "key.pem").chmod(0o600)
        folder = str(self.tmpdir)
        (self.tmpdir / "xrdp.ini").write_text(
            _XRDP_INI.format(
                port=self.port,
                cert=self.cert_path,
                key=self.tmpdir / "key.pem",
                folder=folder,
                log_level=self.log_level,
            )
        )
        (self.tmpdir / "sesman.ini").write_text(
            _SESMAN_INI.format(sesman_port=SESMAN_PORT, folder=folder)
        )

    @staticmethod
    def _sockdir() -> None:
        """What Debian's ``socksetup`` does: xrdp's socket folder, writable by sessions."""
        sockdir = Path("/run/xrdp/sockdir")
        sockdir.mkdir(parents=True, exist_ok=True)
        sockdir.chmod(0o3777)

    def _popen(self, argv: list[str], log_name: str) -> subprocess.Popen[bytes]:
        assert self.tmpdir is not None
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
        with open(self.tmpdir / log_name, "ab") as out:
            return subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.tmpdir,
            )

    def _wait(self, ready: object, proc: subprocess.Popen[bytes], name: str) -> None:
        assert callable(ready)
        deadline = time.monotonic() + self.start_timeout
        while not ready():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise XrdpError(f"{name} did not start:\n{self.log_text()[-2000:]}")
            time.sleep(0.05)

    def _unmount_home(self) -> None:
        """Unmount what the session left mounted in the home (chansrv's FUSE folder, should
        a config turn it on): userdel cannot remove a home with a stale mount in it."""
        if self.home is None:
            return
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) > 1 and parts[1].startswith(f"{self.home}/"):
                _run(["umount", "-l", parts[1]])

    def _kill_user_processes(self) -> None:
        """End every process of the throw-away user (its session) by PID: SIGTERM (Xorg
        removes its lock file and socket), SIGKILL after 3 s; then remove what a killed
        Xorg of the user left in /tmp."""
        if self._uid < 0:
            return
        deadline = time.monotonic() + 3.0
        sig = signal.SIGTERM
        while pids := _pids_of(self._uid):
            if time.monotonic() > deadline:
                sig = signal.SIGKILL
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            time.sleep(0.05)
        for leftover in [*Path("/tmp").glob(".X*-lock"), *Path("/tmp/.X11-unix").glob("X*")]:
            with contextlib.suppress(OSError):
                if leftover.lstat().st_uid == self._uid:
                    leftover.unlink()


def _sesman_listening() -> bool:
    """Whether sesman's port accepts connections (xrdp 0.9's sesman binds ``::1`` for the
    127.0.0.1 of its config)."""
    for host in ("::1", "127.0.0.1"):
        try:
            with socket.create_connection((host, SESMAN_PORT), timeout=0.5):
                return True
        except OSError:
            continue
    return False


def _pids_of(uid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _shell_quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)
