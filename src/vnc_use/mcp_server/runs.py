"""``run_task``, ``approve_run`` and ``deny_run``: vnc-use's own durable runs, for MCP clients.

Each call runs (or answers) one run through a :class:`~vnc_use.runs.executor.LocalExecutor`
with a run spec (the session's, with the settings the call chose, :func:`tool_settings`; an
answer: the run's recorded spec) on the session's desktop; the run is checkpointed in the runs
folder like any other, so a run waiting for approval can be answered by a later tool call, another
MCP server, or a person with ``vnc-use approve ID``. Nothing here imports the MCP SDK.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import Field, replace
from pathlib import Path
from typing import Any

from vnc_use.agent.state import RunResult
from vnc_use.desktops.target import DesktopTarget
from vnc_use.errors import ConfigError
from vnc_use.mcp_server.session import DesktopSession
from vnc_use.record import run_record
from vnc_use.record.report import REPORT_NAME
from vnc_use.runs.executor import LocalExecutor
from vnc_use.runs.spec import MODEL_FIELDS, RunSpec
from vnc_use.setting import Setting, settings_of
from vnc_use.status import RunStatus

__all__ = ["DEFAULT_STEP_LIMIT", "StepListener", "outcome", "run_agent", "tool_settings"]

DEFAULT_STEP_LIMIT: int = RunSpec.step_limit
"""A run's step limit when neither the call nor ``vnc-use mcp --step-limit`` gives one (the
run spec's default)."""

StepListener = Callable[[int, str], None]
"""Called once per step of a run: the step number and one line saying what was done."""


def _listener(on_step: StepListener | None) -> Callable[[dict[str, Any]], None] | None:
    if on_step is None:
        return None

    def listener(event: dict[str, Any]) -> None:
        if event.get("event") != "action":
            return
        args = json.dumps(event.get("args") or {}, ensure_ascii=False)
        line = f"step {event.get('step')}: {event.get('name')}({args})"
        if event.get("error"):
            line += f" -> error: {event['error']}"
        on_step(int(event.get("step") or 0), line)

    return listener


def tool_settings(spec_class: type[RunSpec] = RunSpec) -> list[tuple[Field[Any], Setting]]:
    """The settings a ``run_task`` call may choose: the spec's fields marked ``tool`` (each
    with its one description, :mod:`vnc_use.setting`)."""
    return [(f, s) for f, s in settings_of(spec_class) if s.tool]


def _spec(session: DesktopSession, **given: Any) -> RunSpec:
    """A new run's spec: the session's (``vnc-use mcp``'s options) with the call's own
    settings (a call naming a provider or a model names the model; an openai-compatible one
    keeps ``vnc-use mcp --base-url`` unless it names its own)."""
    base = session.spec or RunSpec(runs_dir=str(session.runs_dir))
    allowed = {f.name for f, _ in tool_settings(type(base))}
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise ConfigError(f"run_task has no setting {unknown[0]!r}: {', '.join(sorted(allowed))}")
    changes = {k: v for k, v in given.items() if v is not None}
    if "provider" in changes or "model" in changes:
        fresh = RunSpec()
        for name in MODEL_FIELDS:  # the base's model settings are for the base's model
            changes.setdefault(name, getattr(fresh, name))
        changes.setdefault("provider", None)
        changes.setdefault("model", None)
        if changes["provider"] == "openai-compatible" and "base_url" not in given:
            changes["base_url"] = base.base_url  # the server's address: `vnc-use mcp --base-url`
    spec = replace(base, runs_dir=str(session.runs_dir), **changes)
    spec.check()
    return spec


def _executor(
    session: DesktopSession, on_step: StepListener | None, planner: Any = None
) -> LocalExecutor:
    """The executor of the session's runs: in this process, on the session's desktop."""
    return LocalExecutor(
        session.runs_dir, reached=session.target, planner=planner, on_event=_listener(on_step)
    )


