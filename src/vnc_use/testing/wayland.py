"""A real Wayland desktop behind wayvnc: headless sway, a terminal, wayvnc with or without auth.

wayvnc is how people share a wlroots desktop (sway, Hyprland, labwc). With ``enable_auth``
it offers only VeNCrypt (type 19) with the X509Plain subtype (262): the user name and
password travel inside TLS, and the client must trust the server's certificate. This module
starts that set-up for tests on 127.0.0.1:

>>> with WaylandDesktop(auth=True) as desk:                            # doctest: +SKIP
...     typed = desk.start_typing_terminal()
...     print(desk.server, desk.username, desk.ca_file)

* sway runs headless (``WLR_BACKENDS=headless``, ``WLR_RENDERER=pixman``, no GPU, no seat)
  as an unprivileged user: sway refuses to run as root, so under root the desktop runs as
  the system user :data:`DESKTOP_USER` (created with ``useradd --system`` when missing),
  with its own ``XDG_RUNTIME_DIR``.
* :meth:`WaylandDesktop.start_typing_terminal` opens ``foot`` running a shell loop that
  appends each line typed into it to a file: what a VNC client typed can be read back
  exactly with :meth:`WaylandDesktop.typed_lines`.
* With ``auth=True`` a throw-away certificate authority and server certificate (for
  ``localhost`` and ``127.0.0.1``) are made with ``cryptography``; :attr:`ca_file` is what a
  client passes to trust it.

Every process is started here and stopped by its PID. ``python -m vnc_use.testing.wayland``
starts one by hand.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import json
import logging
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vnc_use.desktops.service import Service
from vnc_use.desktops.xserver import free_port, stop_process

__all__ = ["DESKTOP_USER", "WaylandDesktop", "WaylandDesktopError", "make_test_certificates"]

log = logging.getLogger(__name__)

#: The unprivileged system user the desktop runs as when the tests run as root.
DESKTOP_USER = "vnc-use-test"

_INSTALL_HINT = "apt-get install sway wayvnc foot fonts-dejavu-core (or ./scripts/install.sh)"

_TYPER = """\
#!/bin/sh
# Append every line typed into this terminal to the file given as $1.
printf 'ready\\n' >> "$1.ready"
while IFS= read -r line; do printf '%s\\n' "$line" >> "$1"; done
"""


class WaylandDesktopError(RuntimeError):
    """The Wayland desktop could not be started (missing program, a process exited, ...)."""


def make_test_certificates(directory: Path, *, days: int = 7) -> tuple[Path, Path, Path]:
    """A throw-away CA and a server certificate it signed, for ``localhost`` and 127.0.0.1.

    Returns ``(ca_file, certificate_file, private_key_file)`` (PEM). The CA file is what a
    client trusts; the server presents the certificate and holds the key.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "vnc-use test CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    ca_file, cert_file, key_file = (
        directory / "ca.pem",
        directory / "cert.pem",
        directory / "key.pem",
    )
    ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.touch(mode=0o600)
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return ca_file, cert_file, key_file


