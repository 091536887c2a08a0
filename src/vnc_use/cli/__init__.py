"""The ``vnc-use`` / ``cua-vnc`` command line (the only package that prints).

Each command family lives in its own module with a ``register(subparsers)`` function that
adds its sub-commands and sets ``func`` (a callable taking the parsed arguments and returning
the exit code). Exit codes: 0 done, 1 error, 2 bad usage or configuration, 3 awaiting
approval or a person, 4 denied, 5 step, time or cost budget reached, 6 blocked for safety,
7 a replay diverged, 8 stuck (the model repeated actions that changed nothing), 9 failed (the
model reported that the task failed), 130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from collections.abc import Sequence

from vnc_use.cli import calibrate as calibrate_commands
from vnc_use.cli import console as console_commands
from vnc_use.cli import desktop as desktop_commands
from vnc_use.cli import eval as eval_commands
from vnc_use.cli import fleet as fleet_commands
from vnc_use.cli import mcp as mcp_commands
from vnc_use.cli import report as report_commands
from vnc_use.cli import run as run_commands
from vnc_use.cli import worker as worker_commands
from vnc_use.cli.common import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_USAGE
from vnc_use.errors import ConfigError, VncUseError
from vnc_use.version import __version__

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for docs and tests)."""
    parser = argparse.ArgumentParser(
        prog="vnc-use",
        description="Let a computer-use model (Gemini, Claude, OpenAI, or an open model behind an "
        "OpenAI-compatible server) operate a VNC desktop.",
        epilog="Exit codes: 0 done, 1 error, 2 usage, 3 awaiting approval or a person, 4 denied, "
        "5 budget (steps, time, cost), 6 blocked, 7 diverged (replay), 8 stuck, 9 failed (the "
        "model said so), 130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"vnc-use {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="log details and show tracebacks of internal errors"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run_commands.register(sub)
    desktop_commands.register(sub)
    report_commands.register(sub)
    mcp_commands.register(sub)
    eval_commands.register(sub)
    calibrate_commands.register(sub)
    worker_commands.register(sub)
    fleet_commands.register(sub)
    console_commands.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``vnc-use`` and ``cua-vnc``; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not args.debug:
        logging.getLogger("twisted").setLevel(logging.WARNING)
    try:
        code: int = args.func(args)
    except ConfigError as exc:
        print(f"vnc-use: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except VncUseError as exc:
        print(f"vnc-use: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("vnc-use: interrupted; continue later with 'vnc-use resume ID'", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug of ours: one line, the run stays resumable
        if args.debug:
            traceback.print_exc()
        print(
            f"vnc-use: internal error: {type(exc).__name__}: {exc} (run again with --debug for "
            "the traceback; a started run can be continued with 'vnc-use resume ID')",
            file=sys.stderr,
        )
        return EXIT_ERROR
    return code
