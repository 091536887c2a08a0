"""What the run commands share whatever executes the run: the options a door was given, the
executor's refusal, one approve loop and one outcome printer.

``run`` / ``approve`` / ``deny`` / ``resume`` pick an executor (this process, ``--server URL``,
``--fleet URL``: :mod:`vnc_use.runs.executor`), ask it to :meth:`refuse` what it cannot honour
(one line, exit 2, before anything starts), call its verb, ask a person at the terminal about
each approval the run then waits for (:func:`drive`), and print the outcome the same way
(:func:`print_outcome`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vnc_use.cli.ask import ask_approval
from vnc_use.cli.common import EXIT_CODES, EXIT_ERROR
from vnc_use.errors import ConfigError
from vnc_use.record.money import format_cost
from vnc_use.runs.spec import where_settings
from vnc_use.status import RunStatus

if TYPE_CHECKING:
    from vnc_use.agent.state import RunResult
    from vnc_use.runs.executor import Executor
    from vnc_use.runs.spec import RunSpec

__all__ = ["DOOR_DEFAULTS", "check_refusal", "drive", "exit_code", "given_options", "print_outcome"]

DOOR_DEFAULTS: dict[str, Any] = {
    "vnc_password": None,
    "view": False,
    "server": None,
    "fleet": None,
    "label": None,
    "checkpointer": None,
    **{s.name: f.default if s.cli_default else None for f, s in where_settings()},
}
"""The run commands' options that say where and how a run executes (the rest go into the
run's spec, which every executor honours), with their defaults: what an executor may refuse.
Besides the door's own (the executor, the live view, a password, the storage), they are the
settings marked ``where`` (:func:`~vnc_use.runs.spec.where_settings`), as their options
default."""


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options of :data:`DOOR_DEFAULTS` given a value other than their default."""
    found = {}
    for name, default in DOOR_DEFAULTS.items():
        value = getattr(args, name, default)
        if value != default and value is not None:
            found[name] = value
    return found


def check_refusal(executor: Executor, spec: RunSpec | None, args: argparse.Namespace) -> None:
    """The executor's refusal of the options given (one line, exit 2), before anything starts."""
    given = given_options(args)
    given.pop({"served": "server", "fleet": "fleet"}.get(executor.kind, ""), None)  # its own
    line = executor.refuse(spec, given, args.command)
    if line:
        raise ConfigError(line)


def drive(
    executor: Executor, first: Callable[[], RunResult], *, interactive: bool | None = None
) -> RunResult:
    """The verb's result, then a person's answer to each approval the run waits for while
    standard input is a terminal (``interactive``)."""
    ask = sys.stdin.isatty() if interactive is None else interactive
    result = first()
    while result.status == RunStatus.AWAITING_APPROVAL and result.pending_call and ask:
        allowed = ask_approval(result.pending_call)
        result = executor.answer(result.thread_id, "approve" if allowed else "deny")
    return result


def print_outcome(result: RunResult, executor: Executor, args: argparse.Namespace) -> int:
    """Print the outcome (unless ``--json``: the events said it) and, for an error or a safety
    block, its one line on stderr; the exit code of its status."""
    if not getattr(args, "json", False):
        steps = f"{result.steps} step" + ("" if result.steps == 1 else "s")
        where = executor.where(result)
        print(f"status: {result.status} (thread {result.thread_id}{where}, {steps})")
        print(f"cost: {format_cost(result.cost_usd)}")
        if result.final_text:
            print(f"answer: {result.final_text}")
        if result.error and result.status not in ("error", "blocked"):  # denied, interrupted
            print(f"reason: {result.error}")
        if result.pending_call:
            _print_pending(result, executor.flags)
        if result.status == RunStatus.AWAITING_HUMAN:
            _print_human(result, executor.flags)
        line = executor.report_line(result)
        if line:
            print(line)
    elif executor.kind == "fleet":  # no events came here: the outcome is the one line
        kept = getattr(executor, "last_outcome", None) or _as_json(result)
        print(json.dumps(kept, ensure_ascii=False))
    if result.status in ("error", "blocked") and result.error:
        print(f"vnc-use: {_with_resume(result, executor, args)}", file=sys.stderr)
    return exit_code(result)


def _with_resume(result: RunResult, executor: Executor, args: argparse.Namespace) -> str:
    """An ``error`` run's message with the command that continues it (when it names none)."""
    if result.status != "error":
        return str(result.error)
    command = f"vnc-use resume {result.thread_id}"
    if executor.flags:
        command += f" {executor.flags}"
    elif getattr(args, "runs_dir", "runs") != "runs":
        command += f" --runs-dir {args.runs_dir}"
    if command.split(" --")[0] in str(result.error):
        return str(result.error)
    return f"{result.error} (continue it with: {command})"


def exit_code(result: RunResult) -> int:
    return EXIT_CODES.get(result.status, EXIT_ERROR)


def _print_pending(result: RunResult, flags: str) -> None:
    p = result.pending_call or {}
    print(
        f"waiting for approval of {p.get('name')}({json.dumps(p.get('args'))}): "
        f"{p.get('explanation', '')}"
    )
    if p.get("error"):
        print(f"  the call is invalid and will not run even if approved: {p['error']}")
    t = result.thread_id
    flag = f" {flags}" if flags else ""
    print(f"  approve: vnc-use approve{flag} {t}   deny: vnc-use deny{flag} {t}")


def _print_human(result: RunResult, flags: str) -> None:
    """Who the run waits for: the model's question, or the person holding its desktop."""
    human = result.human or {}
    t = result.thread_id
    flag = f" {flags}" if flags else ""
    if human.get("asked_by") == "model":
        print(f"the model asks for a person: {human.get('question') or '(no question given)'}")
        print(f'  answer: vnc-use handback{flag} {t} --note "your answer"')
        return
    holder = human.get("holder") or "a person"
    print(f"a person has the desktop: {holder}")
    print(f"  use it: vnc-use view --interactive {t}   hand it back: vnc-use handback{flag} {t}")


def _as_json(result: RunResult) -> dict[str, Any]:
    from dataclasses import asdict

    data = asdict(result)
    data["status"] = RunStatus(result.status).value
    data.pop("transcript", None)
    return data
