"""Start Chromium on the task's desktop showing a page, for task setups; wait for its window.

    python -m vnc_use.evaluation.browser PAGE [--geometry WxH+X+Y | --right-half] [--profile DIR]

Chromium runs windowed (never headless) on ``$DISPLAY`` in app mode (the page only: no tab
strip, no address bar, so a page's layout is where its CSS puts it), with a fresh profile in
``--profile`` (emptied first; default a new temporary folder) and its network features off.
The command returns once a window titled like the page's ``<title>`` is on the screen (exit
status 0), or fails after ``--timeout`` seconds (status 1, the reason as its exit message).
Chromium keeps running; the evaluation stops it after the task. ``--geometry`` defaults to
the whole screen.
"""

from __future__ import annotations

import argparse
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["chromium_argv", "main"]

_FLAGS = (
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-breakpad",
    "--disable-gpu",
    "--disable-features=Translate,OptimizationHints,MediaRouter",
    "--password-store=basic",
    "--force-device-scale-factor=1",
    "--disable-smooth-scrolling",  # a scroll is over when the key is
    "--test-type",  # no "unsupported command-line flag" bar over the page
)
_TITLE_RE = re.compile(r"<title>(.*?)</title>", re.S | re.I)
_GEOMETRY_RE = re.compile(r"^(\d+)x(\d+)\+(\d+)\+(\d+)$")


def chromium_argv(binary: str, page: Path, profile: Path, geometry: str) -> list[str]:
    """Chromium's command line for ``page`` at ``geometry`` (``WxH+X+Y``)."""
    match = _GEOMETRY_RE.match(geometry)
    if match is None:
        raise ValueError(f"bad geometry {geometry!r}; use WxH+X+Y")
    width, height, x, y = match.groups()
    argv = [binary, *_FLAGS, f"--user-data-dir={profile}"]
    if os.geteuid() == 0:
        argv.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    return [
        *argv,
        f"--window-position={x},{y}",
        f"--window-size={width},{height}",
        f"--app={page.resolve().as_uri()}",
    ]


def _screen_geometry(right_half: bool = False) -> str:
    out = subprocess.run(
        ["xwininfo", "-root"], capture_output=True, text=True, timeout=10, check=True
    ).stdout
    width = re.search(r"Width:\s*(\d+)", out)
    height = re.search(r"Height:\s*(\d+)", out)
    if width is None or height is None:
        raise RuntimeError("xwininfo -root did not say the screen size")
    w, h = int(width.group(1)), int(height.group(1))
    return f"{w - w // 2}x{h}+{w // 2}+0" if right_half else f"{w}x{h}+0+0"


def _window_titled(title: str) -> bool:
    out = subprocess.run(
        ["xwininfo", "-root", "-tree"], capture_output=True, text=True, timeout=10, check=False
    ).stdout
    return f'"{title}"' in out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vnc_use.evaluation.browser")
    parser.add_argument("page", type=Path)
    parser.add_argument("--geometry", default=None, metavar="WxH+X+Y")
    parser.add_argument("--right-half", action="store_true", help="the right half of the screen")
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--profile", type=Path, default=None, help="a folder for its profile")
    args = parser.parse_args(argv)
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        sys.exit("browser: chromium is not installed (apt-get install chromium)")
    match = _TITLE_RE.search(args.page.read_text("utf-8"))
    title = html.unescape(match.group(1).strip()) if match else ""
    profile = args.profile or Path(tempfile.mkdtemp(prefix="vnc-use-eval-")) / "profile"
    shutil.rmtree(profile, ignore_errors=True)
    profile.mkdir(parents=True)
    geometry = args.geometry or _screen_geometry(args.right_half)
    proc = subprocess.Popen(
        chromium_argv(binary, args.page, profile, geometry),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"browser: chromium exited with status {proc.returncode}")
        if not title or _window_titled(title):
            time.sleep(0.3)  # let the first frame paint
            return 0
        time.sleep(0.1)
    sys.exit(f"browser: no window titled {title!r} within {args.timeout:g} s")


if __name__ == "__main__":
    sys.exit(main())
