"""``vnc-use eval``: measured success of a model on a suite of verifiable desktop tasks.

* :mod:`~vnc_use.evaluation.tasks`: the task file (YAML or JSONL) and the built-in suites;
* :mod:`~vnc_use.evaluation.desktops`: the desktops tasks run on (local ones, or ``--vnc``);
  :mod:`~vnc_use.evaluation.rdp`: one RDP desktop through a FreeRDP bridge (``--rdp``);
* :mod:`~vnc_use.evaluation.runner`: one task on one desktop (setup, agent, check), and the
  :class:`~vnc_use.evaluation.runner.TaskRunner` protocol the agent's part goes through;
  :mod:`~vnc_use.evaluation.served`: the agent's part as threads on a LangGraph Server
  (``--server``);
* :mod:`~vnc_use.evaluation.suite`: the whole evaluation over a pool of desktops;
* :mod:`~vnc_use.evaluation.results` and :mod:`~vnc_use.evaluation.index`: results.jsonl,
  summary.json, index.html.
"""

from __future__ import annotations

from vnc_use.evaluation.results import TaskResult, summarize, wilson_interval
from vnc_use.evaluation.tasks import Task, TaskFile, load_tasks, suite_path

__all__ = [
    "Task",
    "TaskFile",
    "TaskResult",
    "load_tasks",
    "suite_path",
    "summarize",
    "wilson_interval",
]
