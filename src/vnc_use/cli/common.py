"""What every command module shares: exit codes and common options."""

from __future__ import annotations

import argparse

from vnc_use.status import RunStatus

EXIT_DONE, EXIT_ERROR, EXIT_USAGE, EXIT_AWAITING, EXIT_DENIED, EXIT_BUDGET = 0, 1, 2, 3, 4, 5
EXIT_BLOCKED = 6
EXIT_DIVERGED = 7
EXIT_INTERRUPTED = 130
EXIT_CODES: dict[str, int] = {
    RunStatus.DONE: EXIT_DONE,
    RunStatus.ERROR: EXIT_ERROR,
    RunStatus.AWAITING_APPROVAL: EXIT_AWAITING,
    RunStatus.DENIED: EXIT_DENIED,
    RunStatus.STEP_LIMIT: EXIT_BUDGET,
    RunStatus.TIMEOUT: EXIT_BUDGET,
    RunStatus.BLOCKED: EXIT_BLOCKED,
    RunStatus.DIVERGED: EXIT_DIVERGED,
    RunStatus.INTERRUPTED: EXIT_INTERRUPTED,
}


def add_runs_dir(p: argparse.ArgumentParser) -> None:
    """``--runs-dir``: where run folders and the checkpoint database live."""
    p.add_argument("--runs-dir", default="runs", help="folder of run folders and checkpoints")
