"""The graph LangGraph Server runs (``langgraph.json``: ``vnc_use.runs.serve:make_graph``; the
old path ``vnc_use.agent.serve:make_graph`` is an alias of it).

The server calls :func:`make_graph` whenever it needs the graph:

- to run it (``threads.create_run``: a first leg, and every resume): the run's spec
  (:class:`~vnc_use.runs.spec.RunSpec`) comes from the request's ``context``, or, when a
  resume carries none (Agent Inbox sends a bare ``command={"resume": ...}``), from the
  server's store, where the first leg left it under the thread id. The live parts (VNC
  connection, planner, run folder, journal) are opened off the event loop, bound to the graph,
  and closed when the run ends *or pauses* for a person (the server leaves the factory then),
  so a run waiting a day for an approval holds no connection;
- for everything else (schemas, state reads, Studio): the same topology, nothing opened.

:func:`open_live` is the one place a served run acquires what it acts with (a lease on the
desktop belongs there too, released by :meth:`LiveRun.close`); it shares the run setup of
:class:`~vnc_use.runs.agent.VncUseAgent` (:mod:`vnc_use.runs.open`) and reaches the desktop
with :func:`~vnc_use.desktops.target.reach` (an RDP target: a bridge for the leg).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import StateSnapshot

from vnc_use import config as env
from vnc_use.agent.context import AgentContext
from vnc_use.agent.graph import build_graph
from vnc_use.agent.outcome import record_outcome, run_outcome
from vnc_use.agent.state import CUAState, RunResult
from vnc_use.desktops.base import Desktop
from vnc_use.desktops.target import ReachedDesktop, reach
from vnc_use.errors import ConfigError, ServedRunError, VncUseError
from vnc_use.record import run_record
from vnc_use.record.folder import RunFolder
from vnc_use.record.report import write_report_safely
from vnc_use.record.video import VideoRecorder, record_desktop, stop_recording
from vnc_use.runs.leg import run_record_of, write_run_record
from vnc_use.runs.open import MISSING_ON_SERVER, open_planner, run_folder, sensitive_values
from vnc_use.runs.spec import SPEC_NAMESPACE, RunSpec
from vnc_use.store.holds import leg_fence
from vnc_use.store.lease import Lease
from vnc_use.store.storage import Storage, open_storage

if TYPE_CHECKING:  # the server resolves the annotation with its own ServerRuntime
    from langgraph_sdk.runtime import ServerRuntime

    from vnc_use.providers.base import Planner

__all__ = ["SPEC_NAMESPACE", "LiveRun", "make_graph", "open_live"]

Compiled = CompiledStateGraph[CUAState, RunSpec, CUAState, CUAState]


@dataclass
class LiveRun:
    """What one leg of a served run acts with; :meth:`close` lets go of all of it."""

    context: AgentContext
    desktop: Desktop
    storage: Storage
    lease: Lease
    spec: RunSpec
    reached: ReachedDesktop
    exits: contextlib.ExitStack
    """What :func:`reach` holds for the leg (an RDP bridge), let go by :meth:`close`."""
    recorder: VideoRecorder | None = None
    """The leg's video segment (``spec.video``), finished by :meth:`close`."""

    @property
    def folder(self) -> RunFolder:
        return self.context.run

    def started(self, state: CUAState) -> None:
        """A new run's task entered the graph: ``run_started`` and the task in ``run.json``,
        as a local run records them (the factory never sees the run's input itself)."""
        task = state.get("task", "")
        thread_id = self.folder.thread_id
        security = _security_json(getattr(self.desktop, "security", None))
        run_record.update(
            self.folder, task=task, started=time.time(), security=security, status="running"
        )
        self.folder.event(
            "run_started",
            thread_id=thread_id,
            task=task,
            vnc_server=self._where(),
            security=security,
        )

    def _where(self) -> str:
        """The desktop as run.json names it: the VNC address, or ``rdp://HOST:PORT (via
        FreeRDP)`` for a bridged RDP server."""
        return self.reached.label

    def finish(self, snap: StateSnapshot | None, error: BaseException | None) -> RunResult:
        """The leg paused or ended (``error``: what stopped it): ``run_paused`` /
        ``run_ended`` and the status in ``run.json``; the report follows (blocking)."""
        message = None
        interrupted = isinstance(error, asyncio.CancelledError)
        if error is not None and not interrupted:
            message = str(error) or type(error).__name__
            self.folder.event("error", message=message, kind=type(error).__name__)
        thread_id = self.folder.thread_id
        result = run_outcome(
            dict(snap.values) if snap is not None else {},
            snap.next if snap is not None else (),
            [i.value for i in snap.interrupts] if snap is not None else [],
            thread_id=thread_id,
            run_dir=str(self.folder.path),
            error=message,
            interrupted=interrupted,
            resume_hint=f"a new run on the thread (vnc-use resume --server URL {thread_id})",
        )
        record_outcome(self.folder, result)
        return result

    def close(self) -> None:
        """Disconnect from the desktop, give its lease back and close the journal (blocking:
        call it off the event loop)."""
        try:
            stop_recording(self.desktop, self.recorder)
            if self.recorder is not None and self.recorder.frames:
                write_report_safely(self.folder)  # the report plays the finished segment
            disconnect = getattr(self.desktop, "disconnect", None)
            if callable(disconnect):
                disconnect()
        finally:
            try:
                self.exits.close()
            finally:
                try:
                    self.lease.release()
                finally:
                    self.storage.close()


