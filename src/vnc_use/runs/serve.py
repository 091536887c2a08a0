"""The graph LangGraph Server runs (``langgraph.json``: ``vnc_use.runs.serve:make_graph``; the
old path ``vnc_use.agent.serve:make_graph`` is an alias of it).

The server calls :func:`make_graph` whenever it needs the graph:

- to run it (``threads.create_run``: a first leg, and every resume): the run's spec
  (:class:`~vnc_use.runs.spec.RunSpec`) comes from the request's ``context``, or, when a
  resume carries none (Agent Inbox sends a bare ``command={"resume": ...}``), from the
  server's store, where the first leg left it under the thread id. The leg is lived as every
  leg is (:meth:`~vnc_use.runs.leg.RunHost.hosted_leg`: the desktop's lease, the run folder
  and ``run.json``, the desktop, the video segment), off the event loop; its live parts are
  bound to the graph; its outcome is recorded from the state the server's checkpointer holds,
  and all of it is let go when the run ends *or pauses* for a person (the server leaves the
  factory then), so a run waiting a day for an approval holds no connection;
- for everything else (schemas, state reads, Studio): the same topology, nothing opened.

What is the server's own is here: the spec from the request or the store, the state read
through the server's checkpointer, and the host of a served leg (:class:`ServedHost`: its
journal and leases in the database the server's environment names, its secrets named by
variable, its RDP bridge's log in the run folder).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import StateSnapshot

from vnc_use import config as env
from vnc_use.agent.graph import build_graph
from vnc_use.agent.state import CUAState
from vnc_use.desktops.target import reach
from vnc_use.errors import ConfigError, ServedRunError, VncUseError
from vnc_use.runs.leg import HostedLeg, RunHost
from vnc_use.runs.open import MISSING_ON_SERVER, open_planner, sensitive_values
from vnc_use.runs.spec import SPEC_NAMESPACE, RunSpec

if TYPE_CHECKING:  # the server resolves the annotation with its own ServerRuntime
    from langgraph_sdk.runtime import ServerRuntime

__all__ = ["SPEC_NAMESPACE", "ServedHost", "make_graph", "open_leg"]

Compiled = CompiledStateGraph[CUAState, RunSpec, CUAState, CUAState]


class ServedHost(RunHost):
    """The host of one leg of a served run (``kind`` ``served``): the spec's planner (ready
    before the desktop is reached), its sensitive values from the server's environment, its
    desktop reached with the RDP bridge's log in the run folder, its journal and leases in
    ``VNC_USE_DATABASE_URL``'s database, else the runs folder's SQLite file (as a local
    run's); the checkpoints are the server's."""

    kind = "served"

    def __init__(self, spec: RunSpec, thread_id: str) -> None:
        sensitive = sensitive_values(spec.sensitive_names, missing=MISSING_ON_SERVER)
        planner = open_planner(spec, ready=True)
        exits = contextlib.ExitStack()
        try:
            log_path = Path(spec.runs_dir) / thread_id / "freerdp.log"
            reached = exits.enter_context(reach(spec.desktop, log_path=log_path))
            self._open(
                spec,
                desktop=None,
                reached=reached,
                planner=planner,
                vnc_password=None,
                settings=None,
                on_event=None,
                sensitive_text=sensitive,
                checkpointer=env.database_url(),
                screen_size=(0, 0),  # only a hint, never used: screenshots have their size
            )
        except BaseException:
            exits.close()
            raise
        self._exits.push(exits)  # the bridge goes with the host (close)

    def _secrets(self) -> list[str | None]:
        """Also the passwords the spec names by variable (an RDP password among them)."""
        desktop = self.spec.desktop
        return [
            *super()._secrets(),
            env.named_secret(desktop.vnc_password_env),
            env.named_secret(desktop.rdp_password_env) if desktop.rdp_server else None,
        ]


def open_leg(spec: RunSpec, thread_id: str) -> tuple[HostedLeg, contextlib.ExitStack]:
    """Open one leg of a served run (blocking: call it off the event loop); closing the
    stack ends the leg (its video, its lease) and lets go of its host."""
    stack = contextlib.ExitStack()
    try:
        host = stack.enter_context(ServedHost(spec, thread_id))
        leg = stack.enter_context(host.hosted_leg(thread_id))
    except BaseException:
        stack.close()
        raise
    return leg, stack


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
        leg, stack = await asyncio.to_thread(open_leg, spec, thread_id)
    except VncUseError as exc:  # e.g. the desktop's lease: the client sees the one line
        raise ServedRunError(exc) from exc
    failure: BaseException | None = None
    try:
        yield build_graph(live=leg.context, on_start=leg.started, context_schema=RunSpec).compile()
    except VncUseError as exc:  # the leg failed: recorded in the run folder, then shown
        failure = exc
        raise ServedRunError(exc) from exc
    except BaseException as exc:  # or was cancelled, or broke
        failure = exc
        raise
    finally:
        try:
            snap = await _checkpointed(config, thread_id)
            hint = f"a new run on the thread (vnc-use resume --server URL {thread_id})"
            await asyncio.to_thread(leg.finish, snap, failure, hint)
        finally:
            await asyncio.to_thread(stack.close)


async def _checkpointed(config: RunnableConfig, thread_id: str) -> StateSnapshot | None:
    """The thread's state as the leg left it, read through the server's checkpointer (which
    the server hands the factory in ``config``); None when there is none to read."""
    checkpointer = config.get("configurable", {}).get(CONFIG_KEY_CHECKPOINTER)
    if not isinstance(checkpointer, BaseCheckpointSaver):
        return None
    graph = build_graph().compile(checkpointer=checkpointer)
    return await graph.aget_state({"configurable": {"thread_id": thread_id}})
