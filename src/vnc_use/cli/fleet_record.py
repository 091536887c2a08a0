"""``report --fleet``, ``show --fleet`` and ``fleet prune``: a fleet run's record from the
database alone (:mod:`vnc_use.fleet.blobs`), on the machine that asks.

The run's folder is fetched into this machine's ``--runs-dir`` (a cache: only what it lacks)
and the report is built here, with every leg's screenshots and video whichever hosts took
them; ``--out FILE`` writes one HTML file with all of it inside.
"""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from vnc_use import config
from vnc_use.cli.common import EXIT_DONE
from vnc_use.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable

    from vnc_use.fleet.blobs import RunStore
    from vnc_use.fleet.db import FleetDb

__all__ = ["parse_duration", "prune_command", "report_command", "show_command"]

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw]?)$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``45s``, ``0`` (seconds without a unit) as seconds."""
    found = _DURATION.match(text.strip().lower())
    if not found:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: give a number and a unit, e.g. 30d, 12h, 90m or 0"
        )
    return float(found.group(1)) * _UNIT[found.group(2)]


def size_text(n: int) -> str:
    """Bytes as a person reads them: ``812 B``, ``4.2 KB``, ``17.5 MB``."""
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def _open(url: str, thread_id: str) -> tuple[FleetDb, RunStore]:
    """The fleet's tables and the run folders' store, for a run the fleet has recorded."""
    from vnc_use.fleet.blobs import RunStore
    from vnc_use.fleet.db import FleetDb

    db = FleetDb(url, application_name="vnc-use fleet client")
    try:
        row = db.run(thread_id)
        if row is None:
            raise ConfigError(f"no run {thread_id!r} in the fleet's database")
        store = RunStore(url, conn=db.conn)
        if store.pruned(thread_id):
            raise ConfigError(
                f"run {thread_id!r} was pruned (vnc-use fleet prune): its screenshots, events "
                "and video are gone; 'vnc-use runs --fleet URL' still lists its outcome"
            )
        if not store.has_run(thread_id):
            raise ConfigError(
                f"run {thread_id!r} has recorded nothing yet ({row.status}): try again once a "
                "worker has started it"
            )
    except BaseException:
        db.close()
        raise
    return db, store


def report_command(args: argparse.Namespace, url: str) -> Path:
    """``vnc-use report --fleet URL ID [--out FILE]``: fetch the run's folder into
    ``--runs-dir`` and write its report there; ``--out FILE``: one file with everything.
    Returns the folder (the caller adds ``--gif`` and ``--video`` as for a local run)."""
    from vnc_use.fleet.blobs import FETCHED
    from vnc_use.record.folder import Redactor
    from vnc_use.record.report import load_run, write_report
    from vnc_use.record.report.html import render_html

    runs_dir = Path(args.runs_dir)
    folder = runs_dir / str(args.thread_id)
    marker = folder / FETCHED
    if (folder / "events.jsonl").exists() and not marker.exists():
        raise ConfigError(
            f"{folder} holds a run of this machine, not the fleet's: give the fleet's run a "
            "folder of its own with --runs-dir"
        )
    db, store = _open(url, args.thread_id)
    try:
        try:
            store.fetch_run(runs_dir, args.thread_id)
            marker.write_text("fetched from a fleet's database by vnc-use report --fleet\n")
        except OSError as exc:
            raise ConfigError(
                f"cannot write the run's folder into {runs_dir} ({exc.strerror}); choose "
                "another with --runs-dir"
            ) from None
    finally:
        db.close()
    redact = Redactor(config.secret_values())
    page = write_report(folder, redact=redact)
    if args.out:
        out = Path(args.out)
        html = render_html(load_run(folder, redact), embed=True, embed_video=True)
        try:
            out.write_text(html, "utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot write --out {out} ({exc.strerror}); choose another"
            ) from None
        print(f"report: {out} (screenshots and video inside)")
    else:
        print(f"report: {page}")
    return folder


def show_command(args: argparse.Namespace, url: str, show_folder: Callable[[Path], int]) -> int:
    """``vnc-use show --fleet URL ID``: the run's transcript from the fleet's events."""
    db, store = _open(url, args.thread_id)
    try:
        with tempfile.TemporaryDirectory(prefix="vnc-use-show-") as tmp:
            store.fetch_run(Path(tmp), args.thread_id, media=False)
            return show_folder(Path(tmp) / args.thread_id)
    finally:
        db.close()


def prune_command(args: argparse.Namespace, url: str) -> int:
    """``vnc-use fleet prune --older-than DURATION``: delete finished runs' screenshots,
    events and videos; say what was freed and the database's size before and after."""
    from vnc_use.fleet.blobs import RunStore
    from vnc_use.fleet.db import FleetDb

    db = FleetDb(url, application_name="vnc-use fleet prune")
    try:
        stats = RunStore(url, conn=db.conn).prune(args.older_than)
    finally:
        db.close()
    count = len(stats.runs)
    names = f" ({', '.join(stats.runs[:10])}{', ...' if count > 10 else ''})" if count else ""
    print(
        f"pruned {count} finished run{'' if count == 1 else 's'}{names}: {stats.files} files "
        f"(screenshots, records, videos), {stats.events} events; freed {size_text(stats.freed)}"
    )
    print(
        f"database size: {size_text(stats.size_before)} before, {size_text(stats.size_after)} "
        "after (PostgreSQL reuses the freed space for new rows; VACUUM FULL gives it back to "
        "the disk)"
    )
    return EXIT_DONE
