"""``vnc-use run``, ``approve``, ``deny``, ``resume``: drive runs and answer approvals."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from vnc_use import config
from vnc_use.cli import desktop as desktop_commands
from vnc_use.cli import fleet as fleet_commands
from vnc_use.cli import progress
from vnc_use.cli import rdp as rdp_commands
from vnc_use.cli import server as server_commands
from vnc_use.cli.ask import ask_approval
from vnc_use.cli.common import (
    EXIT_CODES,
    EXIT_ERROR,
    add_cost_options,
    add_runs_dir,
    add_video_options,
    positive_usd,
)
from vnc_use.desktops.region import ScreenRegion
from vnc_use.errors import ConfigError
from vnc_use.providers.pricing import format_cost
from vnc_use.replay.compare import DEFAULT_TOLERANCE
from vnc_use.store.lease import DEFAULT_LEASE_TIMEOUT

if TYPE_CHECKING:  # langgraph is imported when a run starts, not before (an RDP bridge
    # reports an unreachable server within --connect-timeout of the command starting)
    from vnc_use.agent.state import RunResult


def _common(p: argparse.ArgumentParser) -> None:
    add_runs_dir(p)
    add_video_options(p)
    p.add_argument(
        "--vnc-password",
        default=None,
        help="VNC password (prefer the VNC_PASSWORD environment variable: argv is visible)",
    )
    p.add_argument(
        "--reconnect-window",
        type=float,
        default=None,
        metavar="S",
        help="how long to wait for a lost VNC server to come back before the run ends as an "
        "error (resumable); default 30 (not with --server)",
    )
    p.add_argument(
        "--vnc-user",
        default=None,
        metavar="USER",
        help="user name for servers that log in with one (macOS Screen Sharing, VeNCrypt "
        "Plain such as wayvnc); default: the VNC_USERNAME environment variable",
    )
    p.add_argument(
        "--vnc-ca",
        default=None,
        metavar="FILE",
        help="PEM file of the CA that signed the VNC server's TLS certificate (VeNCrypt X509 "
        "types); default: the system's trust store",
    )
    p.add_argument(
        "--connect-timeout",
        type=_positive_seconds,
        default=None,
        metavar="S",
        help="seconds to wait for the VNC connection and handshake (default 5)",
    )
    p.add_argument(
        "--checkpointer",
        default=None,
        metavar="URL",
        help="where checkpoints and the action journal live: postgresql://USER@HOST:PORT/DB "
        "for runs several machines share (the password is best left to PGPASSWORD), or a "
        "SQLite file; default: the VNC_USE_DATABASE_URL environment variable, else "
        "RUNS_DIR/vnc-use.sqlite",
    )
    p.add_argument(
        "--lease-timeout",
        type=_non_negative_seconds,
        default=DEFAULT_LEASE_TIMEOUT,
        metavar="SECONDS",
        help="how long to wait for a desktop another run is driving before giving up "
        f"(default {DEFAULT_LEASE_TIMEOUT:g})",
    )
    p.add_argument("--quiet", action="store_true", help="print only the final result")
    p.add_argument(
        "--json", action="store_true", help="print every event as one JSON line (as events.jsonl)"
    )


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a positive number of seconds")
    return value


def _non_negative_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be 0 or more seconds")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be 0 or more")
    return value


def register(sub: Any) -> None:
    """Add ``run``, ``approve``, ``deny`` and ``resume`` to the sub-command parsers."""
    run = sub.add_parser("run", help="start a run for a task")
    run.add_argument(
        "--vnc",
        default=None,
        metavar="HOST::PORT",
        help="VNC server address (default: the local desktop, started when needed)",
    )
    rdp_commands.add_options(run, default_help="instead of --vnc")
    run.add_argument(
        "--view", action="store_true", help="serve a live view while it runs (not with --server)"
    )
    run.add_argument(
        "--screen-region",
        default=None,
        metavar="WxH+X+Y",
        help="the part of the VNC framebuffer that is the screen, for servers that export "
        "more (several monitors, x11vnc -ncache); kept for approve/deny/resume",
    )
    run.add_argument("--task", required=True, help="what to do, in plain words")
    run.add_argument("--step-limit", type=int, default=40, metavar="N")
    run.add_argument("--timeout", type=float, default=300.0, metavar="S", help="seconds budget")
    run.add_argument("--exclude", nargs="+", default=[], metavar="NAME", help="actions to forbid")
    run.add_argument("--thread-id", default=None, metavar="ID")
    run.add_argument(
        "--provider",
        default=None,
        metavar="NAME",
        help="who serves the model: gemini (default), anthropic (Claude), openai, or "
        "openai-compatible (any OpenAI-compatible server: LM Studio, Ollama, vLLM, llama.cpp); "
        "left out, a model id starting claude- means anthropic and gpt- openai; kept for "
        "approve/deny/resume",
    )
    run.add_argument(
        "--tool-version",
        default=None,
        metavar="VERSION",
        help="anthropic: the computer tool to send instead of the model's own "
        "(computer_toolset_20260801, computer_20251124, computer_20250124); kept for "
        "approve/deny/resume",
    )
    run.add_argument(
        "--model",
        default=None,
        help="model id: for Gemini e.g. gemini-3.5-flash (its family decides the action set); "
        "for openai-compatible the id the server lists at BASE_URL/models",
    )
    run.add_argument(
        "--base-url",
        default=None,
        metavar="URL",
        help="openai-compatible: the server's address, e.g. http://localhost:1234/v1 (LM Studio), "
        "http://localhost:11434/v1 (Ollama), http://localhost:8000/v1 (vLLM); the API key, if "
        "any, comes from OPENAI_API_KEY and is never recorded",
    )
    run.add_argument(
        "--dialect",
        default=None,
        metavar="NAME",
        help="openai-compatible: how the model answers: tools, qwen3-vl, qwen2.5-vl, ui-tars, "
        "holo, ui-venus, opencua (run vnc-use calibrate to check) "
        "(default: from the model id, else tools)",
    )
    run.add_argument(
        "--keep-screenshots",
        type=_non_negative_int,
        default=None,
        metavar="N",
        help="send the model only the last N screenshots (default: the provider's, 3 for "
        "Gemini and Claude, 2 for openai-compatible)",
    )
    run.add_argument(
        "--confirm",
        nargs="+",
        default=[],
        metavar="NAME",
        help="actions that always wait for your approval (vnc-use approve/deny), for every "
        "provider and on top of the model's own requests: action names, e.g. type press_key, "
        "or all",
    )
    run.add_argument(
        "--environment",
        choices=("browser", "desktop"),
        default=None,
        help="what the model is driving (default: the model family's; desktop for 3.5 Flash)",
    )
    run.add_argument(
        "--model-family",
        default=None,
        metavar="NAME",
        help="action set for a model id vnc-use does not know: gemini-2.5, gemini-3, gemini-3.5",
    )
    run.add_argument(
        "--keep-browser-actions",
        action="store_true",
        help="on a desktop, keep navigate/search/go_back/... (2.5 and 3 Flash families)",
    )
    run.add_argument(
        "--api-version",
        default=None,
        metavar="VERSION",
        help="Gemini API version requests go to (default: the GEMINI_API_VERSION environment "
        "variable, else v1beta, the version of Google's Computer Use examples); kept for "
        "approve/deny/resume",
    )
    run.add_argument(
        "--stall-after",
        type=_non_negative_int,
        default=None,
        metavar="N",
        help="tell the model when its last N actions changed nothing on the screen, and stop "
        "the run as stuck (exit 8) if it goes on; 0: off (default 4)",
    )
    add_cost_options(run)
    run.add_argument("--no-hitl", action="store_true", help="never ask: deny risky actions")
    run.add_argument(
        "--no-initial-screenshot", action="store_true", help="send the task without a screenshot"
    )
    run.add_argument(
        "--sensitive",
        action="append",
        default=[],
        metavar="NAME",
        help="a secret the model types as {{NAME}}: the value comes from the environment "
        "variable VNC_USE_SECRET_NAME and never appears in logs, reports or checkpoints",
    )
    _common(run)
    server_commands.add_server_options(run, run=True)
    fleet_commands.add_fleet_options(run, run=True)
    run.set_defaults(func=command)

    _register_replay(sub)

    for name, text in (
        ("approve", "approve the action a run is waiting on, and continue"),
        ("deny", "deny the action a run is waiting on (the run stops)"),
        ("resume", "continue a run that stopped on an error or a crash"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("thread_id", metavar="ID")
        p.add_argument("--vnc", default=None, metavar="HOST::PORT", help="default: the run's own")
        rdp_commands.add_options(p, default_help="default: the run's own (a new bridge)")
        if name == "resume":
            p.add_argument(
                "--max-cost",
                type=positive_usd,
                default=None,
                metavar="USD",
                help="a new cost cap: a run that stopped at its cap (cost_limit) goes on up to "
                "this one (the cost so far counts)",
            )
        _common(p)
        server_commands.add_server_options(p)
        fleet_commands.add_fleet_options(p)
        p.set_defaults(func=command)


def _register_replay(sub: Any) -> None:
    p = sub.add_parser(
        "replay",
        help="perform a recorded run's actions again without the model; stop (exit 7) when "
        "the screen is not what it was",
    )
    p.add_argument("thread_id", metavar="THREAD", help="the recorded run (in --runs-dir)")
    p.add_argument(
        "--vnc", default=None, metavar="HOST::PORT", help="the desktop (default: the run's own)"
    )
    rdp_commands.add_options(p, default_help="default: the run's own (a new bridge)")
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
    """Run one of the four commands; returns the exit code of the run's outcome."""
    if getattr(args, "server", None):  # the run happens on a LangGraph Server
        return server_commands.command(args)
    if getattr(args, "fleet", None):  # a worker of the fleet does the run
        return fleet_commands.command(args)
    if getattr(args, "screen_region", None) is not None:  # a bad one fails before anything
        ScreenRegion.parse(args.screen_region)
    saved = None if args.command == "run" else _run_settings(args)
    with rdp_commands.bridge_for_run(args, saved) as bridge:
        desktop_commands.use_local_desktop(args)  # no --vnc, no --rdp: the local desktop
        with desktop_commands.live_view_for_run(args):
            result = _drive(args, saved, bridge)
    if not args.json:  # with --json the run_ended / run_paused event says it all
        _report(result)
    # an error or a safety block: once, on stderr, whatever the output mode
    if result.status in ("error", "blocked") and result.error:
        print(f"vnc-use: {result.error}", file=sys.stderr)
    return EXIT_CODES.get(result.status, EXIT_ERROR)