def _greets_as_rfb(port: int) -> bool:
    """Whether a VNC server answers on 127.0.0.1:``port`` (not just any listener)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            return sock.recv(12).startswith(b"RFB ")
    except OSError:
        return False


def _ensure_user(name: str) -> pwd.struct_passwd:
    """The system user ``name``, created (no home, no login shell) when it does not exist."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    result = subprocess.run(
        [
            *(useradd, "--system", "--user-group", "--no-create-home"),
            *("--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if result.returncode not in (0, 9):  # 9: created meanwhile by another process
        raise WaylandDesktopError(
            f"could not create the system user {name} for sway: {result.stderr.strip()}"
        )
    return pwd.getpwnam(name)


class WaylandDesktop(Service):
    """Headless sway with wayvnc on 127.0.0.1, optionally with wayvnc's user/password auth.

    ``auth=True`` writes ``enable_auth=true``, :attr:`username`, :attr:`password` and a
    throw-away certificate into wayvnc's config; :attr:`ca_file` is the CA that signed it.
    ``scale`` is the output scale (2 for a HiDPI desktop). Use it as a context manager.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        width: int = 1280,
        height: int = 800,
        *,
        auth: bool = False,
        username: str = "vnc-use",
        password: str | None = None,
        scale: int = 1,
        start_timeout: float = 20.0,
    ) -> None:
        self.size = (int(width), int(height))
        self.scale = scale
        self.auth = auth
        self.username = username
        self.password = password if password is not None else secrets.token_urlsafe(12)[:14]
        self.start_timeout = start_timeout
        self.port = 0
        self.tmpdir: Path | None = None
        self.ca_file: Path | None = None
        self._uid = os.geteuid()
        self._gid = os.getegid()
        self._sway: subprocess.Popen[bytes] | None = None
        self._wayvnc: subprocess.Popen[bytes] | None = None
        self._clients: list[subprocess.Popen[bytes]] = []
        self._wayland_display = ""

    # ------------------------------------------------------------------ properties

    @property
    def server(self) -> str:
        """The VNC address, ``"127.0.0.1::PORT"``."""
        return f"127.0.0.1::{self.port}"

    @property
    def runtime_dir(self) -> Path:
        """The desktop user's ``XDG_RUNTIME_DIR`` (sway's and wayvnc's sockets)."""
        return self._dir / "run"

    @property
    def _dir(self) -> Path:
        if self.tmpdir is None:
            raise WaylandDesktopError("the Wayland desktop is not started")
        return self.tmpdir

    @property
    def env(self) -> dict[str, str]:
        """The environment the desktop's programs run with (no DISPLAY, our own runtime dir)."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self._dir / "home"),
            "XDG_RUNTIME_DIR": str(self.runtime_dir),
            "LANG": "C.UTF-8",
        }
        if self._wayland_display:
            env["WAYLAND_DISPLAY"] = self._wayland_display
        return env

    def running(self) -> bool:
        """Whether sway and wayvnc are both alive."""
        return all(p is not None and p.poll() is None for p in (self._sway, self._wayvnc))

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> WaylandDesktop:
        """Start sway, wait for its Wayland socket, start wayvnc and wait for its port."""
        if self.running():
            return self
        missing = [name for name in ("sway", "wayvnc", "foot") if shutil.which(name) is None]
        if missing:
            raise WaylandDesktopError(f"{', '.join(missing)} not found; install: {_INSTALL_HINT}")
        if self._uid == 0:
            user = _ensure_user(DESKTOP_USER)
            self._uid, self._gid = user.pw_uid, user.pw_gid
        self.tmpdir = Path(tempfile.mkdtemp(prefix="vnc-use-wayland-"))
        try:
            self._prepare_files()
            self._start_sway()
            self._start_wayvnc()
        except BaseException:
            self.stop()
            raise
        log.info("wayland desktop on %s (auth %s)", self.server, "on" if self.auth else "off")
        return self

    def _own(self, path: Path, mode: int) -> None:
        os.chmod(path, mode)
        if os.geteuid() == 0:
            os.chown(path, self._uid, self._gid)

    def _prepare_files(self) -> None:
        root = self._dir
        self._own(root, 0o711)  # the desktop user reaches its own files; nobody lists them
        for sub in ("run", "home"):
            (root / sub).mkdir()
            self._own(root / sub, 0o700)
        width, height = self.size
        sway_config = root / "sway.config"
        sway_config.write_text(
            f"output HEADLESS-1 resolution {width}x{height} scale {self.scale}\n"
            "xwayland disable\n"
            "default_border none\n"
            "focus_follows_mouse no\n"
        )
        self._own(sway_config, 0o644)
        lines = ["address=127.0.0.1"]  # the port is given on the command line (retries)
        if self.auth:
            certs = root / "certs"
            self.ca_file, cert_file, key_file = make_test_certificates(certs)
            self._own(certs, 0o755)
            for path in (self.ca_file, cert_file):
                self._own(path, 0o644)
            self._own(key_file, 0o600)
            lines += [
                "enable_auth=true",
                f"username={self.username}",
                f"password={self.password}",
                f"private_key_file={key_file}",
                f"certificate_file={cert_file}",
            ]
        wayvnc_config = root / "wayvnc.config"
        wayvnc_config.touch(mode=0o600)
        wayvnc_config.write_text("\n".join(lines) + "\n")
        self._own(wayvnc_config, 0o600)
        typer = root / "typer.sh"
        typer.write_text(_TYPER)
        self._own(typer, 0o755)

    def _popen(self, argv: list[str], name: str, **env: str) -> subprocess.Popen[bytes]:
        """Start ``argv`` as the desktop user, its output in ``NAME.log`` in the temp folder."""
        options: dict[str, Any] = {}
        if os.geteuid() == 0 and self._uid != 0:
            options = {"user": self._uid, "group": self._gid, "extra_groups": []}
        with open(self._dir / f"{name}.log", "ab") as logfile:
            return subprocess.Popen(
                argv,
                env={**self.env, **env},
                cwd=self._dir / "home",
                stdin=subprocess.DEVNULL,
                stdout=logfile,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                **options,
            )

    def _wait(
        self, what: str, ready: Callable[[], bool], procs: dict[str, subprocess.Popen[bytes]]
    ) -> None:
        """Poll ``ready`` until it holds; fail at once when one of ``procs`` exits."""
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            for name, proc in procs.items():
                if proc.poll() is not None:
                    raise WaylandDesktopError(
                        f"{name.split('-')[0]} exited with code {proc.returncode} before "
                        f"{what}: {self._log_tail(name)}"
                    )
            if ready():
                return
            time.sleep(0.02)
        raise WaylandDesktopError(f"{what} did not happen within {self.start_timeout:g} s")

    def _log_tail(self, name: str) -> str:
        try:
            lines = (self._dir / f"{name}.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return lines[-1] if lines else "(empty log)"

    def _start_sway(self) -> None:
        self._sway = self._popen(
            ["sway", "-c", str(self._dir / "sway.config")],
            "sway",
            WLR_BACKENDS="headless",
            WLR_LIBINPUT_NO_DEVICES="1",
            WLR_RENDERER="pixman",
        )

        def socket_ready() -> bool:
            for path in self.runtime_dir.glob("wayland-*"):
                if not path.name.endswith(".lock") and path.is_socket():
                    self._wayland_display = path.name
                    return True
            return False

        self._wait("sway opened its Wayland socket", socket_ready, {"sway": self._sway})

    def _start_wayvnc(self, attempts: int = 4) -> None:
        """Start wayvnc on a free port; another port when one was taken meanwhile."""
        assert self._sway is not None
        for attempt in range(attempts):
            self.port = free_port()
            self._wayvnc = self._popen(
                ["wayvnc", "-C", str(self._dir / "wayvnc.config"), "127.0.0.1", str(self.port)],
                "wayvnc",
            )
            try:
                self._wait(
                    f"wayvnc listened on {self.server}",
                    lambda: _greets_as_rfb(self.port),
                    {"sway": self._sway, "wayvnc": self._wayvnc},
                )
                if self._wayvnc.poll() is None:
                    return
                raise WaylandDesktopError(f"wayvnc exited: {self._log_tail('wayvnc')}")
            except WaylandDesktopError:
                if self._wayvnc.poll() is None or self._sway.poll() is not None:
                    raise
                if attempt == attempts - 1:
                    raise
                log.debug("wayvnc exited on port %d; trying another port", self.port)

    def swaymsg(self, *args: str) -> Any:
        """Run ``swaymsg -r ARGS`` against this sway and return its JSON answer."""
        sockets = list(self.runtime_dir.glob("sway-ipc.*.sock"))
        if not sockets:
            raise WaylandDesktopError("sway's IPC socket is missing")
        result = subprocess.run(
            ["swaymsg", "-s", str(sockets[0]), "-r", *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        if result.returncode != 0:
            raise WaylandDesktopError(f"swaymsg {' '.join(args)} failed: {result.stderr.strip()}")
        return json.loads(result.stdout)

    def _focused_app(self) -> str | None:
        def walk(node: dict[str, Any]) -> str | None:
            if node.get("focused") and node.get("app_id"):
                return str(node["app_id"])
            for child in node.get("nodes", []) + node.get("floating_nodes", []):
                found = walk(child)
                if found:
                    return found
            return None

        tree: dict[str, Any] = self.swaymsg("-t", "get_tree")
        return walk(tree)

    def start_typing_terminal(self) -> Path:
        """Open ``foot`` (focused) running a loop that appends each typed line to a file.

        Returns that file; :meth:`typed_lines` reads it. Waits until the terminal has the
        keyboard focus and its shell is reading.
        """
        if not self.running():
            raise WaylandDesktopError("start the Wayland desktop before opening a terminal")
        typed = self._dir / "home" / "typed.txt"
        name = f"foot-{len(self._clients)}"
        typer = ["/bin/sh", str(self._dir / "typer.sh"), str(typed)]
        proc = self._popen(["foot", "--app-id", "vnc-use-typer", *typer], name)
        self._clients.append(proc)
        ready = Path(f"{typed}.ready")
        self._wait(
            "the terminal took the focus",
            lambda: ready.exists() and self._focused_app() == "vnc-use-typer",
            {name: proc},
        )
        return typed

    def typed_lines(self) -> list[str]:
        """The lines typed into the terminal so far (complete lines only)."""
        path = self._dir / "home" / "typed.txt"
        try:
            return path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []

    def wait_typed(self, count: int = 1, timeout: float = 15.0) -> list[str]:
        """Wait until ``count`` lines were typed into the terminal; returns all lines."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = self.typed_lines()
            if len(lines) >= count:
                return lines
            time.sleep(0.05)
        raise TimeoutError(f"{count} line(s) not typed within {timeout:g} s: {self.typed_lines()}")

    def stop(self) -> None:
        """Stop the terminal(s), wayvnc and sway by PID, then remove the temp folder."""
        for proc in reversed(self._clients):
            stop_process(proc)
        self._clients.clear()
        for attr in ("_wayvnc", "_sway"):
            proc = getattr(self, attr)
            if proc is not None:
                stop_process(proc)
                setattr(self, attr, None)
        self._wayland_display = ""
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None


def main(argv: list[str] | None = None) -> int:
    """Start a headless sway + wayvnc desktop for a person and wait until Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog="python -m vnc_use.testing.wayland",
        description="Start headless sway with wayvnc on 127.0.0.1 and keep it up until Ctrl-C.",
    )
    parser.add_argument("--size", default="1280x800", help="WIDTHxHEIGHT (default 1280x800)")
    parser.add_argument("--scale", type=int, default=1, help="output scale (2: HiDPI)")
    parser.add_argument("--auth", action="store_true", help="wayvnc with user, password, TLS")
    parser.add_argument("--terminal", action="store_true", help="open the typing terminal")
    args = parser.parse_args(argv)
    try:
        width, height = (int(v) for v in args.size.lower().split("x"))
    except ValueError:
        parser.error(f"bad --size {args.size!r}; use WIDTHxHEIGHT, e.g. 1280x800")
    desktop = WaylandDesktop(width, height, auth=args.auth, scale=args.scale)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        desktop.start()
        print(f"VNC address: {desktop.server}")
        if args.auth:
            print(f"user:        {desktop.username}")
            print(f"password:    {desktop.password}")
            print(f"CA file:     {desktop.ca_file}")
        if args.terminal:
            print(f"typed lines: {desktop.start_typing_terminal()}")
        print("Press Ctrl-C to stop.", flush=True)
        while desktop.running():
            time.sleep(0.5)
        print("sway or wayvnc exited", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    except WaylandDesktopError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        desktop.stop()


if __name__ == "__main__":
    sys.exit(main())
