"""``vnc-use run``, ``approve``, ``deny``, ``resume``: drive runs and answer approvals."""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from vnc_use import config
from vnc_use.cli import desktop as desktop_commands
from vnc_use.cli import fleet as fleet_commands
from vnc_use.cli import progress
from vnc_use.cli import server as server_commands
from vnc_use.cli.common import EXIT_DONE, add_runs_dir, add_video_options, stop_on_signals
from vnc_use.cli.options import (
    add_budget_options,
    add_connection_options,
    add_max_cost,
    add_model_options,
    add_rdp_options,
    add_screen_region,
    add_settings,
    add_vnc,
)
from vnc_use.cli.outcome import check_refusal, drive, print_outcome
from vnc_use.cli.spec import run_spec, saved_run_spec
from vnc_use.desktops.target import reach
from vnc_use.errors import ConfigError
from vnc_use.replay.compare import DEFAULT_TOLERANCE
from vnc_use.store.holds import since_text

if TYPE_CHECKING:  # langgraph is imported when a run starts, not before (an RDP bridge
    # reports an unreachable server within --connect-timeout of the command starting)
    from vnc_use.agent.state import RunResult
    from vnc_use.runs.spec import RunSpec


def _common(p: argparse.ArgumentParser) -> None:
    add_runs_dir(p)
    add_video_options(p)
    p.add_argument(
        "--vnc-password",
        default=None,
        help="VNC password (prefer the VNC_PASSWORD environment variable: argv is visible)",
    )
    add_connection_options(p)
    p.add_argument(
        "--checkpointer",
        default=None,
        metavar="URL",
        help="where checkpoints and the action journal live: postgresql://USER@HOST:PORT/DB "
        "for runs several machines share (the password is best left to PGPASSWORD), or a "
        "SQLite file; default: the VNC_USE_DATABASE_URL environment variable, else "
        "RUNS_DIR/vnc-use.sqlite",
    )
    add_settings(p, "local")  # --lease-timeout, --reconnect-window
    p.add_argument("--quiet", action="store_true", help="print only the final result")
    p.add_argument(
        "--json", action="store_true", help="print every event as one JSON line (as events.jsonl)"
    )


