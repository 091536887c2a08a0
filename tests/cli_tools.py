"""Running the ``vnc-use`` command line in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from vnc_use.testing.desktop import TestDesktop

__all__ = ["CLI", "run_cli"]

CLI = [sys.executable, "-m", "vnc_use.cli"]


def run_cli(
    args: list[str], desktop: TestDesktop | None = None, timeout: float = 60, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if desktop is not None:
        env["VNC_PASSWORD"] = desktop.password
    env.update(kwargs.pop("env", {}))
    return subprocess.run(
        CLI + args,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=kwargs.pop("stdin", subprocess.DEVNULL),
        **kwargs,
    )
