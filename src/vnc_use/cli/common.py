"""What every command module shares: exit codes and common options."""

from __future__ import annotations

import argparse

from vnc_use.errors import ConfigError
from vnc_use.providers.pricing import parse_price
from vnc_use.status import RunStatus

EXIT_DONE, EXIT_ERROR, EXIT_USAGE, EXIT_AWAITING, EXIT_DENIED, EXIT_BUDGET = 0, 1, 2, 3, 4, 5
EXIT_BLOCKED = 6
EXIT_DIVERGED = 7
EXIT_STUCK = 8
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
    RunStatus.STUCK: EXIT_STUCK,
    RunStatus.COST_LIMIT: EXIT_BUDGET,
    RunStatus.INTERRUPTED: EXIT_INTERRUPTED,
}


def add_runs_dir(p: argparse.ArgumentParser) -> None:
    """``--runs-dir``: where run folders and the checkpoint database live."""
    p.add_argument("--runs-dir", default="runs", help="folder of run folders and checkpoints")


def _fps(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of frames a second") from None
    if not 0 < value <= 60:
        raise argparse.ArgumentTypeError(f"{text} must be more than 0 and at most 60 (frames/s)")
    return value


def add_video_options(p: argparse.ArgumentParser) -> None:
    """``--no-video`` and ``--video-fps``: the run's ``video.mp4`` (on by default)."""
    p.add_argument(
        "--no-video",
        action="store_true",
        help="do not record video.mp4 (recorded by default from the VNC connection)",
    )
    p.add_argument(
        "--video-fps",
        type=_fps,
        default=10.0,
        metavar="N",
        help="the video's highest frame rate; frames only when the screen changes (default 10)",
    )


def positive_usd(text: str) -> float:
    """An amount of USD above 0 (``--max-cost``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an amount of USD") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a positive amount of USD")
    return value


def price_arg(text: str) -> tuple[float, float]:
    """``INPUT/OUTPUT``, USD per million tokens (``--price``)."""
    try:
        return parse_price(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(f"--price {text!r}: ")) from None


def add_cost_options(p: argparse.ArgumentParser) -> None:
    """``--max-cost`` and ``--price``: the run's cost cap and the model's price."""
    p.add_argument(
        "--max-cost",
        type=positive_usd,
        default=None,
        metavar="USD",
        help="stop the run (status cost_limit, exit 5) before a model call once its cost "
        "reached this; resume --max-cost HIGHER continues it",
    )
    p.add_argument(
        "--price",
        type=price_arg,
        default=None,
        metavar="INPUT/OUTPUT",
        help="the model's price in USD per million input and output tokens, e.g. 1.25/10 "
        "(default: vnc-use's price table; a model not in it costs 'unknown', a local "
        "openai-compatible model 0)",
    )
