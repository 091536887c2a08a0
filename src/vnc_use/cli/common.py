"""What every command module shares: exit codes and common options."""

from __future__ import annotations

import argparse

EXIT_DONE, EXIT_ERROR, EXIT_USAGE, EXIT_AWAITING, EXIT_DENIED, EXIT_BUDGET = 0, 1, 2, 3, 4, 5
EXIT_INTERRUPTED = 130
EXIT_CODES = {
    "done": EXIT_DONE,
    "error": EXIT_ERROR,
    "awaiting_approval": EXIT_AWAITING,
    "denied": EXIT_DENIED,
    "step_limit": EXIT_BUDGET,
    "timeout": EXIT_BUDGET,
    "interrupted": EXIT_INTERRUPTED,
}


def add_runs_dir(p: argparse.ArgumentParser) -> None:
    """``--runs-dir``: where run folders and the checkpoint database live."""
    p.add_argument("--runs-dir", default="runs", help="folder of run folders and checkpoints")
