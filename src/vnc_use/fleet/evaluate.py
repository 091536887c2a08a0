"""``vnc-use eval TASKS --fleet URL``: each task run is a leg on the fleet's queue.

A task's leg does the whole task on one of the worker's own desktops: its setup, the agent,
its check (:func:`~vnc_use.evaluation.runner.run_task`), and returns the task's result; the
machine that runs ``eval`` writes ``results.jsonl``, ``summary.json`` and ``index.html`` as
usual. A task whose worker died is handed back to the queue by DBOS's recovery and starts again
from its setup on another desktop (a new thread id: nothing of the lost attempt is reused).
Local desktops (``vnc-use worker --desktops N``) start afresh for every task, as ``eval``'s own
do. The task file's folder (``$EVAL_SUITE_DIR``) must be at the same path on the workers (the
built-in suite is in the package).

Legs' workflow ids are ``eval-<id>-<task>-<repeat>``, ``<id>`` kept in ``--out``'s
``fleet.json``: a rerun of the same ``eval --out`` waits for the legs already queued rather than
queueing them again.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vnc_use.evaluation.desktops import EvalDesktop
from vnc_use.evaluation.results import TaskResult
from vnc_use.evaluation.runner import AgentOutcome, AgentRunner, describe_spec, run_task, task_spec
from vnc_use.evaluation.suite import Evaluation
from vnc_use.evaluation.tasks import Task
from vnc_use.fleet.queue import Enqueuer
from vnc_use.runs.spec import RunSpec
from vnc_use.status import RunStatus
from vnc_use.store.postgres import redact

__all__ = ["FleetRunner", "run_eval_leg", "run_fleet_eval"]


class FleetRunner:
    """The agent part of a task run as a fleet run (:class:`~vnc_use.fleet.executor.FleetExecutor`:
    a worker of ``label`` runs it on one of its own desktops; actions that ask for a person are
    approved when the spec's ``hitl_mode`` says so, as :class:`AgentRunner` does). ``vnc-use
    eval --fleet`` runs whole tasks (setup, agent, check) as legs instead (:func:`run_fleet_eval`)
    and keeps this runner for what ``summary.json`` says of the agent."""

    def __init__(self, url: str, spec: RunSpec, label: str | None = None) -> None:
        self.url = url
        self.spec = spec
        self.label = label
        self._stopped = False

    def describe(self) -> dict[str, Any]:
        return {**describe_spec(self.spec), "fleet": redact(self.url)}

    def stop(self) -> None:
        """Legs already queued run on (a rerun of ``eval`` collects them); no new one starts."""
        self._stopped = True

    def run(self, task: Task, desktop: EvalDesktop, thread_id: str, say: Any) -> AgentOutcome:
        from vnc_use.fleet.executor import FleetExecutor

        if self._stopped:
            return AgentOutcome(RunStatus.INTERRUPTED, 0, thread_id, None)
        executor = FleetExecutor(self.url, label=self.label)
        say("agent on the fleet")
        result = executor.start(task_spec(self.spec, task, desktop, "runs"), task.task, thread_id)
        while result.status == RunStatus.AWAITING_APPROVAL and not self._stopped:
            result = executor.answer(thread_id, "approve")
        return AgentOutcome(
            str(result.status), result.steps, thread_id, None, result.error, result.cost_usd
        )


def _eval_id(out: Path) -> str:
    path = out / "fleet.json"
    try:
        return str(json.loads(path.read_text("utf-8"))["eval_id"])
    except (OSError, ValueError, KeyError):
        eval_id = uuid.uuid4().hex[:10]
        path.write_text(json.dumps({"eval_id": eval_id}) + "\n", "utf-8")
        return eval_id


def run_fleet_eval(
    evaluation: Evaluation,
    url: str,
    label: str,
    leg: dict[str, Any],
    on_result: Callable[[TaskResult], None],
) -> dict[str, Any]:
    """Queue every pending task run, collect the results in order; the summary."""
    eval_id = _eval_id(evaluation.out)
    enqueuer = Enqueuer(url)
    try:
        queued = []
        for task, repeat in evaluation.pending():
            payload = {
                **leg,
                "kind": "eval",
                "thread_id": f"{task.id}-{repeat}",
                "task": task.model_dump(mode="json"),
                "repeat": repeat,
                "suite_dir": str(evaluation.tasks.folder),
                "eval_id": eval_id,
            }
            wid = enqueuer.enqueue(label, f"eval-{eval_id}-{task.id}-{repeat}", payload)
            queued.append(wid)
        for wid in queued:
            if evaluation.stopped:
                break
            outcome = enqueuer.outcome(wid)  # a leg handed back: its continuation's
            if outcome.get("result"):
                result = TaskResult.model_validate(outcome["result"])
                evaluation.results.append(result)
                on_result(result)
    finally:
        enqueuer.destroy()
    return evaluation.write_summary()


def run_eval_leg(
    payload: dict[str, Any], desktop: EvalDesktop, runs_dir: Path, worker_id: str, stopper: Any
) -> dict[str, Any]:
    """On a worker: one task run on ``desktop``, from its setup; its result as JSON."""
    task = Task.model_validate(payload["task"])
    repeat = int(payload["repeat"])
    out = runs_dir / "eval" / str(payload["eval_id"])
    thread_id = f"{task.id}-{repeat}-{uuid.uuid4().hex[:6]}"  # a new attempt: a new thread
    private = out / "tasks" / thread_id
    private.mkdir(parents=True, exist_ok=True)
    runner = AgentRunner(out / "runs", RunSpec.from_context(payload["spec"]))
    stopper.runner = runner  # a drain stops the agent at its next step
    if stopper.requested:
        return {"interrupted": True}
    result = run_task(
        task,
        repeat,
        desktop,
        runner,
        thread_id=thread_id,
        log=out / "logs" / f"{thread_id}.log",
        extra_env={"EVAL_SUITE_DIR": str(payload["suite_dir"]), "EVAL_TASK_DIR": str(private)},
    )
    if result is None:
        return {"interrupted": True}
    if result.report:  # on the worker's side
        result = result.model_copy(update={"report": f"{worker_id}:{result.report}"})
    return {"result": result.model_dump(mode="json"), "worker": worker_id}
