"""A client of LangGraph Server serving vnc-use: shared by ``vnc-use run --server`` and
``vnc-use eval --server``.

:func:`client` opens the SDK's sync client, :func:`reaching` turns a server that cannot be
reached or refuses into one line, :func:`follow` starts a run on a thread and passes its custom
events on, :func:`outcome` reads how a thread stands as a :class:`RunResult` (its run folder is
on the server's side).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vnc_use.errors import ConfigError, ServedRunError
from vnc_use.status import RunStatus

if TYPE_CHECKING:
    from vnc_use.agent.state import RunResult

__all__ = ["GRAPH_ID", "client", "follow", "outcome", "reaching"]

GRAPH_ID = "vnc_use"
"""The graph's name in ``langgraph.json``."""


def client(url: str) -> Any:
    """The SDK's sync client for the server at ``url``."""
    try:
        from langgraph_sdk import get_sync_client
    except ImportError:  # pragma: no cover - the server extra is missing
        raise ConfigError("--server needs langgraph-sdk: pip install 'vnc-use[server]'") from None
    return get_sync_client(url=url, api_key=None)


@contextmanager
def reaching(url: str) -> Iterator[None]:
    """Turn a server that cannot be reached, or refuses, into one line."""
    import httpx

    try:
        yield
    except httpx.HTTPStatusError as exc:
        raise ConfigError(
            f"the server at {url} refused: {exc.response.status_code} {exc.response.text[:200]}"
        ) from None
    except httpx.HTTPError as exc:
        raise ConfigError(
            f"cannot reach the server at {url} ({exc}); start it with 'langgraph dev' "
            "in the project (see docs/deployment/langgraph-server.md) or check --server"
        ) from None


def follow(
    api: Any,
    tid: str,
    show: Callable[[dict[str, Any]], None],
    *,
    on_run_created: Callable[[dict[str, Any]], None] | None = None,
    **run: Any,
) -> None:
    """Start a run on thread ``tid`` and pass its events to ``show`` until it ends or pauses."""
    extra = {"on_run_created": on_run_created} if on_run_created else {}
    for part in api.runs.stream(tid, GRAPH_ID, stream_mode=["custom"], **extra, **run):
        if part.event == "custom" and isinstance(part.data, dict):
            show(part.data)


def outcome(api: Any, tid: str) -> RunResult:
    """How thread ``tid`` stands, as a :class:`RunResult` (its run folder is on the server)."""
    thread = api.threads.get(tid)
    state = api.threads.get_state(tid)
    values: dict[str, Any] = state.get("values") or {}
    interrupts = [i for task in state.get("tasks", []) for i in task.get("interrupts", [])]
    status = RunStatus(values.get("status", RunStatus.RUNNING))
    error = values.get("error")
    pending = None
    if thread.get("status") == "error":
        status = RunStatus.ERROR
        found = thread.get("error") or {}
        error = f"{found.get('error', 'error')}: {found.get('message', '')}".strip(": ")
        if found.get("error") == ServedRunError.__name__:  # one of ours: its line, as is
            error = str(found.get("message"))
    elif interrupts:
        status, pending = RunStatus.AWAITING_APPROVAL, dict(interrupts[0]["value"])
    elif status == RunStatus.RUNNING and _last_run_status(api, tid) == "interrupted":
        status = RunStatus.INTERRUPTED  # stopped on request (a stop: the run's cancel)
        error = f"stopped on request; continue with 'vnc-use resume --server URL {tid}'"
    elif status == RunStatus.RUNNING:
        status, error = RunStatus.ERROR, f"the run stopped before finishing: vnc-use resume {tid}"
    from vnc_use.agent.costs import run_cost
    from vnc_use.agent.state import RunResult

    return RunResult(
        status=status,
        thread_id=tid,
        run_dir=_run_dir(api, tid) if values else "",  # none: the run never started
        final_text=values.get("final_text", ""),
        transcript=list(values.get("transcript", [])),
        steps=values.get("step", 0),
        error=error,
        pending_call=pending,
        cost_usd=run_cost(values) if values else None,
        human=dict(values["human"])
        if status == RunStatus.AWAITING_HUMAN and values.get("human")
        else None,
    )


def _run_dir(api: Any, tid: str) -> str:
    """The thread's run folder, on the server's side (the server keeps it with the spec)."""
    import httpx

    from vnc_use.runs.spec import SPEC_NAMESPACE

    try:
        item = api.store.get_item(list(SPEC_NAMESPACE), tid)
    except httpx.HTTPStatusError:  # a thread this server never ran
        return ""
    runs_dir = (item or {}).get("value", {}).get("runs_dir") if isinstance(item, dict) else None
    return str(Path(runs_dir) / tid) if runs_dir else ""


def _last_run_status(api: Any, tid: str) -> str | None:
    """The status of the thread's latest run (``interrupted``: cancelled by a stop)."""
    found = api.runs.list(tid, limit=1)
    return str(found[0].get("status")) if found else None