def _report(result: RunResult) -> None:
    steps = f"{result.steps} step" + ("" if result.steps == 1 else "s")
    print(f"status: {result.status} (thread {result.thread_id}, {steps})")
    print(f"cost: {format_cost(result.cost_usd)}")
    if result.final_text:
        print(f"answer: {result.final_text}")
    if result.error and result.status not in ("error", "blocked"):  # denied, interrupted
        print(f"reason: {result.error}")
    if result.pending_call:
        p = result.pending_call
        print(f"waiting for approval of {p['name']}({json.dumps(p['args'])}): {p['explanation']}")
        if p.get("error"):
            print(f"  the call is invalid and will not run even if approved: {p['error']}")
        print(
            f"  approve: vnc-use approve {result.thread_id}   deny: vnc-use deny {result.thread_id}"
        )
    print(f"run folder: {result.run_dir}")


def _run_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Settings of an existing run (from its run.json), for approve/deny/resume."""
    from vnc_use.record import run_record

    path = run_record.path_of(Path(args.runs_dir) / args.thread_id)
    if not path.exists():
        raise ConfigError(f"no run {args.thread_id!r} in {args.runs_dir} (looked for {path})")
    return run_record.read(path.parent).settings()


def _make_agent(args: argparse.Namespace, saved: dict[str, Any] | None, bridge: Any) -> Any:
    from vnc_use.agent import VncUseAgent
    from vnc_use.providers.registry import planner_from_settings
    from vnc_use.replay.planner import planner_from_run

    saved = saved or {}
    if args.vnc_password:
        print(
            "vnc-use: warning: --vnc-password is visible to other users in the process list; "
            "prefer the VNC_PASSWORD environment variable",
            file=sys.stderr,
        )
    password = (
        args.vnc_password
        or desktop_commands.managed_password(args.vnc or saved.get("vnc_server"))
        or config.vnc_password()
        or None
    )
    names = getattr(args, "sensitive", None) or saved.get("sensitive_names") or []
    kwargs: dict[str, Any] = {
        "vnc_server": args.vnc or saved.get("vnc_server"),
        "vnc_password": password,
        "runs_dir": args.runs_dir,
        "on_event": progress.for_args(args),
        "sensitive_text": _sensitive_values(names),
        "reconnect_window_s": 30.0 if args.reconnect_window is None else args.reconnect_window,
        # Not secrets: the run keeps them (run.json) so approve/deny/resume reconnect alike.
        "vnc_username": args.vnc_user or config.vnc_username() or saved.get("vnc_username") or None,
        "vnc_ca": args.vnc_ca or saved.get("vnc_ca") or None,
        "connect_timeout": args.connect_timeout or saved.get("connect_timeout") or 5.0,
        "checkpointer": _checkpointer(args, saved),
        "lease_timeout": args.lease_timeout,
        "video": not args.no_video,
        "video_fps": args.video_fps,
    }
    if bridge is not None:
        kwargs.update(rdp_commands.agent_kwargs(bridge))
    if args.command == "run":
        kwargs.update(
            screen_region=args.screen_region,
            step_limit=args.step_limit,
            seconds_timeout=args.timeout,
            excluded_actions=args.exclude or None,
            hitl_mode=not args.no_hitl,
            include_initial_screenshot=not args.no_initial_screenshot,
            keep_screenshots=args.keep_screenshots,
            confirm_actions=args.confirm,
            stall_after=args.stall_after,
            max_cost=args.max_cost,
            price=args.price,
        )
        if args.model:
            kwargs["model"] = args.model
        kwargs.update(
            provider=args.provider,
            base_url=args.base_url,
            dialect=args.dialect,
            environment=args.environment,
            model_family=args.model_family,
            keep_browser_actions=args.keep_browser_actions,
            api_version=args.api_version,
            tool_version=args.tool_version,
        )
        return _warn(VncUseAgent(**kwargs))
    kwargs.update(_kept_settings(args, saved))
    if args.command == "replay":
        # the model a --heal hands the task to: the recorded run's own (a replay's healer)
        model = (saved.get("replay") or {}).get("heal_planner") or saved
        if args.heal:
            kwargs["planner"] = planner_from_settings(model)
        return VncUseAgent(**kwargs)
    # the run's own planner (provider, model, tools, API version, server), so the model is
    # sent the same tools at the same place after approve/deny/resume
    kwargs["planner"] = planner_from_run(saved)
    return VncUseAgent(**kwargs)


_KEPT = (
    "step_limit",
    "seconds_timeout",
    "hitl_mode",
    "include_initial_screenshot",
    "screen_region",
    "keep_screenshots",
    "confirm_actions",
    "stall_after",
    "max_cost",
    "price",
)
"""What a run keeps in run.json that approve/deny/resume use again."""


def _kept_settings(args: argparse.Namespace, saved: dict[str, Any]) -> dict[str, Any]:
    """The run's own settings from run.json; ``resume --max-cost`` gives a new cap."""
    kept = {key: saved[key] for key in _KEPT if key in saved}
    if getattr(args, "max_cost", None) is not None:
        kept["max_cost"] = args.max_cost
    return kept


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


