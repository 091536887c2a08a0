"""The run report: ``runs/<thread_id>/report.html`` and, on demand, ``report.gif``.

The agent writes the HTML report whenever a run ends or pauses (done, error, denied, budget
stops, waiting for approval) through :func:`write_report_safely`, which never lets a report
problem break a run; ``vnc-use report ID [--gif]`` writes them on demand. Both are built from
the run folder alone (``run.json``, ``events.jsonl``, ``screenshots/``), every value passed
once more through the redactor, so they can show nothing the events do not.

>>> from vnc_use.record.report import write_report, write_gif     # doctest: +SKIP
>>> write_report("runs/3f2a9c1d0b7e")                       # doctest: +SKIP
PosixPath('runs/3f2a9c1d0b7e/report.html')
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vnc_use.record.folder import RunFolder
from vnc_use.record.report.gif import render_gif
from vnc_use.record.report.html import render_html
from vnc_use.record.report.model import RunView, load_run

__all__ = [
    "GIF_NAME",
    "REPORT_NAME",
    "RUN_END_EVENTS",
    "ReportOnRunEnd",
    "load_run",
    "write_gif",
    "write_report",
    "write_report_safely",
]

log = logging.getLogger(__name__)

REPORT_NAME = "report.html"
GIF_NAME = "report.gif"

Redact = Callable[[Any], Any]


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_report(
    run_dir: str | Path,
    *,
    redact: Redact | None = None,
    embed: bool = False,
    view: RunView | None = None,
) -> Path:
    """Write ``report.html`` into the run folder and return its path.

    ``embed=True`` puts the screenshots inside the page (one file to send around); otherwise
    the page refers to ``screenshots/<sha256>.png`` beside it.
    """
    folder = Path(run_dir)
    view = view or load_run(folder, redact)
    path = folder / REPORT_NAME
    _write(path, render_html(view, embed=embed).encode("utf-8"))
    return path


def write_gif(
    run_dir: str | Path, *, redact: Redact | None = None, max_width: int = 960
) -> Path | None:
    """Write ``report.gif`` (the steps with their markers, animated); None without screenshots."""
    folder = Path(run_dir)
    path = folder / GIF_NAME
    tmp = folder / f".{GIF_NAME}.{os.getpid()}.tmp.gif"
    if render_gif(load_run(folder, redact), tmp, max_width=max_width) == 0:
        return None
    os.replace(tmp, path)
    return path


def write_report_safely(folder: RunFolder) -> Path | None:
    """Write a run's report at the end of a run; a failure is logged, never raised."""
    try:
        return write_report(folder.path, redact=folder.redact)
    except Exception:  # a report problem must never break a run
        log.exception("could not write the report of run %s", folder.thread_id)
        return None


RUN_END_EVENTS = frozenset({"run_paused", "run_ended"})
"""The events after which a run's report is (re)written."""


class ReportOnRunEnd:
    """A run folder's event listener that writes ``report.html`` whenever the run pauses or
    ends: the report follows the run's events, the agent never calls it."""

    def __init__(self, folder: RunFolder) -> None:
        self.folder = folder

    def __call__(self, event: dict[str, Any]) -> None:
        if event.get("event") in RUN_END_EVENTS:
            write_report_safely(self.folder)
