"""Running one task on one desktop: setup, the agent, the check.

:func:`run_task` is the unit an evaluation repeats. The agent's part goes through a
:class:`TaskRunner`: :class:`AgentRunner` runs :class:`~vnc_use.agent.VncUseAgent` in this
process; :class:`~vnc_use.evaluation.served.ServerRunner` sends the task to a LangGraph Server
as a thread (``run`` returns an :class:`AgentOutcome`, ``stop`` ends what runs).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from vnc_use.errors import VncUseError
from vnc_use.evaluation.desktops import EvalDesktop
from vnc_use.evaluation.results import Outcome, TaskResult
from vnc_use.evaluation.shell import Commands
from vnc_use.evaluation.tasks import Task
from vnc_use.runs.spec import RunSpec
from vnc_use.status import RunStatus

__all__ = [
    "AgentOutcome",
    "AgentRunner",
    "TaskRunner",
    "describe_spec",
    "outcome_for",
    "run_task",
    "task_spec",
]

#: Outcome of a run whose check failed, by the run's status.
_FAILED_AS: dict[str, Outcome] = {
    RunStatus.DONE: "failed",
    RunStatus.DENIED: "denied",
    RunStatus.AWAITING_APPROVAL: "denied",
    RunStatus.BLOCKED: "blocked",
    RunStatus.STEP_LIMIT: "budget",
    RunStatus.TIMEOUT: "budget",
    RunStatus.COST_LIMIT: "budget",
    RunStatus.STUCK: "stuck",
    RunStatus.FAILED: "failed",
}


@dataclass(frozen=True)
class AgentOutcome:
    """How the agent's run of a task ended."""

    status: str
    steps: int
    thread_id: str
    report: str | None
    error: str | None = None
    cost_usd: float | None = None
    """What the run's model calls cost (None: unknown)."""


class TaskRunner(Protocol):
    """Runs the agent on a task; thread-safe (one call per worker at a time)."""

    def run(
        self, task: Task, desktop: EvalDesktop, thread_id: str, say: Callable[[str], None]
    ) -> AgentOutcome:
        """Run ``task`` on ``desktop`` as run ``thread_id`` until it ends; ``say`` shows how
        it goes (one short line at a time)."""
        ...

    def stop(self) -> None:
        """Stop every run in progress at its next step boundary (status ``interrupted``)."""
        ...

    def describe(self) -> dict[str, Any]:
        """``provider`` and ``model`` (for summary.json)."""
        ...


def task_spec(base: RunSpec, task: Task, desktop: EvalDesktop, runs_dir: str) -> RunSpec:
    """The spec of one task's run: the evaluation's, with the task's own budgets (when it
    has them), on the task's desktop, its folder under ``runs_dir``."""
    return replace(
        base,
        step_limit=task.step_limit or base.step_limit,
        seconds_timeout=task.timeout or base.seconds_timeout,
        runs_dir=runs_dir,
        desktop=replace(base.desktop, vnc_server=desktop.server),
    )


class AgentRunner:
    """The task's run in this process (:class:`~vnc_use.runs.executor.LocalExecutor`), one
    executor per task.

    ``spec`` is what every task's run shares (the model, the default budgets, whether an
    action that asks for confirmation is approved: ``hitl_mode``; otherwise such an action
    ends the task as denied); each task's budgets and desktop go on top (:func:`task_spec`).
    """

    def __init__(self, runs_dir: Path, spec: RunSpec) -> None:
        self.runs_dir = runs_dir
        self.spec = spec
        self._live: set[Any] = set()
        self._lock = threading.Lock()
        self._stopped = False

    def describe(self) -> dict[str, Any]:
        return describe_spec(self.spec)

    def run(
        self, task: Task, desktop: EvalDesktop, thread_id: str, say: Callable[[str], None]
    ) -> AgentOutcome:
        from vnc_use.runs.executor import LocalExecutor

        def on_event(event: dict[str, Any]) -> None:
            if event.get("event") == "action":
                say(f"step {event.get('step')}: {event.get('name')}")

        spec = task_spec(self.spec, task, desktop, str(self.runs_dir))
        executor = LocalExecutor(
            self.runs_dir, reached=desktop.reached, vnc_password=desktop.password, on_event=on_event
        )
        with executor:
            with self._lock:
                if self._stopped:
                    return AgentOutcome(RunStatus.INTERRUPTED, 0, thread_id, None)
                self._live.add(executor)
            try:
                result = executor.start(spec, task.task, thread_id)
                while result.status == RunStatus.AWAITING_APPROVAL and not self._stopped:
                    result = executor.answer(thread_id, "approve")
            finally:
                with self._lock:
                    self._live.discard(executor)
        report = Path(result.run_dir) / "report.html"
        return AgentOutcome(
            str(result.status),
            result.steps,
            thread_id,
            str(report) if report.exists() else None,
            result.error,
            result.cost_usd,
        )

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            for executor in self._live:
                executor.request_stop()


def describe_spec(spec: RunSpec) -> dict[str, Any]:
    """``provider`` and ``model`` the spec chooses (for summary.json)."""
    settings = spec.planner().run_settings()
    return {
        "provider": spec.provider or settings.get("provider") or "gemini",
        "model": settings.get("model"),
    }


def outcome_for(status: str, check_passed: bool) -> Outcome:
    """The result's outcome from the run's status and whether the check passed. A run the
    model itself reported failed (``failed``) is never ``passed``: a success needs both the
    check and a model that did not say it failed."""
    if check_passed and status != RunStatus.FAILED:
        return "passed"
    return _FAILED_AS.get(RunStatus(status), "failed")


def run_task(
    task: Task,
    repeat: int,
    desktop: EvalDesktop,
    runner: TaskRunner,
    *,
    thread_id: str,
    log: Path,
    extra_env: dict[str, str],
    say: Callable[[str], None] = lambda _: None,
) -> TaskResult | None:
    """Setup, the agent, the check; None when the run was stopped before it ended."""
    started = time.monotonic()
    commands = Commands({**desktop.env, **extra_env}, log, cwd=desktop.home)

    def result(outcome: Outcome, **fields: Any) -> TaskResult:
        fields.setdefault("thread_id", thread_id)
        return TaskResult(
            id=task.id,
            repeat=repeat,
            success=outcome == "passed",
            outcome=outcome,
            seconds=round(time.monotonic() - started, 3),
            **fields,
        )

    try:
        for command in task.setup:
            say("setup")
            done = commands.run(command, task.command_timeout)
            if not done.ok:
                return result("setup_failed", error=f"setup {done.describe()}; see {log}")
        say("agent")
        try:
            run = runner.run(task, desktop, thread_id, say)
        except VncUseError as exc:  # the desktop or the model could not be reached
            return result("error", status=RunStatus.ERROR, error=str(exc))
        if run.status == RunStatus.INTERRUPTED:
            return None
        common = {
            "status": run.status,
            "steps": run.steps,
            "report": run.report,
            "cost_usd": run.cost_usd,
        }
        common["thread_id"] = run.thread_id  # a server names its own threads
        if run.status == RunStatus.ERROR:
            return result("error", error=run.error, **common)
        say("check")
        check = commands.run(task.check, task.command_timeout)
        problems = [] if check.ok else [f"check {check.describe()}"]
        if run.error and (problems or run.status == RunStatus.FAILED):
            problems.append(run.error)
        error = "; run: ".join(p for p in problems if p) or None
        return result(outcome_for(run.status, check.ok), error=error, **common)
    finally:
        commands.stop()
