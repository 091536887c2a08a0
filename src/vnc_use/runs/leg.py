"""One life of a leg, and the one writer of ``run.json``.

A leg is one stretch of a run in one process: lease the desktop, open the run folder (its
listeners, its redaction), write ``run.json`` (the first leg), reach and connect the desktop,
record a video segment, run the graph, record the outcome, close. Every host of the graph
walks it: :class:`~vnc_use.runs.agent.VncUseAgent` (this process, ``eval``, MCP ``run_task``,
the fleet's workers) and the LangGraph Server factory (:mod:`vnc_use.runs.serve`).

:func:`run_record_of` is the one place a run's ``run.json`` is composed, for every kind of run
(``local``, ``served``, ``fleet``, the MCP tool session's ``mcp-session``): the same keys
whatever wrote it (:data:`RECORD_KEYS`; a value the run does not have is null), the run's
spec as given (:meth:`RunSpec.to_record`) with what the run resolved on top (the planner's
settings, the budgets it uses, where its desktop is and how it was reached).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from vnc_use.record import run_record
from vnc_use.runs.spec import RunSpec

if TYPE_CHECKING:
    from vnc_use.agent.context import AgentSettings
    from vnc_use.record.folder import RunFolder

__all__ = ["RECORD_KEYS", "run_record_of", "write_run_record"]

RECORD_KEYS: tuple[str, ...] = tuple(
    dict.fromkeys([*run_record.RunRecord.model_fields, *RunSpec().to_record()])
)
"""Every key of a ``run.json`` this version writes, for every kind of run."""


def run_record_of(
    kind: run_record.RunKind,
    thread_id: str,
    task: str,
    spec: RunSpec | None,
    *,
    planner: Mapping[str, Any] | None = None,
    settings: AgentSettings | None = None,
    where: Mapping[str, Any] | None = None,
    checkpointer: str | None = None,
    started: float | None = None,
) -> run_record.RunRecord:
    """The record of a new run: every key of :data:`RECORD_KEYS`, the spec's values (none
    for the MCP session, which has no model), the ``planner``'s settings and the budgets it
    runs with (``settings``) over them, then where its desktop is (``where``)."""
    data: dict[str, Any] = dict.fromkeys(RECORD_KEYS)
    if spec is not None:
        data.update(spec.to_record())
    data.update(planner or {})
    if settings is not None:
        data.update(
            keep_screenshots=settings.keep_screenshots,
            confirm_actions=list(settings.confirm_actions),
            step_limit=settings.step_limit,
            seconds_timeout=settings.seconds_timeout,
            hitl_mode=settings.hitl_mode,
            include_initial_screenshot=settings.include_initial_screenshot,
            stall_after=settings.stall_after,
            max_cost=settings.max_cost,
            price=list(settings.price) if settings.price else None,
        )
    data.update(where or {})
    data.update(
        kind=kind,
        thread_id=thread_id,
        task=task,
        started=time.time() if started is None else started,
        checkpointer=checkpointer,
        served=True if kind == "served" else None,
    )
    return run_record.RunRecord.from_json(data)


def write_run_record(folder: RunFolder, record: run_record.RunRecord) -> None:
    """Write the run's ``run.json`` (redacted like all its folder holds)."""
    run_record.write(folder, record)
