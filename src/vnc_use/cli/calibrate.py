"""``vnc-use calibrate``: check in about a minute that a model clicks where it means.

It shows the calibration window (:mod:`vnc_use.calibration.window`) on the desktop -- the
local desktop by default (started when needed), or ``--vnc ADDR`` for a desktop served from
this machine, the window then opening on the X display in ``DISPLAY`` -- writes the targets to
``calibration.json`` in a new run folder, asks the model to click each target by its label,
prints each target's error, the mean and worst error and the verdict, and exits 0 when the
mean error is within the targets' size, else 1.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from vnc_use import config
from vnc_use.cli import desktop as desktop_commands
from vnc_use.cli.common import EXIT_DONE, EXIT_ERROR, add_runs_dir
from vnc_use.errors import ConfigError, VncUseError

__all__ = ["command", "register"]

READY_TIMEOUT_S = 20.0
"""Seconds the calibration window may take to show."""


def register(sub: Any) -> None:
    """Add ``calibrate`` to the sub-command parsers."""
    p = sub.add_parser(
        "calibrate",
        help="check that a model clicks where it means (a dozen labelled targets)",
        description="Show a dozen labelled targets, ask the model to click each, and report "
        "the pixel errors and a verdict: fine / off by a scale / off by an offset / not "
        "clicking. Exit 0 when the mean error is within the targets' size, else 1.",
    )
    p.add_argument(
        "--provider",
        default=None,
        metavar="NAME",
        help="gemini (default), anthropic, openai or openai-compatible",
    )
    p.add_argument("--model", default=None, help="the model id")
    p.add_argument(
        "--base-url", default=None, metavar="URL", help="openai-compatible: the server's address"
    )
    p.add_argument(
        "--dialect",
        default=None,
        metavar="NAME",
        help="openai-compatible: the dialect to check (default: from the model id)",
    )
    p.add_argument(
        "--vnc",
        default=None,
        metavar="HOST::PORT",
        help="a VNC desktop served from this machine; the window opens on $DISPLAY "
        "(default: the local desktop, started when needed)",
    )
    p.add_argument(
        "--connect-timeout", type=float, default=5.0, metavar="S", help="VNC connect timeout"
    )
    add_runs_dir(p)
    p.set_defaults(func=command)


def _target(args: argparse.Namespace) -> tuple[str, str | None, str]:
    """(VNC address, password, X display) of the desktop to calibrate on."""
    if args.vnc:
        display = config.x_display() or ""
        if not display:
            raise ConfigError(
                "--vnc needs DISPLAY set to the X display that VNC server shows (e.g. "
                "DISPLAY=:1), so the calibration window opens there"
            )
        password = desktop_commands.managed_password(args.vnc) or config.vnc_password()
        return args.vnc, password, display
    from vnc_use.desktops.local import LocalDesktop

    desk = LocalDesktop()
    state, _ = desk.up()
    return state.server, desk.credentials().password, state.display


@contextmanager
def _window(layout_file: Path, display: str) -> Iterator[dict[str, Any]]:
    """The calibration window on ``display`` while the block runs; yields its ready record."""
    ready = layout_file.with_name("window-ready.json")
    env = config.environment_with(DISPLAY=display)
    argv = [sys.executable, "-m", "vnc_use.calibration.window"]
    argv += ["--layout", str(layout_file), "--ready", str(ready)]
    log = (layout_file.parent / "window.log").open("wb")
    process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not ready.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise VncUseError(
                    f"the calibration window did not open on DISPLAY={display} (see "
                    f"{layout_file.parent / 'window.log'}); check DISPLAY and that python3-tk "
                    "is installed"
                )
            time.sleep(0.05)
        yield json.loads(ready.read_text("utf-8"))
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _run_dir(runs_dir: str) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Path(runs_dir) / f"calibrate-{stamp}-{uuid.uuid4().hex[:6]}"


def command(args: argparse.Namespace) -> int:
    """Run one calibration; print the report; exit 0 when fine, else 1."""
    from vnc_use.calibration.report import report_lines
    from vnc_use.calibration.session import Calibration
    from vnc_use.calibration.shot import wait_for_window
    from vnc_use.desktops.vnc import VNCController
    from vnc_use.providers.registry import make_planner

    planner = make_planner(
        args.provider, model=args.model, base_url=args.base_url, dialect=args.dialect
    )
    server, password, display = _target(args)
    controller = VNCController(connect_timeout=args.connect_timeout).connect(server, password)
    try:
        settings = _settings(args, planner)
        calibration = Calibration(planner, controller, _run_dir(args.runs_dir), settings)
        layout_file = calibration.write_targets()
        print(f"vnc-use: calibrating {settings['model']} on {server} ({layout_file.parent})")
        with _window(layout_file, display) as shown:
            if (shown["width"], shown["height"]) != calibration.screen:
                raise ConfigError(
                    f"the window opened on DISPLAY={display} ({shown['width']}x"
                    f"{shown['height']}) but the VNC desktop is {calibration.screen[0]}x"
                    f"{calibration.screen[1]}: set DISPLAY to the display {server} shows"
                )
            screenshot = wait_for_window(controller, calibration.targets)
            attempts = calibration.ask_all(screenshot, _progress)
        result = calibration.finish(attempts)
    finally:
        controller.disconnect()
    for line in report_lines(result, calibration.targets, settings):
        print(line)
    width, height = calibration.screen
    if any(side % 28 == 0 or side % 1000 == 0 for side in (width, height)):
        print(
            f"vnc-use: note: this desktop is {width}x{height}; a side that is a multiple of 28 "
            "or of 1000 can hide a resize mistake -- calibrate on another size too"
        )
    print(f"vnc-use: details in {calibration.file}")
    return EXIT_DONE if result.diagnosis.fine else EXIT_ERROR


def _settings(args: argparse.Namespace, planner: Any) -> dict[str, Any]:
    settings = getattr(planner, "run_settings", None)
    known: dict[str, Any] = settings() if callable(settings) else {}
    return {
        "provider": known.get("provider") or args.provider or "gemini",
        "model": getattr(planner, "model", args.model),
        "dialect": known.get("dialect"),
    }


def _progress(attempt: Any) -> None:
    where = (
        "no click" if attempt.click is None else f"({attempt.click[0]:.0f}, {attempt.click[1]:.0f})"
    )
    print(f"  {attempt.label}: {where}", flush=True)
