"""An evaluation: the tasks of a task file, ``repeat`` times each, over a pool of desktops.

Each slot (desktop) has a worker thread that takes the next task run, runs it
(:func:`~vnc_use.evaluation.runner.run_task`) and appends its result to ``results.jsonl``.
Task runs already in ``results.jsonl`` are skipped, so an evaluation stopped half-way goes on
where it stopped when started again with the same output folder. :meth:`Evaluation.stop`
(Ctrl-C) lets no new task start and stops the runs in progress at their next step; those are
not recorded (they run again next time).
"""

from __future__ import annotations

import json
import queue
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from vnc_use.errors import VncUseError
from vnc_use.evaluation.desktops import DesktopSlot
from vnc_use.evaluation.index import write_index
from vnc_use.evaluation.results import ResultsFile, TaskResult, summarize
from vnc_use.evaluation.runner import TaskRunner, run_task
from vnc_use.evaluation.tasks import Task, TaskFile
from vnc_use.version import __version__

__all__ = ["Evaluation", "EventFn"]

#: ``on_event(kind, fields)``: ``"slot"`` (``slot``, ``text``), ``"result"`` (``result``).
EventFn = Callable[[str, dict[str, Any]], None]


class Evaluation:
    """Run ``tasks`` over ``slots`` with ``runner``, writing into ``out``."""

    def __init__(
        self,
        tasks: TaskFile,
        out: Path,
        slots: Sequence[DesktopSlot],
        runner: TaskRunner,
        *,
        repeat: int = 1,
        on_event: EventFn | None = None,
    ) -> None:
        self.tasks = tasks
        self.out = out.resolve()  # the commands run in the desktop's home: no relative paths
        self.slots = list(slots)
        self.runner = runner
        self.repeat = repeat
        self.on_event = on_event or (lambda kind, fields: None)
        self.results = ResultsFile(out / "results.jsonl")
        self._stop = threading.Event()
        self._queue: queue.Queue[tuple[Task, int]] = queue.Queue()
        self.failures: list[str] = []

    @property
    def planned(self) -> list[tuple[Task, int]]:
        """Every task run: each task ``repeat`` times (repeat numbers from 0)."""
        return [(t, r) for r in range(self.repeat) for t in self.tasks.tasks]

    def pending(self) -> list[tuple[Task, int]]:
        """The task runs not in ``results.jsonl`` yet."""
        done = {(r.id, r.repeat) for r in self.results.read()}
        return [(t, r) for t, r in self.planned if (t.id, r) not in done]

    def stop(self) -> None:
        """Start no new task; stop the running ones at their next step (safe from a signal
        handler)."""
        self._stop.set()
        self.runner.stop()

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stop.is_set()

    def run(self) -> dict[str, Any]:
        """Run what is pending; returns the summary (also written to ``summary.json``)."""
        self.out.mkdir(parents=True, exist_ok=True)
        todo = self.pending()
        for item in todo:
            self._queue.put(item)
        workers = [
            threading.Thread(target=self._work, args=(slot,), name=f"eval-{slot.name}")
            for slot in self.slots[: max(1, min(len(self.slots), len(todo)))]
        ]
        try:
            for worker in workers:
                worker.start()
            for worker in workers:
                while worker.is_alive():
                    worker.join(0.2)  # wakes up for Ctrl-C
        finally:
            if any(w.is_alive() for w in workers):  # Ctrl-C: let the runs stop cleanly
                self.stop()
            for worker in workers:
                worker.join()
        return self.write_summary()

    def write_summary(self) -> dict[str, Any]:
        """Write ``summary.json`` and ``index.html`` from ``results.jsonl``; return the summary."""
        planned = {(t.id, r) for t, r in self.planned}
        results = [r for r in self.results.read() if (r.id, r.repeat) in planned]
        about = {"version": __version__, **self.runner.describe()}
        summary = summarize(results, tasks=len(self.tasks.tasks), planned=len(planned), about=about)
        summary["interrupted"] = self.stopped
        tmp = self.out / "summary.json.tmp"
        tmp.write_text(json.dumps(summary, indent=2) + "\n", "utf-8")
        tmp.replace(self.out / "summary.json")
        write_index(self.out / "index.html", results, summary)
        return summary

    # -- a worker ------------------------------------------------------------------------
    def _say(self, slot: DesktopSlot, text: str) -> None:
        self.on_event("slot", {"slot": slot.name, "text": text})

    def _work(self, slot: DesktopSlot) -> None:
        try:
            while not self._stop.is_set():
                try:
                    task, repeat = self._queue.get_nowait()
                except queue.Empty:
                    break
                try:
                    self._one(slot, task, repeat)
                except VncUseError:
                    self._queue.put((task, repeat))  # another desktop may run it
                    raise
        except VncUseError as exc:  # a desktop that does not start: this worker ends
            self.failures.append(f"{slot.name}: {exc}")
            self._say(slot, f"stopped: {exc}")
        finally:
            slot.close()
            self._say(slot, "idle")

    def _one(self, slot: DesktopSlot, task: Task, repeat: int) -> None:
        thread_id = f"{task.id}-{repeat}-{uuid.uuid4().hex[:6]}"
        self._say(slot, f"{task.id} #{repeat}: starting the desktop")
        desktop = slot.open()
        private = self.out / "tasks" / thread_id
        private.mkdir(parents=True, exist_ok=True)
        try:
            result = run_task(
                task,
                repeat,
                desktop,
                self.runner,
                thread_id=thread_id,
                log=self.out / "logs" / f"{thread_id}.log",
                extra_env={
                    "EVAL_SUITE_DIR": str(self.tasks.folder),
                    "EVAL_TASK_DIR": str(private),
                },
                say=lambda text: self._say(slot, f"{task.id} #{repeat}: {text}"),
            )
        finally:
            slot.done()
        if result is None:
            return
        if result.report:
            result = result.model_copy(update={"report": _relative(result.report, self.out)})
        self.results.append(result)
        self.on_event("result", {"slot": slot.name, "result": result})


def _relative(path: str, root: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(root.resolve()))
    except ValueError:
        return path


def results_of(out: Path) -> list[TaskResult]:
    """The results recorded in ``out/results.jsonl``."""
    return ResultsFile(out / "results.jsonl").read()
