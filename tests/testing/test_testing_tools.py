"""The tools a person runs by hand from the docs (docs/desktops/vnc-servers.md,
docs/testing-offline.md): the test desktop command."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from vnc_use.desktops.vnc import VNCController
from vnc_use.errors import VncConnectionError

pytestmark = pytest.mark.desktop


def test_desktop_command_serves_a_desktop_until_stopped() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "vnc_use.testing.desktop", "--size", "800x600", "--probe"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        info: dict[str, str] = {}
        for line in proc.stdout:
            key, _, value = line.partition(":")
            info[key.strip()] = value.strip()
            if line.startswith("Press Ctrl-C"):
                break
        assert info["VNC address"].startswith("127.0.0.1::")
        with VNCController().connect(info["VNC address"], info["password"]) as vnc:
            assert vnc.screen_size() == (800, 600)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0  # a hang guard: it exits once its desktop stopped
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with pytest.raises(VncConnectionError, match=r"127\.0\.0\.1"):
        VNCController(connect_timeout=2).connect(info["VNC address"], info["password"])