def register(sub: Any) -> None:
    """Add ``run``, ``approve``, ``deny`` and ``resume`` to the sub-command parsers."""
    run = sub.add_parser("run", help="start a run for a task")
    add_vnc(run, default="the local desktop, started when needed")
    add_rdp_options(run, default_help="instead of --vnc")
    run.add_argument(
        "--view", action="store_true", help="serve a live view while it runs (not with --server)"
    )
    add_screen_region(run)
    run.add_argument("--task", required=True, help="what to do, in plain words")
    add_budget_options(run, stall=True)
    run.add_argument("--thread-id", default=None, metavar="ID")
    add_model_options(run)
    add_settings(run, "approvals")  # --no-hitl, --no-initial-screenshot, --confirm, --sensitive
    _common(run)
    server_commands.add_server_options(run, run=True)
    fleet_commands.add_fleet_options(run, run=True)
    run.set_defaults(func=command)

    _register_replay(sub)
    _register_takeover(sub)
    _register_stop(sub)

    for name, text in (
        ("approve", "approve the action a run is waiting on, and continue"),
        ("deny", "deny the action a run is waiting on (the run stops)"),
        ("resume", "continue a run that stopped on an error or a crash"),
        (
            "handback",
            "hand a run's desktop back after a takeover, or answer the person a model asked "
            "for (awaiting_human); the run continues here",
        ),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("thread_id", metavar="ID")
        add_vnc(p, default="the run's own")
        add_rdp_options(p, default_help="default: the run's own (a new bridge)")
        if name == "resume":
            add_max_cost(p)
            p.add_argument(
                "--answer",
                default=None,
                metavar="TEXT",
                help="a run waiting for a person (awaiting_human): continue it with this "
                "answer to the model (as handback --note TEXT)",
            )
        if name == "handback":
            p.add_argument(
                "--note",
                default=None,
                metavar="TEXT",
                help="what the model is told with the desktop: the answer to its question, "
                "or what you did",
            )
            add_person(p)
        _common(p)
        server_commands.add_server_options(p)
        fleet_commands.add_fleet_options(p)
        p.set_defaults(func=command)


def _register_stop(sub: Any) -> None:
    p = sub.add_parser(
        "stop",
        help="stop a run at its next step boundary, from any process (it ends interrupted; "
        "resume continues it)",
    )
    p.add_argument("thread_id", metavar="ID")
    add_runs_dir(p)
    p.add_argument(
        "--checkpointer",
        default=None,
        metavar="URL",
        help="where the run's checkpoints and journal live (default: VNC_USE_DATABASE_URL, "
        "else RUNS_DIR/vnc-use.sqlite)",
    )
    server_commands.add_server_options(p)
    fleet_commands.add_fleet_options(p)
    p.set_defaults(func=stop_command)


def stop_command(args: argparse.Namespace) -> int:
    """``vnc-use stop ID``: the executor's ``stop`` (a stop request the run sees between two
    steps); the run rules refuse a run that is not running, in one line."""
    from vnc_use.runs.executor import LocalExecutor

    executor = _elsewhere(args) or LocalExecutor(
        args.runs_dir, checkpointer=args.checkpointer or config.database_url()
    )
    try:
        executor.stop(args.thread_id)
    finally:
        executor.close()
    print(f"stop requested: run {args.thread_id} stops after its current step")
    return EXIT_DONE


def add_person(p: argparse.ArgumentParser) -> None:
    """``--as NAME``: who takes over or hands back (default: your user name)."""
    p.add_argument(
        "--as",
        dest="person",
        default=None,
        metavar="NAME",
        help="who you are, as the run records the holder of its desktop (default: your user name)",
    )


def _register_takeover(sub: Any) -> None:
    p = sub.add_parser(
        "takeover",
        help="take a run's desktop over: the run pauses at its next step and waits for you "
        "(awaiting_human) until you hand it back (vnc-use handback ID)",
    )
    p.add_argument("thread_id", metavar="ID")
    p.add_argument("--force", action="store_true", help="take it from the person who holds it now")
    add_person(p)
    add_runs_dir(p)
    p.add_argument(
        "--checkpointer",
        default=None,
        metavar="URL",
        help="where the run's checkpoints live (default: VNC_USE_DATABASE_URL, else "
        "RUNS_DIR/vnc-use.sqlite)",
    )
    server_commands.add_server_options(p)
    fleet_commands.add_fleet_options(p)
    p.set_defaults(func=command_takeover)


def command_takeover(args: argparse.Namespace) -> int:
    """``vnc-use takeover ID``: the run pauses at its next step boundary; the desktop is the
    person's until ``vnc-use handback ID``."""
    from vnc_use.runs.executor import LocalExecutor

    person = args.person or config.person_name()
    executor = _elsewhere(args)
    if executor is None:
        _refuse_fleet_run(args)
        saved = _run_settings(args)
        executor = LocalExecutor(args.runs_dir, checkpointer=_checkpointer(args, saved))
    try:
        result = executor.takeover(args.thread_id, person, force=args.force)
    finally:
        executor.close()
    human = result.human or {}
    t = args.thread_id
    print(
        f"run {t} waits for you ({result.status}): {human.get('holder') or person} has its "
        f"desktop since {since_text(human.get('since'))}"
    )
    if human.get("desktop"):  # a fleet run: its desktop is on a worker's host
        print(f"  use it: a VNC viewer on {human['desktop']} (the worker's VNC_PASSWORD)")
    else:
        print(f"  use it: vnc-use view --interactive {t}")
    flags = f" {executor.flags}" if executor.flags else ""
    print(f'  hand it back: vnc-use handback{flags} {t} --note "what you did"')
    return 0


def _register_replay(sub: Any) -> None:
    p = sub.add_parser(
        "replay",
        help="perform a recorded run's actions again without the model; stop (exit 7) when "
        "the screen is not what it was",
    )
    p.add_argument("thread_id", metavar="THREAD", help="the recorded run (in --runs-dir)")
    add_vnc(p, default="the run's own")
    add_rdp_options(p, default_help="default: the run's own (a new bridge)")
    p.add_argument(
        "--tolerance",
        default=None,
        metavar="T",
        help="percent of the screen that may differ from the recording before a step (default "
        "1: a blinking cursor or a clock passes), or off: never stop",
    )
    p.add_argument(
        "--speed",
        choices=("fast", "recorded"),
        default="fast",
        help="fast: act as soon as the screen settles (default); recorded: also wait as long "
        "as the recorded model took",
    )
    p.add_argument("--from-step", type=int, default=1, metavar="N", help="start at recorded step N")
    p.add_argument(
        "--mask",
        action="append",
        default=[],
        metavar="WxH+X+Y",
        help="a region known to change (a clock), in pixels of the recorded screen; left out "
        "of the comparison (repeatable)",
    )
    p.add_argument(
        "--heal",
        action="store_true",
        help="when the screen differs, hand the rest of the task to the recorded run's model "
        "and go on as a normal run",
    )
    p.add_argument("--replay-id", default=None, metavar="ID", help="the replay's own thread id")
    _common(p)
    p.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """Run one of the commands through its executor (this process, ``--server``,
    ``--fleet``); returns the exit code of the run's outcome."""
    executor = _elsewhere(args)
    if executor is None:
        return _here(args)
    check_refusal(executor, None, args)  # the options it cannot take, before they are read
    spec = run_spec(args) if args.command == "run" else None
    check_refusal(executor, spec, args)  # and what the spec asks that it cannot do
    thread_id = args.thread_id
    try:
        result = drive(executor, lambda: _verb(executor, args, spec, thread_id))
    finally:
        executor.close()
        shown = getattr(executor, "on_event", None)
        if isinstance(shown, progress.Progress):
            shown.close()
    return print_outcome(result, executor, args)


def _elsewhere(args: argparse.Namespace) -> Any:
    """The executor of ``--server URL`` / ``--fleet URL`` (None: this process)."""
    if getattr(args, "server", None):
        from vnc_use.runs.executor import ServedExecutor

        return ServedExecutor(args.server, on_event=progress.for_args(args))
    if getattr(args, "fleet", None):
        from vnc_use.fleet.executor import FleetExecutor

        url = fleet_commands.fleet_url(args.fleet)
        moved = getattr(args, "vnc", None) if args.command != "run" else None
        quiet = getattr(args, "json", False) or getattr(args, "quiet", False)
        return FleetExecutor(
            url,
            label=getattr(args, "label", None),
            desktop=moved,
            on_event=None if quiet else progress.for_args(args),
            on_notice=lambda line: print(line, flush=True),
        )
    return None


def _verb(executor: Any, args: argparse.Namespace, spec: RunSpec | None, tid: str) -> RunResult:
    """The command's verb on ``executor`` (``spec``: a new run's, or the one a later leg
    uses; None: the run's own)."""
    if args.command == "run":
        assert spec is not None
        return executor.start(spec, args.task, tid)  # type: ignore[no-any-return]
    if args.command in ("approve", "deny"):
        return executor.answer(args.thread_id, args.command, spec=spec)  # type: ignore[no-any-return]
    if args.command == "handback" or getattr(args, "answer", None) is not None:
        note = args.note if args.command == "handback" else args.answer
        person = getattr(args, "person", None) or config.person_name()
        return executor.handback(args.thread_id, note, person=person, spec=spec)  # type: ignore[no-any-return]
    max_cost = getattr(args, "max_cost", None)
    return executor.resume(args.thread_id, spec=spec, max_cost=max_cost)  # type: ignore[no-any-return]


def _here(args: argparse.Namespace) -> int:
    """The command in this process (:class:`~vnc_use.runs.executor.LocalExecutor`)."""
    from vnc_use.runs.executor import LocalExecutor
    from vnc_use.runs.open import sensitive_values

    if args.command in ("approve", "deny", "resume", "handback"):
        _refuse_fleet_run(args)
    saved = None if args.command == "run" else _run_settings(args)
    spec = run_spec(args) if saved is None else saved_run_spec(args, saved)
    check_refusal(LocalExecutor(spec.runs_dir), spec, args)
    # the local desktop starts only for a model that is ready (its key set); an RDP bridge
    # starts before the model's SDK loads, so an unreachable host is told within
    # --connect-timeout (the run still checks the key before anything is recorded)
    # approve and resume ask the model after acting: its key is checked before the desktop is
    # touched (exit 2, the run left as it was)
    early = spec.desktop.local or args.command in ("approve", "resume")
    planner = _planner(args, spec, saved) if early else None
    thread_id = _thread_id(args)
    log_path = Path(spec.runs_dir) / thread_id / "freerdp.log"  # a replay's: its own folder
    with reach(spec.desktop, password=args.vnc_password, log_path=log_path) as reached:
        if reached.notice and not getattr(args, "quiet", False):
            print(f"{reached.notice}", file=desktop_commands.notice_stream(args), flush=True)
        planner = planner or _planner(args, spec, saved)
        with desktop_commands.live_view_for_run(args, reached):
            if args.vnc_password:
                print(
                    "vnc-use: warning: --vnc-password is visible to other users in the process "
                    "list; prefer the VNC_PASSWORD environment variable",
                    file=sys.stderr,
                )
            executor = LocalExecutor(
                spec.runs_dir,
                checkpointer=_checkpointer(args, saved or {}),
                on_event=progress.for_args(args),
                reached=reached,
                planner=planner,
                sensitive_text=sensitive_values(spec.sensitive_names),
            )
            with executor, stop_on_signals(executor.request_stop, "stopping after this step"):
                agent = executor.agent(spec)
                if args.command == "run":
                    _warn(agent)
                if args.command == "replay":
                    result = drive(executor, lambda: _replay(agent, args, thread_id))
                else:
                    result = drive(executor, lambda: _verb(executor, args, spec, thread_id))
    return print_outcome(result, executor, args)


def _replay(agent: Any, args: argparse.Namespace, replay_id: str) -> RunResult:
    result: RunResult = agent.replay(
        args.thread_id,
        replay_id=replay_id,
        tolerance=DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance,
        speed=args.speed,
        from_step=args.from_step,
        masks=args.mask,
        heal=args.heal,
    )
    return result


def _thread_id(args: argparse.Namespace) -> str:
    """The run's id: the one given (a new one for a run or a replay without one)."""
    if args.command == "replay":
        return str(args.replay_id or uuid.uuid4().hex[:12])
    return str(args.thread_id or uuid.uuid4().hex[:12])


def _planner(args: argparse.Namespace, spec: RunSpec, saved: dict[str, Any] | None) -> Any:
    """The run's planner; on the local desktop a new run's is checked ready (its API key)
    before the desktop starts (elsewhere the run checks it before acting). A recorded replay
    continues with its own (rebuilt from its run.json)."""
    from vnc_use.replay.planner import planner_from_run
    from vnc_use.runs.open import open_planner

    if saved is not None and saved.get("provider") == "replay" and args.command != "replay":
        return planner_from_run(saved)
    if args.command in ("approve", "resume"):
        return open_planner(spec, ready=True)
    if not (args.command == "run" and spec.desktop.local):  # the run checks it before acting
        return open_planner(spec)
    try:
        return open_planner(spec, ready=True)
    except ConfigError as exc:
        if not spec.desktop.local:
            raise
        raise ConfigError(f"{exc}; {desktop_commands.local_desktop_left()}") from None


def _refuse_fleet_run(args: argparse.Namespace) -> None:
    """A fleet's run is continued through the fleet (a worker fetches its history from the
    fleet's tables, and the fleet records its outcome): one line."""
    from vnc_use.fleet.db import fleet_has_run
    from vnc_use.store.postgres import is_postgres_url

    url = args.checkpointer or config.database_url()
    if url and is_postgres_url(url) and fleet_has_run(url, args.thread_id):
        where = f" --vnc {args.vnc}" if getattr(args, "vnc", None) else ""
        raise ConfigError(
            f"run {args.thread_id} is a fleet run (the fleet keeps its history and outcome): "
            f"continue it through the fleet: vnc-use {args.command} {args.thread_id} --fleet URL"
            f"{where}"
        )


def _run_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Settings of an existing run (from its run.json), for approve/deny/resume."""
    from vnc_use.record import run_record

    path = run_record.path_of(Path(args.runs_dir) / args.thread_id)
    if not path.exists():
        raise ConfigError(f"no run {args.thread_id!r} in {args.runs_dir} (looked for {path})")
    return run_record.read(path.parent).settings()


def _checkpointer(args: argparse.Namespace, saved: dict[str, Any]) -> str | None:
    """``--checkpointer``, else ``VNC_USE_DATABASE_URL``; a run whose checkpoints are in
    PostgreSQL (run.json keeps the address without its password) needs one of them again."""
    chosen: str | None = args.checkpointer or config.database_url()
    if args.checkpointer and "://" in args.checkpointer and _has_password(args.checkpointer):
        print(
            "vnc-use: warning: a password in --checkpointer is visible to other users in the "
            "process list; prefer PGPASSWORD or the VNC_USE_DATABASE_URL environment variable",
            file=sys.stderr,
        )
    recorded = str(saved.get("checkpointer") or "")
    if chosen is None and recorded.startswith("postgresql://"):
        raise ConfigError(
            f"run {args.thread_id} keeps its checkpoints in {recorded}: give "
            "--checkpointer postgresql://... (or set VNC_USE_DATABASE_URL)"
        )
    return chosen


def _has_password(url: str) -> bool:
    try:
        return bool(urlsplit(url).password)
    except ValueError:
        return False


def _warn(agent: Any) -> Any:
    """Print the planner's warning (an assumed tool version, say), once, before the run."""
    warning = getattr(agent.planner, "warning", None)
    if warning:
        print(f"vnc-use: warning: {warning}", file=sys.stderr)
    return agent
