"""``vnc-use report``, ``runs`` and ``show``: look at runs after the fact.

They read the run folders only (never the checkpoint database), so they work on any run, of
any age, while another process is running it, and without a desktop or an API key.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from vnc_use import config
from vnc_use.cli import fleet_record
from vnc_use.cli.common import EXIT_DONE, add_runs_dir
from vnc_use.cli.fleet import add_fleet_options, fleet_url
from vnc_use.cli.fleet import runs_command as fleet_runs
from vnc_use.cli.progress import LineFormatter, plain
from vnc_use.record import timefmt
from vnc_use.record.folder import Redactor
from vnc_use.record.money import format_cost
from vnc_use.record.report import GIF_NAME, REPORT_NAME, write_gif, write_report
from vnc_use.record.runs import RunSummary, list_runs, read_events, run_folder, summarize
from vnc_use.record.video import VIDEO_NAME, read_segments

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add ``report``, ``runs`` and ``show`` to the sub-command parsers."""
    p = sub.add_parser("report", help="write a run's HTML report (and with --gif, an animation)")
    p.add_argument("thread_id", metavar="ID")
    p.add_argument("--gif", action="store_true", help=f"also write {GIF_NAME}: the steps animated")
    p.add_argument("--embed", action="store_true", help="put the screenshots inside the HTML file")
    p.add_argument(
        "--video",
        action="store_true",
        help=f"also print the run's video ({VIDEO_NAME}, then one file per resumed leg); the "
        "report plays it above the steps",
    )
    p.add_argument(
        "--out",
        default=None,
        metavar="FILE",
        help="with --fleet: also write the report as this one file, screenshots and video inside",
    )
    add_fleet_options(p)
    add_runs_dir(p)
    p.set_defaults(func=report_command)

    p = sub.add_parser("runs", help="list the runs, newest first")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="only the newest N")
    p.add_argument("--json", action="store_true", help="one JSON object per run")
    p.add_argument(
        "--server",
        default=None,
        metavar="URL",
        help="list the threads of a LangGraph Server instead (awaiting approval first)",
    )
    add_fleet_options(p)
    add_runs_dir(p)
    p.set_defaults(func=runs_command)

    p = sub.add_parser("show", help="print a run's transcript")
    p.add_argument("thread_id", metavar="ID")
    p.add_argument("--json", action="store_true", help="its events, one JSON object per line")
    add_fleet_options(p)
    add_runs_dir(p)
    p.set_defaults(func=show_command)


def _redactor() -> Redactor:
    """The secrets of this environment (events are already redacted; this is a second net)."""
    return Redactor(config.secret_values())


def report_command(args: argparse.Namespace) -> int:
    """Write ``report.html`` (and ``report.gif``) for a run; print their paths."""
    redact = _redactor()
    if args.fleet:
        folder = fleet_record.report_command(args, fleet_url(args.fleet))
    else:
        folder = run_folder(args.runs_dir, args.thread_id)
        print(f"report: {write_report(folder, redact=redact, embed=args.embed)}")
    if args.gif:
        gif = write_gif(folder, redact=redact)
        print(f"gif: {gif}" if gif else "gif: none (the run has no screenshots)")
    if args.video:
        segments = read_segments(folder)
        for segment in segments:
            print(f"video: {folder / segment.file}")
        if not segments:
            print("video: none (the run was recorded with --no-video, or not on a VNC desktop)")
    return EXIT_DONE


def _as_json(s: RunSummary) -> dict[str, Any]:
    return {
        "thread_id": s.thread_id,
        "task": s.task,
        "status": s.status,
        "steps": s.steps,
        "started": s.started,
        "duration_s": s.duration_s,
        "final_text": s.final_text,
        "error": s.error,
        "source_thread": s.source_thread,
        "cost_usd": s.cost_usd,
        "path": str(s.path),
    }


