"""How times read in the CLI, the progress lines and the report (one spelling everywhere)."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["duration", "milliseconds", "when"]


def when(ts: float | None, *, zone: bool = False) -> str:
    """A local wall-clock time, ``2026-11-25 23:41:07`` (`` +0000`` with ``zone``); ``-``
    when unknown."""
    if not ts:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S" + (" %z" if zone else ""), time.localtime(ts))


def duration(seconds: float | None) -> str:
    """``12.3 s``, ``4 min 05 s``, ``2 h 07 min``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def milliseconds(value: Any, *, missing: str = "-", decimals: int = 2) -> str:
    """A duration given in ms: ``840 ms`` below a second, else seconds (``1.25 s``);
    ``missing`` when not a number."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return missing
    return f"{value / 1000:.{decimals}f} s" if value >= 1000 else f"{value:.0f} ms"
