"""A throw-away PostgreSQL server for tests: Debian's ``postgresql`` package, a cluster in a
temporary folder, 127.0.0.1 and a free port only, a password login.

>>> with PostgresServer() as db:                   # doctest: +SKIP
...     print(db.url)                              # postgresql://vnc_use:...@127.0.0.1:PORT/postgres

``postgres`` refuses to run as root: under root the cluster belongs to, and the server runs as,
the system user ``postgres`` that the Debian package creates (as :mod:`vnc_use.testing.wayland`
runs sway as an unprivileged user). The server is stopped by its pid (a fast shutdown), and its
folder removed. ``python -m vnc_use.testing.postgres`` starts one until Ctrl-C.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from vnc_use.desktops.service import Service
from vnc_use.desktops.xserver import free_port

__all__ = ["PostgresServer", "PostgresServerError", "find_bin_dir"]

_INSTALL_HINT = "apt-get install postgresql (or ./scripts/install.sh)"
_SERVER_USER = "postgres"


class PostgresServerError(RuntimeError):
    """The throw-away server could not be started (missing binaries, failed initdb, ...)."""


def find_bin_dir() -> Path:
    """The newest ``/usr/lib/postgresql/<version>/bin`` that has ``initdb`` and ``postgres``."""

    def version(path: str) -> int:
        name = Path(path).parent.parent.name
        return int(name) if name.isdigit() else 0

    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=version)
    if not found:
        raise PostgresServerError(f"PostgreSQL's server binaries are missing; {_INSTALL_HINT}")
    return Path(found[-1]).parent


class PostgresServer(Service):
    """A PostgreSQL cluster in a temporary folder, for one test session.

    :attr:`url` is the ``postgresql://`` URL of its ``postgres`` database as user ``vnc_use``
    with :attr:`password` (a fresh random one: tests scan written bytes for it). ``fsync=False``
    (tests) skips syncing to disk; benchmarks that time commits keep it on.
    """

    def __init__(self, user: str = "vnc_use", *, fsync: bool = False) -> None:
        self.user = user
        self.fsync = fsync
        self.password = "pg-" + secrets.token_hex(12)
        self.port = 0
        self.tmpdir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._ids: tuple[int, int] | None = None

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/postgres"

    @property
    def data_dir(self) -> Path:
        assert self.tmpdir is not None, "not started"
        return self.tmpdir / "data"

    def start(self) -> PostgresServer:
        if self._proc is not None and self._proc.poll() is None:
            return self
        bin_dir = find_bin_dir()
        if os.geteuid() == 0:
            try:
                entry = pwd.getpwnam(_SERVER_USER)
            except KeyError:
                raise PostgresServerError(
                    f"no system user {_SERVER_USER!r} to run PostgreSQL as; {_INSTALL_HINT}"
                ) from None
            self._ids = (entry.pw_uid, entry.pw_gid)
        self.tmpdir = Path(tempfile.mkdtemp(prefix="vnc-use-postgres-"))
        try:
            self._initdb(bin_dir)
            self._start_server(bin_dir)
        except BaseException:
            self.stop()
            raise
        return self

    def _as_user(self) -> dict[str, Any]:
        if self._ids is None:
            return {}
        uid, gid = self._ids
        return {"user": uid, "group": gid, "extra_groups": []}

    def _own(self, path: Path) -> None:
        if self._ids is not None:
            os.chown(path, *self._ids)

    def _initdb(self, bin_dir: Path) -> None:
        assert self.tmpdir is not None
        os.chmod(self.tmpdir, 0o711)  # the server user reaches its own folder; nobody lists it
        self.data_dir.mkdir(mode=0o700)
        self._own(self.data_dir)
        pwfile = self.tmpdir / "pwfile"
        pwfile.write_text(self.password + "\n")
        os.chmod(pwfile, 0o600)
        self._own(pwfile)
        argv = [str(bin_dir / "initdb"), "-D", str(self.data_dir), "-U", self.user]
        argv += ["-A", "scram-sha-256", f"--pwfile={pwfile}", "--no-instructions", "-E", "UTF8"]
        result = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=self.tmpdir,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"},
            **self._as_user(),
        )
        pwfile.unlink()
        if result.returncode != 0:
            raise PostgresServerError(f"initdb failed: {result.stderr.strip()[-500:]}")

    def _start_server(self, bin_dir: Path) -> None:
        assert self.tmpdir is not None
        self.port = free_port()
        argv = [str(bin_dir / "postgres"), "-D", str(self.data_dir), "-p", str(self.port)]
        argv += ["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="]
        # PostgreSQL's default: a fleet test's two workers (DBOS's pool, each leg's sessions)
        # and eight submitters come near 50 under load
        argv += ["-c", f"fsync={'on' if self.fsync else 'off'}", "-c", "max_connections=100"]
        logfile = self.tmpdir / "server.log"  # written by this process: root may own it
        with open(logfile, "ab") as log:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.tmpdir,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"},
                start_new_session=True,
                **self._as_user(),
            )
        self._wait_ready(logfile)

    def _wait_ready(self, logfile: Path, timeout: float = 60.0) -> None:
        from vnc_use.errors import StorageError
        from vnc_use.store.postgres import connect

        deadline = time.monotonic() + timeout
        while True:
            assert self._proc is not None
            if self._proc.poll() is not None:
                tail = logfile.read_text("utf-8", "replace")[-800:]
                raise PostgresServerError(f"postgres exited ({self._proc.returncode}): {tail}")
            try:
                connect(self.url).close()
                return
            except StorageError:
                if time.monotonic() > deadline:
                    raise PostgresServerError(
                        f"postgres did not accept connections on port {self.port} in {timeout:g} s"
                    ) from None
                time.sleep(0.1)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # fast shutdown: ends the sessions, then exits
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None


def main() -> int:
    """Start a server, print its URL, wait for Ctrl-C."""
    with PostgresServer() as db:
        print(f"url: {db.url}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
