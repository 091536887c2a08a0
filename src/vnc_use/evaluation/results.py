"""An evaluation's results: ``results.jsonl`` (one line per task run) and ``summary.json``.

The success rate's 95 % interval is Wilson's score interval, which stays inside [0, 1] and
means something for small suites and for rates of 0 or 1 (the normal approximation does not).
"""

from __future__ import annotations

import json
import math
import statistics
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

__all__ = [
    "OUTCOMES",
    "Outcome",
    "ResultsFile",
    "TaskResult",
    "summarize",
    "wilson_interval",
]

Outcome = Literal[
    "passed", "failed", "setup_failed", "error", "denied", "blocked", "budget", "stuck"
]
#: Every outcome a task run can have.
OUTCOMES: tuple[str, ...] = Outcome.__args__  # type: ignore[attr-defined]

_Z95 = 1.959963984540054


class TaskResult(BaseModel):
    """One line of ``results.jsonl``."""

    id: str
    repeat: int
    success: bool
    outcome: Outcome
    status: str | None = None
    steps: int = 0
    seconds: float = 0.0
    thread_id: str
    report: str | None = None
    error: str | None = None
    cost_usd: float | None = None
    """What the run's model calls cost in USD (None: unknown, or no run)."""


def wilson_interval(passed: int, runs: int, z: float = _Z95) -> tuple[float, float]:
    """Wilson's score interval of ``passed / runs`` (95 % by default); (0, 1) for no runs."""
    if runs <= 0:
        return 0.0, 1.0
    p = passed / runs
    denominator = 1 + z * z / runs
    centre = (p + z * z / (2 * runs)) / denominator
    margin = z * math.sqrt(p * (1 - p) / runs + z * z / (4 * runs * runs)) / denominator
    return max(0.0, centre - margin), min(1.0, centre + margin)


class ResultsFile:
    """``results.jsonl``: appended one line per finished task run, safe across threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def read(self) -> list[TaskResult]:
        """The results so far (a line cut short by a crash is ignored)."""
        try:
            lines = self.path.read_text("utf-8").splitlines()
        except FileNotFoundError:
            return []
        results = []
        for line in lines:
            try:
                results.append(TaskResult.model_validate_json(line))
            except ValidationError:
                continue
        return results

    def append(self, result: TaskResult) -> None:
        """Add one result (a whole line, flushed)."""
        line = json.dumps(result.model_dump(), ensure_ascii=False) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as out:
            out.write(line)
            out.flush()


def _median(values: Iterable[float]) -> float | None:
    data = list(values)
    return statistics.median(data) if data else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _costs(results: Sequence[TaskResult], passed: int) -> dict[str, Any]:
    """The evaluation's cost: the total, per success, and per task (None where a run's cost
    is unknown: never a partial sum shown as the whole). A task that never ran its agent
    (setup failed) cost nothing."""
    ran = [r for r in results if r.outcome != "setup_failed"]
    unknown = any(r.cost_usd is None for r in ran)
    total = None if unknown else round(sum(r.cost_usd or 0.0 for r in ran), 6)
    per_task: dict[str, float | None] = {}
    for r in ran:
        before = per_task.get(r.id, 0.0)
        per_task[r.id] = None if before is None or r.cost_usd is None else before + r.cost_usd
    return {
        "cost_usd": total,
        "cost_per_success_usd": None if total is None or not passed else round(total / passed, 6),
        "cost_per_task_usd": {k: None if v is None else round(v, 6) for k, v in per_task.items()},
    }


def summarize(
    results: Sequence[TaskResult],
    *,
    tasks: int,
    planned: int,
    about: dict[str, Any],
) -> dict[str, Any]:
    """What ``summary.json`` holds: counts, the success rate and its Wilson 95 % interval,
    median steps and seconds, counts by outcome, and ``about`` (model, provider, version).

    A task run whose setup failed never reached the model: it is counted under its outcome
    but is no model failure, so the rate, its interval and the medians are over the
    ``scored_runs`` (the runs whose setup succeeded)."""
    scored = [r for r in results if r.outcome != "setup_failed"]
    passed = sum(r.success for r in scored)
    low, high = wilson_interval(passed, len(scored))
    counts: Counter[str] = Counter(r.outcome for r in results)
    return {
        **_costs(results, passed),
        "tasks": tasks,
        "runs": len(results),
        "scored_runs": len(scored),
        "planned_runs": planned,
        "complete": len(results) >= planned,
        "passed": passed,
        "success_rate": passed / len(scored) if scored else None,
        "success_rate_95": [round(low, 4), round(high, 4)],
        "median_steps": _median(r.steps for r in scored),
        "median_seconds": _round(_median(r.seconds for r in scored)),
        "outcomes": {name: counts.get(name, 0) for name in OUTCOMES},
        **about,
    }
