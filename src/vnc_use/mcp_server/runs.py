"""``run_task``, ``approve_run`` and ``deny_run``: vnc-use's own durable runs, for MCP clients.

Each call builds a :class:`~vnc_use.agent.VncUseAgent` on the session's desktop and runs
(or answers) one run; the run is checkpointed in the runs folder like any other, so a run
waiting for approval can be answered by a later tool call, another MCP server, or a person
with ``vnc-use approve ID``. Nothing here imports the MCP SDK.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vnc_use.agent.state import RunResult
from vnc_use.errors import ConfigError
from vnc_use.mcp_server.session import DesktopSession
from vnc_use.record import run_record
from vnc_use.record.report import REPORT_NAME
from vnc_use.status import RunStatus

__all__ = ["DEFAULT_STEP_LIMIT", "StepListener", "outcome", "run_agent"]

DEFAULT_STEP_LIMIT = 40

StepListener = Callable[[int, str], None]
"""Called once per step of a run: the step number and one line saying what was done."""

# What a run kept in run.json that approve/deny need again (as `vnc-use approve` uses them).
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
)


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


def _agent(session: DesktopSession, on_step: StepListener | None, **kwargs: Any) -> Any:
    from vnc_use.agent import VncUseAgent

    t = session.target
    return VncUseAgent(
        vnc_server=t.server,
        vnc_password=t.password,
        vnc_username=t.username,
        vnc_ca=t.ca_file,
        connect_timeout=t.connect_timeout,
        runs_dir=session.runs_dir,
        video=session.video,
        video_fps=session.video_fps,
        **_bridge_kwargs(session),
        on_event=_listener(on_step),
        **kwargs,
    )


def _bridge_kwargs(session: DesktopSession) -> dict[str, Any]:
    """Behind an RDP bridge: its keyboard limits and settings, and no waiting to reconnect
    once the RDP session ended."""
    t = session.target
    if not t.rdp:
        return {}
    return {
        "keyboard": t.keyboard,
        "rdp": t.rdp,
        "lost_reason": t.lost_reason,
        "reconnect_window_s": 0.0,
    }


def run_agent(
    session: DesktopSession,
    *,
    task: str | None = None,
    thread_id: str | None = None,
    decision: str | None = None,
    model: str | None = None,
    provider: str | None = None,
    step_limit: int | None = None,
    max_cost: float | None = None,
    on_step: StepListener | None = None,
) -> RunResult:
    """Start a run for ``task``, or answer the approval ``thread_id`` waits on (``decision``
    ``"approve"`` or ``"deny"``; ``"status"`` changes nothing); returns the run's outcome.

    The session's lock is held throughout: the low-level tools wait while a run drives the
    desktop.
    """
    with session.lock:
        if task is not None:
            if step_limit is not None and step_limit < 1:
                raise ConfigError(f"step_limit {step_limit} must be at least 1")
            kwargs: dict[str, Any] = {"provider": provider, "model": model}
            if step_limit is not None:
                kwargs["step_limit"] = step_limit
            if max_cost is not None:
                kwargs["max_cost"] = max_cost
            with _agent(session, on_step, **kwargs) as agent:
                result: RunResult = agent.run(task=task)
                return result
        if thread_id is None or decision not in ("approve", "deny", "status"):
            raise ConfigError("give a task, or a thread_id to approve or deny")
        saved = _saved(session.runs_dir, thread_id)
        from vnc_use.replay.planner import planner_from_run

        kwargs = {k: saved[k] for k in _KEPT if k in saved}
        with _agent(session, on_step, planner=planner_from_run(saved), **kwargs) as agent:
            answers = {"approve": agent.approve, "deny": agent.deny, "status": agent.result}
            result = answers[decision](thread_id)
            return result


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