def _sensitive_values(names: list[str]) -> dict[str, str]:
    """The secret values named on the command line, read from ``VNC_USE_SECRET_<NAME>``."""
    values = {}
    for name in names:
        var, value = config.sensitive_value(name)
        if not value:
            raise ConfigError(f"--sensitive {name}: set the environment variable {var} first")
        values[name] = value
    return values


@contextmanager
def _stop_on_ctrl_c(agent: Any) -> Iterator[None]:
    """First Ctrl-C: stop at the next step boundary (resumable). Second: stop at once."""

    def handler(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        print(
            "\nvnc-use: stopping after this step (Ctrl-C again to stop at once)",
            file=sys.stderr,
            flush=True,
        )
        agent.request_stop()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _drive(args: argparse.Namespace, saved: dict[str, Any] | None, bridge: Any) -> RunResult:
    with _make_agent(args, saved, bridge) as agent, _stop_on_ctrl_c(agent):
        if args.command == "run":
            result: RunResult = agent.run(task=args.task, thread_id=args.thread_id)
        elif args.command == "approve":
            result = agent.approve(args.thread_id)
        elif args.command == "deny":
            result = agent.deny(args.thread_id)
        elif args.command == "replay":
            result = agent.replay(
                args.thread_id,
                replay_id=args.replay_id,
                tolerance=DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance,
                speed=args.speed,
                from_step=args.from_step,
                masks=args.mask,
                heal=args.heal,
            )
        else:
            result = agent.resume(args.thread_id)
        while result.status == "awaiting_approval" and result.pending_call and sys.stdin.isatty():
            allowed = ask_approval(result.pending_call)
            result = agent.approve(result.thread_id) if allowed else agent.deny(result.thread_id)
        return result
