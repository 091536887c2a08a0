"""``vnc-use console``'s bad input: one line naming the problem and the fix, exit 2, before
anything listens."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from cli_tools import CLI, run_cli


def test_options_that_cannot_work_are_refused_in_one_line(tmp_path: Path) -> None:
    runs = str(tmp_path / "runs")
    cases = {
        ("--server", "http://127.0.0.1:1"): "--server needs --vnc HOST::PORT or --rdp",
        ("--server", "http://127.0.0.1:1", "--vnc", "127.0.0.1::5901", "--local"): (
            "--server needs --vnc HOST::PORT or --rdp"
        ),
        ("--server", "http://127.0.0.1:1", "--fleet", "postgresql://x@127.0.0.1/x"): (
            "takes --server or --fleet, not both"
        ),
        ("--server", "http://127.0.0.1:1", "--vnc", "127.0.0.1::5901"): (
            "cannot reach the server at http://127.0.0.1:1"
        ),
        ("--fleet", "postgresql://x@127.0.0.1/x", "--vnc", "127.0.0.1::5901"): (
            "--fleet cannot go with --vnc"
        ),
        ("--vnc", "nowhere:port"): "nowhere:port",
    }
    for extra, said in cases.items():
        done = run_cli(["console", "--runs-dir", runs, *extra], timeout=60)
        assert done.returncode == 2, (extra, done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("vnc-use: ") and said in lines[0], lines
        assert "Traceback" not in done.stderr and done.stdout == ""


def test_a_port_in_use_is_named(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = run_cli(
            ["console", "--runs-dir", str(tmp_path / "runs"), "--port", str(port)], timeout=60
        )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"vnc-use: the console cannot listen on 127.0.0.1:{port}: Address already in use"
    )


def test_another_host_is_warned_about(tmp_path: Path) -> None:
    """``--host`` other than 127.0.0.1 serves there with a warning (127.0.0.2: still this
    machine only, for the test)."""
    argv = [*CLI, "console", "--runs-dir", str(tmp_path / "runs"), "--host", "127.0.0.2"]
    proc = subprocess.Popen(
        [*argv, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        warning = proc.stderr.readline()
        url = proc.stdout.readline()
    finally:
        proc.terminate()
        proc.wait(20)
    assert warning.startswith("vnc-use: warning: the console listens on 127.0.0.2"), warning
    assert url.startswith("vnc-use console: http://127.0.0.2:"), url
