"""``langgraph dev`` serving the repository's ``langgraph.json``, for tests and benchmarks.

The server runs offline (no analytics, no tracing, no version probe, no browser, no reloader)
on 127.0.0.1 and an explicit port, with ``--n-jobs-per-worker`` runs at once, from a working
folder of its own (it writes ``.langgraph_api/`` there). ``env`` adds variables (the Gemini
stand-in's address, the VNC password variables the run specs name). :meth:`stop` ends the
process it started, by pid.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from vnc_use.desktops.service import Service
from vnc_use.desktops.xserver import free_port, stop_process

__all__ = ["LangGraphDev", "langgraph_json"]


def langgraph_json() -> Path:
    """The repository's ``langgraph.json`` (next to ``src/``)."""
    return Path(__file__).resolve().parents[3] / "langgraph.json"


class LangGraphDev(Service):
    """A started ``langgraph dev`` (see the module's doc); ``url`` is its address."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        jobs: int = 4,
        config: Path | None = None,
        start_timeout: float = 60.0,
    ) -> None:
        self.env = dict(env or {})
        self.jobs = jobs
        self.config = config or langgraph_json()
        self.start_timeout = start_timeout
        self.port = 0
        self.workdir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "server.log"

    def log(self) -> str:
        """What the server wrote so far."""
        try:
            return self.log_path.read_text("utf-8", errors="replace")
        except (OSError, AssertionError):
            return ""

    def start(self) -> LangGraphDev:
        self.workdir = Path(tempfile.mkdtemp(prefix="vnc-use-langgraph-"))
        self.port = free_port()
        cli = Path(sys.executable).with_name("langgraph")
        if not cli.exists():
            raise RuntimeError(
                f"{cli} is missing: install the server extra (pip install -e '.[server]')"
            )
        env = {
            **os.environ,
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LANGGRAPH_NO_VERSION_CHECK": "1",
            "LANGSMITH_TRACING": "false",
            "LOG_COLOR": "false",
            **self.env,
        }
        env.pop("LANGSMITH_API_KEY", None)
        argv = [
            str(cli),
            "dev",
            "--config",
            str(self.config),
            "--no-browser",
            "--no-reload",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n-jobs-per-worker",
            str(self.jobs),
        ]
        with open(self.log_path, "wb") as out:
            self._proc = subprocess.Popen(
                argv, cwd=self.workdir, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"langgraph dev exited at start:\n{self.log()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/ok", timeout=1.0) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        log = self.log()
        self.stop()
        raise RuntimeError(f"langgraph dev did not answer /ok:\n{log[-3000:]}")

    def stop(self) -> None:
        if self._proc is not None:
            stop_process(self._proc, timeout=10.0)
            self._proc = None
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def records(self) -> bytes:
        """Every byte the server keeps (its ``.langgraph_api/`` folder and its log), for
        scans: no secret may be among them."""
        assert self.workdir is not None
        return b"".join(p.read_bytes() for p in sorted(self.workdir.rglob("*")) if p.is_file())
