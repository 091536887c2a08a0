"""What every command module shares: exit codes and common options."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from vnc_use.cli.options import add_settings
from vnc_use.status import RunStatus

EXIT_DONE, EXIT_ERROR, EXIT_USAGE, EXIT_AWAITING, EXIT_DENIED, EXIT_BUDGET = 0, 1, 2, 3, 4, 5
EXIT_BLOCKED = 6
EXIT_DIVERGED = 7
EXIT_STUCK = 8
EXIT_FAILED = 9
EXIT_INTERRUPTED = 130
EXIT_CODES: dict[str, int] = {
    RunStatus.DONE: EXIT_DONE,
    RunStatus.ERROR: EXIT_ERROR,
    RunStatus.AWAITING_APPROVAL: EXIT_AWAITING,
    RunStatus.AWAITING_HUMAN: EXIT_AWAITING,
    RunStatus.DENIED: EXIT_DENIED,
    RunStatus.STEP_LIMIT: EXIT_BUDGET,
    RunStatus.TIMEOUT: EXIT_BUDGET,
    RunStatus.BLOCKED: EXIT_BLOCKED,
    RunStatus.DIVERGED: EXIT_DIVERGED,
    RunStatus.STUCK: EXIT_STUCK,
    RunStatus.COST_LIMIT: EXIT_BUDGET,
    RunStatus.FAILED: EXIT_FAILED,
    RunStatus.INTERRUPTED: EXIT_INTERRUPTED,
}


def add_runs_dir(p: argparse.ArgumentParser) -> None:
    """``--runs-dir``: where run folders and the checkpoint database live."""
    add_settings(p, "runs_dir")


def add_video_options(p: argparse.ArgumentParser) -> None:
    """``--no-video`` / ``--video`` and ``--video-fps``: the run's ``video.mp4`` (on by
    default for a new run; a continued run keeps its own choice unless one is given)."""
    add_settings(p, "recording")


_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def stop_on_signals(stop: Callable[[], None], what: str) -> Iterator[None]:
    """The first Ctrl-C or SIGTERM (a service manager stopping us, a CI timeout) calls ``stop``
    (a stop at the next step boundary: checkpoint, video and report closed, resumable) and
    says ``what`` will happen; a second one of either stops at once (KeyboardInterrupt)."""

    def at_once(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    def first(signum: int, frame: FrameType | None) -> None:
        for sig in _SIGNALS:
            signal.signal(sig, at_once)
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        print(f"\nvnc-use: {name}: {what} (again to stop at once)", file=sys.stderr, flush=True)
        stop()

    previous = {sig: signal.signal(sig, first) for sig in _SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
