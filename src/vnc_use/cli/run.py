"""``vnc-use run``, ``approve``, ``deny``, ``resume``: drive runs and answer approvals."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from vnc_use.cli.common import EXIT_CODES, EXIT_ERROR, add_runs_dir
from vnc_use.errors import ConfigError
from vnc_use.types import RunResult


def _common(p: argparse.ArgumentParser) -> None:
    add_runs_dir(p)
    p.add_argument(
        "--vnc-password",
        default=None,
        help="VNC password (prefer the VNC_PASSWORD environment variable: argv is visible)",
    )
    p.add_argument("--quiet", action="store_true", help="print only the final result")


def register(sub: Any) -> None:
    """Add ``run``, ``approve``, ``deny`` and ``resume`` to the sub-command parsers."""
    run = sub.add_parser("run", help="start a run for a task")
    run.add_argument("--vnc", required=True, metavar="HOST::PORT", help="VNC server address")
    run.add_argument("--task", required=True, help="what to do, in plain words")
    run.add_argument("--step-limit", type=int, default=40, metavar="N")
    run.add_argument("--timeout", type=float, default=300.0, metavar="S", help="seconds budget")
    run.add_argument("--exclude", nargs="+", default=[], metavar="NAME", help="actions to forbid")
    run.add_argument("--thread-id", default=None, metavar="ID")
    run.add_argument("--model", default=None, help="Gemini model id")
    run.add_argument("--no-hitl", action="store_true", help="never ask: deny risky actions")
    run.add_argument(
        "--no-initial-screenshot", action="store_true", help="send the task without a screenshot"
    )
    _common(run)
    run.set_defaults(func=command)

    for name, text in (
        ("approve", "approve the action a run is waiting on, and continue"),
        ("deny", "deny the action a run is waiting on (the run stops)"),
        ("resume", "continue a run that stopped on an error or a crash"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("thread_id", metavar="ID")
        p.add_argument("--vnc", default=None, metavar="HOST::PORT", help="default: the run's own")
        _common(p)
        p.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """Run one of the four commands; returns the exit code of the run's outcome."""
    result = _drive(args)
    _report(result)
    return EXIT_CODES.get(result.status, EXIT_ERROR)


class Printer:
    """Prints events as one line each."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    def __call__(self, event: dict[str, Any]) -> None:
        if self.quiet:
            return
        line = self.format(event)
        if line:
            print(line, flush=True)

    @staticmethod
    def format(e: dict[str, Any]) -> str | None:
        kind = e.get("event")
        if kind == "run_started":
            return f"run {e['thread_id']} on {e['vnc_server']}: {e['task']}"
        if kind == "model_response":
            calls = ", ".join(c["name"] for c in e.get("calls", [])) or "no actions"
            text = f" - {e['text']}" if e.get("text") else ""
            return f"  model #{e['n']} ({e['latency_ms']:.0f} ms): {calls}{text}"
        if kind == "action":
            args = ", ".join(f"{k}={v!r}" for k, v in e.get("args", {}).items())
            px = e.get("pixels") or {}
            where = f" -> px ({px['x']}, {px['y']})" if "x" in px else ""
            status = f" ERROR {e['error']}" if e.get("error") else ""
            return (
                f"  step {e['step']}: {e['name']}({args}){where} "
                f"[{e['duration_ms']:.0f} ms]{status}"
            )
        if kind in ("approved", "denied"):
            return f"  {kind}: {e.get('name')}"
        if kind == "error":
            return f"  error: {e['message']}"
        return None


def _ask(pending: dict[str, Any]) -> bool:
    print(f"\nThe model asks for confirmation before {pending['name']}({pending['args']}):")
    print(f"  {pending['explanation']}")
    if pending.get("pixels"):
        print(f"  target pixels: {pending['pixels']}")
    while True:
        try:
            answer = input("Allow it? [y/n] ").strip().lower()
        except EOFError:
            return False
        if answer in ("y", "yes"):
            return True
        if answer in ("n", "no"):
            return False


def _report(result: RunResult) -> None:
    print(f"status: {result.status} (thread {result.thread_id}, {result.steps} steps)")
    if result.final_text:
        print(f"answer: {result.final_text}")
    if result.error:
        print(f"error: {result.error}")
    if result.pending_call:
        p = result.pending_call
        print(f"waiting for approval of {p['name']}({json.dumps(p['args'])}): {p['explanation']}")
        print(
            f"  approve: vnc-use approve {result.thread_id}   deny: vnc-use deny {result.thread_id}"
        )
    print(f"run folder: {result.run_dir}")


def _run_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Settings of an existing run (from its run.json), for approve/deny/resume."""
    path = Path(args.runs_dir) / args.thread_id / "run.json"
    if not path.exists():
        raise ConfigError(f"no run {args.thread_id!r} in {args.runs_dir} (looked for {path})")
    saved: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return saved


def _make_agent(args: argparse.Namespace, saved: dict[str, Any] | None) -> Any:
    from vnc_use.agent import VncUseAgent

    saved = saved or {}
    password = args.vnc_password or os.environ.get("VNC_PASSWORD") or None
    kwargs: dict[str, Any] = {
        "vnc_server": args.vnc or saved.get("vnc_server"),
        "vnc_password": password,
        "runs_dir": args.runs_dir,
        "on_event": Printer(args.quiet),
    }
    if args.command == "run":
        kwargs.update(
            step_limit=args.step_limit,
            seconds_timeout=args.timeout,
            excluded_actions=args.exclude or None,
            hitl_mode=not args.no_hitl,
            include_initial_screenshot=not args.no_initial_screenshot,
        )
        if args.model:
            kwargs["model"] = args.model
    else:
        for key in ("step_limit", "seconds_timeout", "hitl_mode", "include_initial_screenshot"):
            if key in saved:
                kwargs[key] = saved[key]
        if saved.get("excluded_actions"):
            kwargs["excluded_actions"] = saved["excluded_actions"]
        if saved.get("model"):
            kwargs["model"] = saved["model"]
    return VncUseAgent(**kwargs)


def _drive(args: argparse.Namespace) -> RunResult:
    saved = None if args.command == "run" else _run_settings(args)
    with _make_agent(args, saved) as agent:
        if args.command == "run":
            result: RunResult = agent.run(task=args.task, thread_id=args.thread_id)
        elif args.command == "approve":
            result = agent.approve(args.thread_id)
        elif args.command == "deny":
            result = agent.deny(args.thread_id)
        else:
            result = agent.resume(args.thread_id)
        while result.status == "awaiting_approval" and result.pending_call and sys.stdin.isatty():
            allowed = _ask(result.pending_call)
            result = agent.approve(result.thread_id) if allowed else agent.deny(result.thread_id)
        return result