def run_agent(
    session: DesktopSession,
    *,
    task: str | None = None,
    thread_id: str | None = None,
    decision: str | None = None,
    on_step: StepListener | None = None,
    **settings: Any,
) -> RunResult:
    """Start a run for ``task``, or answer the approval ``thread_id`` waits on (``decision``
    ``"approve"`` or ``"deny"``; ``"status"`` changes nothing); returns the run's outcome.
    ``settings`` are the run spec's settings a call may choose (those of :func:`tool_settings`:
    the provider, the model, the step limit, the cost cap); None: the session's.

    The session's lock is held throughout: the low-level tools wait while a run drives the
    desktop.
    """
    with session.lock:
        if task is not None:
            step_limit = settings.get("step_limit")
            if step_limit is not None and step_limit < 1:
                raise ConfigError(f"step_limit {step_limit} must be at least 1")
            spec = _spec(session, **settings)
            with _executor(session, on_step) as executor:
                return executor.start(spec, task)
        if thread_id is None or decision not in ("approve", "deny", "status"):
            raise ConfigError("give a task, or a thread_id to approve or deny")
        saved = _saved(session.runs_dir, thread_id)
        from vnc_use.replay.planner import planner_from_run

        recorded = RunSpec.from_run_json(saved)  # its budgets, approvals and model
        spec = replace(
            recorded,
            runs_dir=str(session.runs_dir),
            desktop=session_desktop(session),
            video=session.video,
            video_fps=session.video_fps,
        )
        planner = planner_from_run(saved)  # a replay's too
        with _executor(session, on_step, planner) as executor:
            if decision == "status":
                return executor.result(thread_id)
            return executor.answer(
                thread_id, "approve" if decision == "approve" else "deny", spec=spec
            )


def session_desktop(session: DesktopSession) -> DesktopTarget:
    """The desktop target of the session's runs (the session has reached it already)."""
    return session.spec.desktop if session.spec is not None else DesktopTarget()


def _saved(runs_dir: Path, thread_id: str) -> dict[str, Any]:
    record = run_record.load(runs_dir / thread_id)
    if record is None:
        raise ConfigError(f"no run {thread_id!r} in {runs_dir}")
    if record.is_mcp_session:
        raise ConfigError(f"{thread_id!r} is an MCP tool session, not a run: it has no approvals")
    return record.settings()


def outcome(result: RunResult) -> dict[str, Any]:
    """The run's outcome as the tools return it (JSON)."""
    report = Path(result.run_dir) / REPORT_NAME
    out: dict[str, Any] = {
        "status": result.status.value,
        "thread_id": result.thread_id,
        "final_text": result.final_text,
        "steps": result.steps,
        "cost_usd": result.cost_usd,
        "report": str(report.resolve()) if report.exists() else None,
        "run_dir": str(Path(result.run_dir).resolve()),
    }
    if result.error:
        out["error"] = result.error
    if result.status == RunStatus.AWAITING_APPROVAL and result.pending_call:
        p = result.pending_call
        out["pending_action"] = {
            "name": p.get("name"),
            "args": p.get("args"),
            "explanation": p.get("explanation"),
            "pixels": p.get("pixels"),
            "asked_by": p.get("asked_by", "model"),
        }
        out["next"] = (
            f"ask the person, then call approve_run or deny_run with thread_id "
            f"{result.thread_id!r} (or they run 'vnc-use approve {result.thread_id}')"
        )
    return out


def approval_question(result: RunResult) -> str:
    """What the person is asked (elicitation) about a run waiting for approval."""
    p = result.pending_call or {}
    args = json.dumps(p.get("args") or {}, ensure_ascii=False)
    text = f"vnc-use run {result.thread_id} asks before {p.get('name')}({args})"
    if p.get("explanation"):
        text += f": {p['explanation']}"
    if p.get("pixels"):
        text += f" (at pixels {p['pixels']})"
    return text + ". Allow it?"
