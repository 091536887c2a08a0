"""How a run stands after a leg, and what its run folder records of that.

Shared by every host of the graph: :class:`~vnc_use.runs.agent.VncUseAgent` after each
invocation, and the LangGraph Server factory (:mod:`vnc_use.runs.serve`) when a served leg
pauses or ends. Both read the checkpointed state (``values``, the next nodes, the pending
interrupts) and leave the same trace in the run folder: ``run_paused`` (waiting for a person)
or ``run_ended`` with the status, and the status in ``run.json`` (the report follows those
events: :class:`~vnc_use.record.report.ReportOnRunEnd`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vnc_use.agent.costs import run_cost
from vnc_use.agent.state import RunResult
from vnc_use.record import run_record
from vnc_use.record.folder import RunFolder
from vnc_use.status import RunStatus

__all__ = ["record_outcome", "run_outcome"]


def run_outcome(
    values: dict[str, Any],
    next_nodes: Sequence[str],
    interrupts: Sequence[Any],
    *,
    thread_id: str,
    run_dir: str,
    error: str | None = None,
    interrupted: bool = False,
    resume_hint: str = "resume()",
) -> RunResult:
    """The run's result from its checkpointed state; ``error`` is what ended the leg (an
    infrastructure failure), ``interrupted`` a stop on request. ``interrupts`` are the pending
    interrupt values (the approval request)."""
    pending: dict[str, Any] | None = None
    status = RunStatus(values.get("status", RunStatus.RUNNING))
    if error is not None:
        status = RunStatus.ERROR
    elif interrupted and next_nodes:
        status = RunStatus.INTERRUPTED
        error = f"stopped on request; continue with 'vnc-use resume {thread_id}'"
    elif interrupts:
        status = RunStatus.AWAITING_APPROVAL
        pending = dict(interrupts[0])
    elif next_nodes or status == RunStatus.RUNNING:  # stopped mid-way (a crash): resumable
        status = RunStatus.ERROR
        error = f"the run stopped before finishing; continue it with {resume_hint}"
    return RunResult(
        status=status,
        thread_id=thread_id,
        run_dir=run_dir,
        final_text=values.get("final_text", ""),
        transcript=list(values.get("transcript", [])),
        steps=values.get("step", 0),
        error=error or values.get("error"),
        pending_call=pending,
        cost_usd=run_cost(values),
        human=dict(values["human"])
        if status == RunStatus.AWAITING_HUMAN and values.get("human")
        else None,
    )


def record_outcome(folder: RunFolder, result: RunResult) -> None:
    """``run_paused`` / ``run_ended`` in the events (the report is written on it) and the
    status in ``run.json``."""
    paused = result.status in (RunStatus.AWAITING_APPROVAL, RunStatus.AWAITING_HUMAN)
    waiting = {"human": result.human} if result.human else {}
    folder.event(
        "run_" + ("paused" if paused else "ended"),
        status=result.status.value,
        steps=result.steps,
        final_text=result.final_text,
        error=result.error,
        pending_call=result.pending_call,
        cost_usd=result.cost_usd,
        **waiting,
    )
    # run.json says how the run stands too (the settings file a person opens first)
    run_record.update(
        folder,
        status=result.status.value,
        reason=result.error,
        cost_usd=result.cost_usd,
        human=result.human,
    )
