"""Tasks as threads on a LangGraph Server (``vnc-use eval --server URL``).

:class:`ServerRunner` is the :class:`~vnc_use.evaluation.runner.TaskRunner` whose agent runs on
the server, through :class:`~vnc_use.runs.executor.ServedExecutor`: each task becomes a thread
there, its run spec (the graph's context) names the desktop's address and the *name* of the
server's environment variable that holds the VNC password, never the password. Setup and
check still run here, against the same desktops.

The run folders are on the server's side, under ``runs_dir`` as the server sees it; a task's
``report`` is that report's path when this machine can read it, else ``server:PATH``.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vnc_use.errors import ConfigError
from vnc_use.evaluation.desktops import EvalDesktop
from vnc_use.evaluation.runner import AgentOutcome, describe_spec, task_spec
from vnc_use.evaluation.tasks import Task
from vnc_use.runs import remote
from vnc_use.runs.spec import RunSpec
from vnc_use.status import RunStatus

__all__ = ["SERVER_REPORT", "ServerRunner"]

#: How a report only the server can read is recorded: ``server:`` and its path there.
SERVER_REPORT = "server:"


class ServerRunner:
    """Run each task as a thread on the LangGraph Server at ``url`` (see the module's doc).

    ``spec`` is what every task's run shares (:class:`~vnc_use.runs.spec.RunSpec`: the model,
    the budgets, ``hitl_mode`` to approve every action that asks for it, the name of the
    server's variable with the desktops' VNC password); each task's budgets and desktop go on
    top (:func:`~vnc_use.evaluation.runner.task_spec`).
    """

    def __init__(self, url: str, runs_dir: str, spec: RunSpec) -> None:
        self.url = url
        self.runs_dir = runs_dir
        self.spec = spec
        self.api = remote.client(url)
        self._live: dict[str, str] = {}  # thread id -> its current run id
        self._lock = threading.Lock()
        self._stopped = False

    def check(self) -> None:
        """Fail with one line when the server cannot be reached."""
        with remote.reaching(self.url):
            self.api.threads.search(limit=1)

    def describe(self) -> dict[str, Any]:
        return {**describe_spec(self.spec), "server": self.url}

    def context(self, task: Task, desktop: EvalDesktop) -> dict[str, Any]:
        """The run's context: no secret, only the password variable's name."""
        spec = task_spec(self.spec, task, desktop, self.runs_dir)
        spec.check()
        return spec.to_json()

    def run(
        self, task: Task, desktop: EvalDesktop, thread_id: str, say: Callable[[str], None]
    ) -> AgentOutcome:
        from vnc_use.runs.executor import ServedExecutor

        def on_event(event: dict[str, Any]) -> None:
            if event.get("event") == "action":
                say(f"step {event.get('step')}: {event.get('name')}")

        spec = task_spec(self.spec, task, desktop, self.runs_dir)
        spec.check()
        executor = ServedExecutor(
            self.url,
            on_event=on_event,
            metadata={"eval_run": thread_id},
            on_run_created=self._started,
        )
        tid = str(uuid.uuid4())  # the server's thread (its rule: a UUID)
        if self._stopped:
            return AgentOutcome(RunStatus.INTERRUPTED, 0, tid, None)
        try:
            result = executor.start(spec, task.task, tid)
            while result.status == RunStatus.AWAITING_APPROVAL and not self._stopped:
                result = executor.answer(tid, "approve")
        finally:
            with self._lock:
                self._live.pop(tid, None)
        if self._stopped:
            return AgentOutcome(RunStatus.INTERRUPTED, result.steps, tid, None)
        return AgentOutcome(
            str(result.status),
            result.steps,
            tid,
            self._report(tid),
            result.error,
            result.cost_usd,
        )

    def _started(self, tid: str, run_id: str) -> None:
        """A run of thread ``tid`` was created: known for :meth:`stop`, cancelled at once when
        the evaluation is stopping."""
        with self._lock:
            self._live[tid] = run_id
        if self._stopped:
            self._cancel(tid, run_id)

    def _report(self, tid: str) -> str:
        """The run's report here (rendered from its folder when the server wrote none), else
        ``server:`` and where it is on the server's side."""
        from vnc_use.record.report import REPORT_NAME, write_report

        folder = Path(self.runs_dir) / tid
        path = folder / REPORT_NAME
        if not path.exists() and (folder / "events.jsonl").exists():
            try:  # the events are redacted already, as the server wrote them
                write_report(folder)
            except (OSError, ValueError):
                return SERVER_REPORT + str(path)
        return str(path) if path.exists() else SERVER_REPORT + str(path)

    def _cancel(self, tid: str, run_id: str) -> None:
        try:
            with remote.reaching(self.url):
                self.api.runs.cancel(tid, run_id, action="interrupt")
        except ConfigError:  # stopping is best effort: the run ends at its time limit anyway
            pass

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            live = list(self._live.items())
        for tid, run_id in live:
            self._cancel(tid, run_id)
