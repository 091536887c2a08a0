"""The console over LangGraph Server (``vnc-use console --server URL``): the runs list is the
server's threads, and every verb goes through the
:class:`~vnc_use.runs.executor.ServedExecutor` (start, approve, deny and resume in a leg process
that follows the server's run, as locally; stop at once: the server's cancel).

What a row shows comes from the server: the thread's metadata (the task, the desktop, and the
provider and model of a run the console started), its state's values (status, steps, cost,
final text, error), its pending interrupt (an approval), its busy status (running) and its
times (started: the thread's creation; how long: to its last update). The provider and model
of a thread started elsewhere are read once from the spec the server keeps for it.

A run's steps are its run folder, which the server's leg writes into the spec's ``runs_dir``:
the console's ``--runs-dir`` for the runs it starts. When the console shares that folder with
the server (the same machine, or a shared mount) a run's page shows every step as it is
written, as locally; otherwise the page shows what the server's thread state holds (status,
steps, cost, final text) and no screenshots.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from vnc_use.console.index import Page
from vnc_use.errors import ConfigError
from vnc_use.record.runs import RunSummary
from vnc_use.status import RunStatus

__all__ = ["ServedRuns", "StatusWatch", "served_status"]

_LIST_LIMIT = 1000
"""The most threads the list reads from the server (newest first)."""


def _epoch(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def served_status(thread: dict[str, Any]) -> str:
    """The status the console shows of a server's thread (as :func:`remote.outcome` reads it,
    from the thread alone): ``running`` while the server runs it, ``awaiting_approval`` with
    an interrupt pending, ``error`` when the server's run failed, ``interrupted`` when it was
    stopped (cancelled) with a step left, ``starting`` before its first step, else the status
    its state recorded."""
    values = thread.get("values") or {}
    if thread.get("status") == "busy":
        return RunStatus.RUNNING.value
    if thread.get("status") == "error":
        return RunStatus.ERROR.value
    if any(thread.get("interrupts") or {}):
        return RunStatus.AWAITING_APPROVAL.value
    if not isinstance(values, dict) or not values:
        return "starting"
    status = str(values.get("status") or RunStatus.RUNNING.value)
    if status == RunStatus.RUNNING.value:  # idle with a step left: stopped, resumable
        return RunStatus.INTERRUPTED.value
    return status


class ServedRuns:
    """The server's runs, as the console lists them (the same ``page`` and ``get`` as
    :class:`~vnc_use.console.index.RunIndex`); answers are kept ``fresh_for`` seconds."""

    def __init__(self, url: str, runs_dir: str | Path, *, fresh_for: float = 0.5) -> None:
        from vnc_use.runs import remote

        self.url = url
        self.runs_dir = Path(runs_dir)
        self.fresh_for = fresh_for
        self.api = remote.client(url)
        self._lock = threading.Lock()
        self._threads: list[dict[str, Any]] = []
        self._listed = -1e9
        self._one: dict[str, tuple[float, RunSummary | None]] = {}
        self._specs: dict[str, dict[str, Any]] = {}  # thread: the spec the server keeps

    def check(self) -> None:
        """One line when the server cannot be reached (the CLI's start refuses then)."""
        from vnc_use.runs import remote

        with remote.reaching(self.url):
            self.api.threads.search(limit=1)

    def warm(self) -> None:
        """Nothing to read ahead: the server answers at once."""

    # -- what the server says ----------------------------------------------------------------
    def _spec(self, thread_id: str) -> dict[str, Any]:
        """The spec the server keeps for the thread (read once; {} when it has none yet)."""
        import httpx

        from vnc_use.runs.spec import SPEC_NAMESPACE

        known = self._specs.get(thread_id)
        if known is not None:
            return known
        try:
            item = self.api.store.get_item(list(SPEC_NAMESPACE), thread_id)
        except httpx.HTTPError:
            return {}
        value = (item or {}).get("value") if isinstance(item, dict) else None
        if isinstance(value, dict) and value:
            self._specs[thread_id] = value
            return value
        return {}

    def _summary(self, thread: dict[str, Any]) -> RunSummary:
        from vnc_use.agent.costs import run_cost

        tid = str(thread["thread_id"])
        meta = thread.get("metadata") or {}
        values = thread.get("values") or {}
        values = values if isinstance(values, dict) else {}
        spec = self._spec(tid) if values and not meta.get("provider") else {}
        status = served_status(thread)
        error = values.get("error")
        if thread.get("status") == "error" and not error:
            error = "the server's run failed: see the server's log"
        cost = run_cost(values) if values else None
        return RunSummary(
            thread_id=tid,
            task=" ".join(str(meta.get("task") or values.get("task") or "").split()),
            status=status,
            steps=int(values.get("step") or 0),
            started=_epoch(thread.get("created_at")),
            last_event=_epoch(thread.get("updated_at")),
            path=self.path(tid),
            final_text=str(values.get("final_text") or ""),
            error=str(error) if error else None,
            cost_usd=cost,
            priced=cost is not None,
            provider=meta.get("provider") or spec.get("provider"),
            model=meta.get("model") or spec.get("model"),
            desktop=meta.get("vnc"),
        )

    def path(self, thread_id: str) -> Path:
        """Where the run's folder is: under the runs folder its spec names (the console's
        ``--runs-dir`` for the runs it starts)."""
        spec = self._specs.get(thread_id) or {}
        runs_dir = spec.get("runs_dir")
        return (Path(runs_dir) if runs_dir else self.runs_dir) / thread_id

    def folder(self, thread_id: str) -> Path | None:
        """The run's folder, when this console shares it with the server and it has recorded
        something (None: the page shows what the server's state holds)."""
        self._spec(thread_id)
        folder = self.path(thread_id)
        return folder if (folder / "events.jsonl").exists() else None

    def threads(self) -> list[dict[str, Any]]:
        """The server's threads, newest first (kept ``fresh_for`` seconds)."""
        from vnc_use.runs import remote

        with self._lock:
            if time.monotonic() - self._listed >= self.fresh_for:
                with remote.reaching(self.url):
                    self._threads = list(
                        self.api.threads.search(
                            limit=_LIST_LIMIT, sort_by="created_at", sort_order="desc"
                        )
                    )
                self._listed = time.monotonic()
            return self._threads

    def thread(self, thread_id: str) -> dict[str, Any] | None:
        """The server's thread (None: the server has no such thread)."""
        import httpx

        from vnc_use.runs import remote

        try:
            with remote.reaching(self.url):
                try:
                    found = self.api.threads.get(thread_id)
                except httpx.HTTPStatusError as exc:
                    if exc.response.status_code in (404, 422):
                        return None
                    raise
        except ConfigError:
            return None
        return dict(found) if isinstance(found, dict) else None

    def get(self, thread_id: str) -> RunSummary | None:
        with self._lock:
            cached = self._one.get(thread_id)
        if cached is not None and time.monotonic() - cached[0] < self.fresh_for:
            return cached[1]
        thread = self.thread(thread_id)
        summary = self._summary(thread) if thread is not None else None
        with self._lock:
            self._one[thread_id] = (time.monotonic(), summary)
        return summary

    def forget(self, thread_id: str) -> None:
        """Read the thread afresh next time (a verb changed it)."""
        with self._lock:
            self._one.pop(thread_id, None)
            self._listed = -1e9

    def page(self, *, status: str | None = None, offset: int = 0, limit: int = 50) -> Page:
        runs = [self._summary(t) for t in self.threads()]
        counts: dict[str, int] = {}
        for s in runs:
            counts[s.status] = counts.get(s.status, 0) + 1
        chosen = [s for s in runs if s.status == status] if status else runs
        return Page(chosen[offset : offset + limit], len(chosen), offset, limit, counts)


class StatusWatch:
    """Tells a run's event stream when the server's thread changed (its status, its last
    update): asks the server at most every ``every`` seconds (one small request, made on a
    thread of its own so that a slow server never holds the console's event loop), and
    answers a ``console`` event with the status the console shows."""

    def __init__(self, runs: ServedRuns, thread_id: str, every: float = 0.5) -> None:
        self.runs = runs
        self.thread_id = thread_id
        self.every = every
        self._asked = -1e9
        self._seen: tuple[str, Any] | None = None
        self._asking: threading.Thread | None = None
        self._found: list[dict[str, Any] | None] = []

    def _ask(self) -> None:
        self._found.append(self.runs.thread(self.thread_id))

    def __call__(self) -> dict[str, Any] | None:
        if self._asking is not None and not self._asking.is_alive():
            self._asking = None
            thread = self._found.pop() if self._found else None
            if thread is not None:
                seen = (served_status(thread), thread.get("updated_at"))
                first, changed = self._seen is None, seen != self._seen
                self._seen = seen
                if changed and not first:
                    self.runs.forget(self.thread_id)
                    return {"event": "console", "status": seen[0]}
        if self._asking is None and time.monotonic() - self._asked >= self.every:
            self._asked = time.monotonic()
            self._asking = threading.Thread(target=self._ask, daemon=True)
            self._asking.start()
        return None