def open_live(spec: RunSpec, thread_id: str) -> LiveRun:
    """Connect the desktop and build the planner, run folder and journal of one leg of a
    served run (blocking: call it off the event loop)."""
    sensitive = sensitive_values(spec.sensitive_names, missing=MISSING_ON_SERVER)
    planner = open_planner(spec, ready=True)
    # the journal and the desktop's lease live in the database the server's environment names
    # (VNC_USE_DATABASE_URL), else in the runs folder's SQLite file, as for a local run; as
    # for a local run, a run that cannot have its desktop records nothing
    storage = open_storage(env.database_url(), Path(spec.runs_dir))
    lease = storage.lease(spec.desktop_key, thread_id)
    exits = contextlib.ExitStack()
    try:
        lease.acquire(spec.lease_timeout)
        folder = _folder(spec, thread_id, sensitive, planner, storage.described)
        reached = exits.enter_context(reach(spec.desktop, log_path=folder.path / "freerdp.log"))
        if reached.rdp:
            run_record.update(folder, vnc_server=reached.label, rdp=reached.rdp)
        desktop = reached.connect()
        recorder = record_desktop(desktop, folder.path, spec.video_fps) if spec.video else None
    except BaseException:
        try:
            exits.close()
            lease.release()
        finally:
            storage.close()
        raise
    ctx = AgentContext(
        desktop=desktop,
        planner=planner,
        run=folder,
        settings=spec.settings(planner),
        journal=storage.journal(thread_id),
        secrets=sensitive,
        stop=threading.Event(),
        fence=leg_fence(storage.holds(spec.desktop_key), thread_id),
    )
    return LiveRun(
        context=ctx,
        desktop=desktop,
        storage=storage,
        lease=lease,
        spec=spec,
        reached=reached,
        exits=exits,
        recorder=recorder,
    )


def _folder(
    spec: RunSpec,
    thread_id: str,
    sensitive: dict[str, str],
    planner: Planner,
    checkpointer: str,
) -> RunFolder:
    """The leg's run folder (its run.json written by the first leg)."""
    secrets = [
        env.named_secret(spec.desktop.vnc_password_env),
        env.named_secret(spec.desktop.rdp_password_env) if spec.rdp_server else None,
        *env.secret_values(),
        *sensitive.values(),
    ]
    folder = run_folder(Path(spec.runs_dir), thread_id, secrets)
    if run_record.load(folder.path) is None:
        record = run_record_of(
            "served",
            thread_id,
            "",  # the task: when it enters the graph (LiveRun.started)
            spec,
            planner=planner.run_settings(),
            settings=spec.settings(planner),
            checkpointer=checkpointer,
        )
        write_run_record(folder, record)
    else:  # a later leg: a cap raised on resume (--max-cost) is the run's cap now
        run_record.update(folder, max_cost=spec.max_cost)
    return folder


async def spec_for(store: BaseStore, thread_id: str, context: Any) -> RunSpec:
    """The run's spec: the one the request carries (kept in the store for later legs), else
    the one an earlier leg of the thread kept."""
    if context:
        spec = RunSpec.from_context(context)
        # pinned: every leg (and a client asking where the report is) finds the same folder
        spec.runs_dir = await asyncio.to_thread(os.path.abspath, spec.runs_dir)
        await store.aput(SPEC_NAMESPACE, thread_id, spec.to_json())
        return spec
    item = await store.aget(SPEC_NAMESPACE, thread_id)
    if item is None:
        raise ConfigError(
            f"thread {thread_id} has no run spec: create its first run with a context "
            "(desktop, provider, ...; see vnc_use.runs.spec.RunSpec)"
        )
    return RunSpec.from_context(dict(item.value))


@contextlib.asynccontextmanager
async def make_graph(
    config: RunnableConfig, runtime: ServerRuntime[Any]
) -> AsyncIterator[Compiled]:
    """The graph factory ``langgraph.json`` names (see the module's doc)."""
    execution = runtime.execution_runtime
    if execution is None:  # schemas, state reads and updates, Studio
        yield build_graph(context_schema=RunSpec).compile()
        return
    thread_id = str(config.get("configurable", {}).get("thread_id"))
    try:
        spec = await spec_for(runtime.store, thread_id, execution.context)
        live = await asyncio.to_thread(open_live, spec, thread_id)
    except VncUseError as exc:  # e.g. the desktop's lease: the client sees the one line
        raise ServedRunError(exc) from exc
    failure: BaseException | None = None
    try:
        yield build_graph(
            live=live.context, on_start=live.started, context_schema=RunSpec
        ).compile()
    except VncUseError as exc:  # the leg failed: recorded in the run folder, then shown
        failure = exc
        raise ServedRunError(exc) from exc
    except BaseException as exc:  # or was cancelled, or broke
        failure = exc
        raise
    finally:
        try:
            snap = await _checkpointed(config, thread_id)
            await asyncio.to_thread(live.finish, snap, failure)
        finally:
            await asyncio.to_thread(live.close)


async def _checkpointed(config: RunnableConfig, thread_id: str) -> StateSnapshot | None:
    """The thread's state as the leg left it, read through the server's checkpointer (which
    the server hands the factory in ``config``); None when there is none to read."""
    checkpointer = config.get("configurable", {}).get(CONFIG_KEY_CHECKPOINTER)
    if not isinstance(checkpointer, BaseCheckpointSaver):
        return None
    graph = build_graph().compile(checkpointer=checkpointer)
    return await graph.aget_state({"configurable": {"thread_id": thread_id}})


def _security_json(security: Any) -> dict[str, Any] | None:
    if security is None:
        return None
    return {"type": security.number, "name": security.name, "encrypted": security.encrypted}