def runs_command(args: argparse.Namespace) -> int:
    """List the runs of ``--runs-dir``, newest first (or a server's: ``--server``)."""
    if args.fleet:
        return fleet_runs(args)
    if args.server:
        from vnc_use.cli.server import runs_command as server_runs

        return server_runs(args)
    runs = list_runs(args.runs_dir)
    if args.limit is not None:
        runs = runs[: max(args.limit, 0)]
    redact = _redactor()
    if args.json:
        for s in runs:
            print(json.dumps(redact(_as_json(s)), ensure_ascii=False))
        return EXIT_DONE
    if not runs:
        print(f"no runs in {args.runs_dir}")
        return EXIT_DONE
    width = max(6, *(len(s.thread_id) for s in runs))
    print(
        f"{'THREAD':<{width}}  {'STATUS':<17}  STEPS  {'STARTED':<19}  DURATION  {'COST':>12}  TASK"
    )
    for s in runs:
        task = " ".join(redact(s.task).split())
        if s.source_thread:
            task = f"[replay of {s.source_thread}] {task}"
        task = task if len(task) <= 60 else task[:59] + "…"
        print(
            f"{s.thread_id:<{width}}  {s.status:<17}  {s.steps:>5}  {timefmt.when(s.started):<19}  "
            f"{timefmt.duration(s.duration_s):>8}  {_cost(s):>12}  {task}"
        )
    return EXIT_DONE


def _cost(s: RunSummary) -> str:
    """The run's cost for the listing: ``$0.0123``, ``unknown`` (no price for its model), or
    ``-`` (a run of a version that did not record it)."""
    if not s.priced:
        return "-"
    return "unknown" if s.cost_usd is None else format_cost(s.cost_usd)


def show_command(args: argparse.Namespace) -> int:
    """Print one run's transcript: its steps, decisions, errors and outcome (a fleet's run:
    from the fleet's database)."""
    if args.fleet:
        url = fleet_url(args.fleet)
        return fleet_record.show_command(args, url, lambda f: _show(f, args, fleet=True))
    return _show(run_folder(args.runs_dir, args.thread_id), args)


def _show(folder: Path, args: argparse.Namespace, fleet: bool = False) -> int:
    redact = _redactor()
    events = [redact(e) for e in read_events(folder)]
    if args.json:
        for e in events:
            print(json.dumps(e, ensure_ascii=False))
        return EXIT_DONE
    summary = summarize(folder)
    fmt = LineFormatter()
    for e in events:
        line = fmt(e)
        if line is not None:
            print(plain(line))
    if summary is not None:
        _print_outcome(summary, redact)
    paused = next((e for e in reversed(events) if e.get("event") in _ENDS), None)
    if summary and summary.status == "awaiting_approval" and paused:
        _print_pending(paused.get("pending_call") or {}, args.thread_id, fleet)
    report = folder / REPORT_NAME
    if fleet:
        print(f"report: vnc-use report --fleet URL {args.thread_id}")
    elif report.exists():
        print(f"report: {report}")
    return EXIT_DONE


_ENDS = ("run_ended", "run_paused")


def _print_outcome(summary: RunSummary, redact: Redactor) -> None:
    """The run's status line, its answer and its error."""
    print(
        f"status: {summary.status} ({summary.steps} step{'' if summary.steps == 1 else 's'},"
        f" started {timefmt.when(summary.started)},"
        f" {timefmt.duration(summary.duration_s)}, {_cost(summary)})"
    )
    if summary.final_text:
        print(f"answer: {redact(summary.final_text)}")
    if summary.error:
        print(f"error: {redact(summary.error)}")


def _print_pending(pending: dict[str, Any], thread_id: str, fleet: bool = False) -> None:
    """The call waiting for approval, and how to answer it."""
    print(f"waiting for approval of {pending.get('name')}: {pending.get('explanation', '')}")
    if pending.get("error"):
        print(f"  the call is invalid and will not run even if approved: {pending['error']}")
    tid = f"--fleet URL {thread_id}" if fleet else thread_id
    print(f"  approve: vnc-use approve {tid}   deny: vnc-use deny {tid}")
