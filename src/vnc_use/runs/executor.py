"""Where a run executes, behind one set of verbs: the :class:`Executor` protocol.

A run executes in this process (:class:`LocalExecutor`), on LangGraph Server
(:class:`ServedExecutor`) or on the fleet (:class:`vnc_use.fleet.executor.FleetExecutor`,
in the fleet's package: it is the layer above this one). Every front door turns its input
into a :class:`~vnc_use.runs.spec.RunSpec` and calls the verbs of one executor; the doors
do not care which:

``refuse(spec, given)``
    the options this executor cannot honour, named in one line (None: all honoured), before
    anything starts; a door exits 2 with it. ``given`` maps the door's own options (those that
    are not in the spec, by their argparse names: ``view``, ``reconnect_window``,
    ``vnc_password``, ``checkpointer``, ``label``, ...) to the values given (only those given);
``start(spec, task, thread_id=None)``
    a new run; returns when it ends or pauses (awaiting a person, stopped);
``answer(thread_id, "approve" | "deny", reason=None)``
    answer the approval a run waits for;
``resume(thread_id)``
    continue a run (what it does in each state: :mod:`vnc_use.runs.rules`);
``result(thread_id)``
    how a run stands, without running anything;
``stop(thread_id)``
    a stop at the next step boundary, asked for from any process (the run ends
    ``interrupted`` and can be resumed);
``takeover(thread_id, person, force=False)``
    a person takes the run's desktop: the run pauses at its next step boundary and waits
    (``awaiting_human``, its desktop kept for it: :mod:`vnc_use.runs.takeover`);
``handback(thread_id, note=None, person=None)``
    the desktop handed back (or the model's question answered): the run goes on from a
    fresh screenshot, here, and the model is told what the person did and the note.

Every verb returns a :class:`~vnc_use.agent.state.RunResult` (``stop``: None) and refuses
with a one-line :class:`~vnc_use.errors.ConfigError` what the run rules refuse. ``answer``
and ``resume`` take the run's spec as that leg should use it (``spec=``; default: the one the
run keeps) and, for ``resume``, a raised cost cap (``max_cost=``).
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from vnc_use.errors import ConfigError
from vnc_use.runs import rules
from vnc_use.runs.spec import RunSpec
from vnc_use.status import RunStatus

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from vnc_use.agent.context import AgentSettings
    from vnc_use.agent.state import RunResult
    from vnc_use.desktops.base import Desktop
    from vnc_use.desktops.target import ReachedDesktop
    from vnc_use.providers.base import Planner
    from vnc_use.runs.agent import VncUseAgent
    from vnc_use.store.storage import Storage

__all__ = [
    "Decision",
    "Executor",
    "LocalExecutor",
    "ServedExecutor",
    "flag_of",
    "refusal",
    "served_state",
]

Decision = Literal["approve", "deny"]


@runtime_checkable
class Executor(Protocol):
    """One place a run executes (see the module's doc)."""

    kind: str
    """``local``, ``served`` or ``fleet`` (what ``run.json``'s ``kind`` says of its runs)."""
    flags: str
    """The door's options that name this executor, as a person repeats them in a command
    (``""``, ``"--server URL"``, ``"--fleet URL"``)."""

    def refuse(
        self, spec: RunSpec | None, given: Mapping[str, Any], verb: str = "run"
    ) -> str | None:
        """One line naming the options of ``verb`` this executor cannot honour, or None."""
        ...

    def start(self, spec: RunSpec, task: str, thread_id: str | None = None) -> RunResult:
        """Start a new run of ``task``; returns when it ends or pauses."""
        ...

    def answer(
        self,
        thread_id: str,
        decision: Decision,
        reason: str | None = None,
        *,
        spec: RunSpec | None = None,
    ) -> RunResult:
        """Approve or deny the call run ``thread_id`` waits on; returns when it next ends or
        pauses."""
        ...

    def resume(
        self, thread_id: str, *, spec: RunSpec | None = None, max_cost: float | None = None
    ) -> RunResult:
        """Continue run ``thread_id`` (see :mod:`vnc_use.runs.rules`)."""
        ...

    def result(self, thread_id: str) -> RunResult:
        """How run ``thread_id`` stands now."""
        ...

    def stop(self, thread_id: str) -> None:
        """Ask run ``thread_id`` to stop at its next step boundary (it ends ``interrupted``)."""
        ...

    def takeover(self, thread_id: str, person: str, *, force: bool = False) -> RunResult:
        """A person takes run ``thread_id``'s desktop; returns once the run waits for them."""
        ...

    def handback(
        self,
        thread_id: str,
        note: str | None = None,
        *,
        person: str | None = None,
        spec: RunSpec | None = None,
    ) -> RunResult:
        """Hand run ``thread_id`` back (or answer the model's question with ``note``);
        returns when it next ends or pauses."""
        ...

    def where(self, result: RunResult) -> str:
        """Where the run executed, for its outcome's first line (``""``, ``" on URL"``)."""
        ...

    def report_line(self, result: RunResult) -> str | None:
        """Where the run's report is (one line), or None."""
        ...

    def close(self) -> None:
        """Let go of what the executor opened."""
        ...


def flag_of(name: str) -> str:
    """How the command line spells option ``name``: a setting's own flag (``vnc_user``:
    ``--vnc-user``, ``video``: ``--video/--no-video``), else the name with dashes."""
    from vnc_use.runs.spec import run_settings

    flags = {s.name: s.flags for _, s in run_settings()}
    return flags.get(name) or "--" + name.replace("_", "-")


def refusal(names: list[str], tail: str) -> str | None:
    """The one line of a refusal: ``--a, --b cannot go with ...: tail`` (None: nothing)."""
    return f"{', '.join(names)} {tail}" if names else None


LOCAL_REFUSES = {"label": "--label"}
"""Options only another executor honours (``--label``: the fleet's queue)."""


class LocalExecutor:
    """Runs in this process, through :class:`~vnc_use.runs.agent.VncUseAgent` (one agent,
    reused while the spec stays the same: an approve loop keeps its VNC connection).

    ``runs_dir`` is where runs continued by id are found (their ``run.json``); the live parts
    a spec cannot hold are given here: the desktop ``reached`` by the caller (a bridge, the
    local desktop), a ``desktop`` to act on instead, a ``planner``, a VNC password, the
    values of the sensitive names, the checkpointer, the events' listener, ``settings`` (how
    the screen settles, ...)."""

    kind = "local"
    flags = ""

    def __init__(
        self,
        runs_dir: str | Path = "runs",
        *,
        checkpointer: BaseCheckpointSaver[Any] | str | Path | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        reached: ReachedDesktop | None = None,
        desktop: Desktop | None = None,
        planner: Planner | None = None,
        vnc_password: str | None = None,
        sensitive_text: Mapping[str, str] | None = None,
        settings: AgentSettings | None = None,
    ) -> None:
        self.runs_dir = Path(runs_dir)
        self.checkpointer = checkpointer
        self.on_event = on_event
        self.reached = reached
        self.desktop = desktop
        self.planner = planner
        self.vnc_password = vnc_password
        self.sensitive_text = sensitive_text
        self.settings = settings
        self._agent: VncUseAgent | None = None
        self._running: set[str] = set()
        self._lock = threading.Lock()

    # -- the agent ---------------------------------------------------------------------------
    def agent(self, spec: RunSpec | None = None) -> VncUseAgent:
        """The agent of ``spec`` (the one open, when its spec is the same; else a new one)."""
        from vnc_use.runs.agent import VncUseAgent

        if spec is None:
            if self._agent is None:
                raise ConfigError("no run is open here: start one, or name its thread id")
            return self._agent
        if self._agent is not None and self._agent.spec == spec:
            return self._agent
        self.close()
        self._agent = VncUseAgent.from_spec(
            spec,
            desktop=self.desktop,
            reached=self.reached,
            planner=self.planner,
            vnc_password=self.vnc_password,
            settings=self.settings,
            on_event=self.on_event,
            sensitive_text=self.sensitive_text,
            checkpointer=self.checkpointer,
        )
        return self._agent

    def spec_of(self, thread_id: str) -> RunSpec:
        """The spec run ``thread_id`` keeps (its ``run.json`` in ``runs_dir``)."""
        from vnc_use.record import run_record

        path = run_record.path_of(self.runs_dir / thread_id)
        if not path.exists():
            raise ConfigError(f"no run {thread_id!r} in {self.runs_dir} (looked for {path})")
        spec = RunSpec.from_run_json(run_record.read(path.parent).settings())
        spec.runs_dir = str(self.runs_dir)
        return spec

    def _leg(self, thread_id: str | None, go: Callable[[], RunResult]) -> RunResult:
        if thread_id is not None:
            with self._lock:
                self._running.add(thread_id)
        try:
            return go()
        finally:
            if thread_id is not None:
                with self._lock:
                    self._running.discard(thread_id)

    # -- the verbs ---------------------------------------------------------------------------
    def refuse(
        self, spec: RunSpec | None, given: Mapping[str, Any], verb: str = "run"
    ) -> str | None:
        names = [flag for name, flag in LOCAL_REFUSES.items() if name in given]
        return refusal(
            names,
            "cannot apply to a run in this process: it is the fleet's queue (add --fleet URL) "
            "or drop it",
        )

    def start(self, spec: RunSpec, task: str, thread_id: str | None = None) -> RunResult:
        from vnc_use.record.folder import check_thread_id

        agent = self.agent(spec)
        tid = check_thread_id(thread_id or uuid.uuid4().hex[:12])
        return self._leg(tid, lambda: agent.run(task=task, thread_id=tid))

    def answer(
        self,
        thread_id: str,
        decision: Decision,
        reason: str | None = None,
        *,
        spec: RunSpec | None = None,
    ) -> RunResult:
        agent = self._agent_for(thread_id, spec)
        if decision == "approve":
            return self._leg(thread_id, lambda: agent.approve(thread_id))
        return self._leg(thread_id, lambda: agent.deny(thread_id, reason))

    def resume(
        self, thread_id: str, *, spec: RunSpec | None = None, max_cost: float | None = None
    ) -> RunResult:
        if spec is None:
            spec = self._agent.spec if self._agent and self._open_on(thread_id) else None
        spec = spec or self.spec_of(thread_id)
        if max_cost is not None:
            spec = replace(spec, max_cost=max_cost)
        agent = self.agent(spec)
        return self._leg(thread_id, lambda: agent.resume(thread_id))

    def result(self, thread_id: str) -> RunResult:
        if self._open_on(thread_id):
            assert self._agent is not None
            return self._agent.result(thread_id)
        with self._stored(thread_id) as (_, snap):
            from vnc_use.agent.outcome import run_outcome

            return run_outcome(
                snap.values,
                snap.next,
                [i.value for i in snap.interrupts],
                thread_id=thread_id,
                run_dir=str(self.runs_dir / thread_id),
            )

    def stop(self, thread_id: str) -> None:
        """Stop the run at its next step boundary: at once when it runs in this process,
        else through its journal (the leg running it, in any process, watches it)."""
        with self._lock:
            here = thread_id in self._running and self._agent is not None
        if here:
            assert self._agent is not None
            self._agent.request_stop()
            return
        from vnc_use.runs.leg import run_state

        with self._stored(thread_id) as (storage, snap):
            rules.check("stop", thread_id, run_state(snap))
            storage.journal(thread_id).request_stop()

    def takeover(self, thread_id: str, person: str, *, force: bool = False) -> RunResult:
        """Take the run's desktop for ``person`` (:mod:`vnc_use.runs.takeover`): the leg
        acting for it, in any process, pauses at its next step boundary (this waits until it
        has); a run nobody acts for is paused here."""
        from vnc_use import config
        from vnc_use.runs.takeover import take_over

        with self._stored(thread_id) as (storage, _):
            return take_over(
                storage,
                self.runs_dir,
                thread_id,
                person,
                force=force,
                secrets=list(config.secret_values()),
            )

    def handback(
        self,
        thread_id: str,
        note: str | None = None,
        *,
        person: str | None = None,
        spec: RunSpec | None = None,
    ) -> RunResult:
        agent = self._agent_for(thread_id, spec)
        return self._leg(thread_id, lambda: agent.handback(thread_id, note, person=person))

    @contextlib.contextmanager
    def _stored(self, thread_id: str) -> Iterator[tuple[Storage, Any]]:
        """The run's storage and checkpointed state, read without a desktop or a model."""
        from vnc_use.agent.graph import build_graph
        from vnc_use.record.folder import check_thread_id
        from vnc_use.runs.open import open_run_storage

        check_thread_id(thread_id)
        storage = open_run_storage(self.checkpointer, self.runs_dir)
        try:
            graph = build_graph().compile(checkpointer=storage.checkpointer)
            snap = graph.get_state({"configurable": {"thread_id": thread_id}})
            if not snap.values:
                raise ConfigError(f"no run with thread id {thread_id!r} in {storage.described}")
            yield storage, snap
        finally:
            storage.close()

    def request_stop(self) -> None:
        """Stop whatever runs here at its next step boundary (a signal handler's stop)."""
        if self._agent is not None:
            self._agent.request_stop()

    def where(self, result: RunResult) -> str:
        return ""

    def report_line(self, result: RunResult) -> str | None:
        return f"run folder: {result.run_dir}"

    def _open_on(self, thread_id: str) -> bool:
        return self._agent is not None and Path(self._agent.spec.runs_dir) == self.runs_dir

    def _agent_for(self, thread_id: str, spec: RunSpec | None) -> VncUseAgent:
        if spec is None and self._open_on(thread_id):
            assert self._agent is not None
            return self._agent
        return self.agent(spec or self.spec_of(thread_id))

    def close(self) -> None:
        if self._agent is not None:
            agent, self._agent = self._agent, None
            agent.close()

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


SERVED_REFUSES = {
    "view": "--view",
    "reconnect_window": "--reconnect-window",
    "vnc_password": "--vnc-password",
    "checkpointer": "--checkpointer",
    "label": "--label",
    "fleet": "--fleet",
}
"""Options that act in this process (or on the fleet): a served run cannot honour them."""
SERVED_LEG_HONOURS = frozenset({"max_cost"})
"""What ``approve``/``deny``/``resume --server`` honour besides the thread: resume's cap."""


class ServedExecutor:
    """Runs on LangGraph Server at ``url`` (the graph of :mod:`vnc_use.runs.serve`): the spec
    goes as the run's context (never a secret: names of variables only), the task as its
    input; ``on_event`` gets the run's events from the custom stream."""

    kind = "served"

    def __init__(
        self,
        url: str,
        *,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        metadata: Mapping[str, Any] | None = None,
        on_run_created: Callable[[str, str], None] | None = None,
    ) -> None:
        from vnc_use.runs import remote

        self.url = url
        self.flags = f"--server {url}"
        self.on_event = on_event or (lambda _event: None)
        self.metadata = dict(metadata or {})
        """More metadata for the threads it creates (``eval`` names its run there)."""
        self.on_run_created = on_run_created
        """Told ``(thread_id, run_id)`` of each run the server creates for a verb."""
        self.api = remote.client(url)

    def refuse(
        self, spec: RunSpec | None, given: Mapping[str, Any], verb: str = "run"
    ) -> str | None:
        if verb != "run":  # a later leg: the spec the server keeps for the thread applies
            names = [flag_of(n) for n in given if n not in SERVED_LEG_HONOURS]
            return refusal(
                sorted(names),
                f"cannot go with {verb} --server: a later leg of a served run uses the spec "
                "the server keeps for it (only resume's --max-cost changes it); drop them",
            )
        names = [flag for name, flag in SERVED_REFUSES.items() if name in given]
        line = refusal(
            names,
            "cannot apply with --server: the run acts on the server's side (its desktop, "
            "environment and database; a password: name the server's variable with "
            "--vnc-password-env); drop them",
        )
        if line is None and verb == "run" and spec is not None and spec.desktop.local:
            return (
                "--server needs --vnc HOST::PORT or --rdp HOST[:PORT]: the desktop the server "
                "connects to"
            )
        return line

    def _follow(self, tid: str, **run: Any) -> RunResult:
        from vnc_use.runs import remote

        def created(metadata: dict[str, Any]) -> None:
            if self.on_run_created is not None:
                self.on_run_created(tid, str(metadata["run_id"]))

        remote.follow(self.api, tid, self.on_event, on_run_created=created, **run)
        return remote.outcome(self.api, tid)

    def start(self, spec: RunSpec, task: str, thread_id: str | None = None) -> RunResult:
        from vnc_use.runs import remote

        if not task or not task.strip():
            raise ConfigError("the task is empty: say in plain words what the agent should do")
        where = spec.desktop.vnc_server if not spec.desktop.rdp_server else spec.desktop.rdp_server
        with remote.reaching(self.url):
            thread = self.api.threads.create(
                thread_id=thread_id,  # the server's rule: a UUID (422 otherwise)
                metadata={
                    "task": task,
                    "vnc": where if not spec.desktop.rdp_server else f"rdp://{where}",
                    **self.metadata,
                },
            )
            tid = str(thread["thread_id"])
            return self._follow(tid, input={"task": task}, context=spec.to_json())

    def _state(self, tid: str) -> tuple[str, dict[str, Any]]:
        """The thread's state for the run rules, and its values."""
        thread = self.api.threads.get(tid)
        found = self.api.threads.get_state(tid) or {}
        values: dict[str, Any] = found.get("values") or {}
        if not values:
            raise ConfigError(f"no run with thread id {tid!r} on {self.url}")
        return served_state(thread, found), values

    def state(self, thread_id: str) -> str:
        """The run's state as the run rules read it (:func:`served_state`), asked of the
        server (a door checks a verb with it before it starts a leg that carries it out)."""
        from vnc_use.runs import remote

        with remote.reaching(self.url):
            return self._state(thread_id)[0]

    def answer(
        self,
        thread_id: str,
        decision: Decision,
        reason: str | None = None,
        *,
        spec: RunSpec | None = None,
    ) -> RunResult:
        from vnc_use.runs import remote

        with remote.reaching(self.url):
            state, _ = self._state(thread_id)
            rules.check(decision, thread_id, state)
            answer: Any = {"decision": decision, "reason": reason} if reason else decision
            return self._follow(thread_id, command={"resume": answer})

    def resume(
        self, thread_id: str, *, spec: RunSpec | None = None, max_cost: float | None = None
    ) -> RunResult:
        from vnc_use.runs import remote
        from vnc_use.runs.spec import SPEC_NAMESPACE

        with remote.reaching(self.url):
            state, values = self._state(thread_id)
            way = rules.check("resume", thread_id, state)
            if way == "show":
                return remote.outcome(self.api, thread_id)
            leg: dict[str, Any] = {"input": None}
            if way == "reopen":
                self.api.threads.update_state(thread_id, rules.reopened(values), as_node="act")
            if max_cost is not None:  # the cap the thread's spec keeps for its later legs
                item = self.api.store.get_item(list(SPEC_NAMESPACE), thread_id) or {}
                leg["context"] = {**(item.get("value") or {}), "max_cost": max_cost}
            return self._follow(thread_id, **leg)

    def result(self, thread_id: str) -> RunResult:
        from vnc_use.runs import remote

        with remote.reaching(self.url):
            return remote.outcome(self.api, thread_id)

    def stop(self, thread_id: str) -> None:
        """Cancel the thread's run on the server, keeping its checkpoints (LangGraph Server's
        ``interrupt`` cancel); ``resume`` continues it from its last step (the journal keeps
        an action from running twice)."""
        from vnc_use.runs import remote

        with remote.reaching(self.url):
            state, _ = self._state(thread_id)
            rules.check("stop", thread_id, state)
            for run in self.api.runs.list(thread_id, status="running") or []:
                self.api.runs.cancel(thread_id, run["run_id"], action="interrupt")

    def _holds(self, thread_id: str) -> tuple[Any, Any]:
        """The thread's spec (the server keeps it) and its desktop's holds, in the database
        the server keeps them in (``VNC_USE_DATABASE_URL``, else the spec's runs folder: this
        machine must share it with the server)."""
        from vnc_use import config
        from vnc_use.runs.spec import SPEC_NAMESPACE
        from vnc_use.store.storage import open_storage

        item = self.api.store.get_item(list(SPEC_NAMESPACE), thread_id) or {}
        spec = RunSpec.from_json(item.get("value") or {})
        storage = open_storage(config.database_url(), Path(spec.runs_dir))
        return spec, storage

    def takeover(self, thread_id: str, person: str, *, force: bool = False) -> RunResult:
        """A person takes a served run's desktop: a leg under way pauses itself at its next
        step boundary (the server's leg checks the hold); an idle thread is paused here."""
        import time as clock

        from vnc_use.runs import remote

        with remote.reaching(self.url):
            state, _ = self._state(thread_id)
            rules.check("takeover", thread_id, state)
            spec, storage = self._holds(thread_id)
            try:
                holds = storage.holds(spec.desktop_key)
                holds.check_take(thread_id, force)
                hold = holds.take(thread_id, person)
                human = {"asked_by": "person", "holder": person, "since": hold.since}
                human["epoch"] = hold.epoch
                deadline = clock.monotonic() + spec.lease_timeout
                while self.api.threads.get(thread_id).get("status") == "busy":
                    if clock.monotonic() >= deadline:
                        raise ConfigError(
                            f"run {thread_id!r} did not reach a step boundary within "
                            f"{spec.lease_timeout:g} s; it pauses at its next one"
                        )
                    clock.sleep(0.2)
                values = (self.api.threads.get_state(thread_id) or {}).get("values") or {}
                if (values.get("human") or {}).get("epoch") != hold.epoch:
                    update = {"status": "awaiting_human", "done": True, "human": human}
                    self.api.threads.update_state(thread_id, update, as_node="act")
                return remote.outcome(self.api, thread_id)
            finally:
                storage.close()

    def handback(
        self,
        thread_id: str,
        note: str | None = None,
        *,
        person: str | None = None,
        spec: RunSpec | None = None,
    ) -> RunResult:
        """Hand a served run back: its next leg runs on the server, from a fresh screenshot."""
        import time as clock

        from vnc_use.agent.human import handed_back
        from vnc_use.runs import remote

        with remote.reaching(self.url):
            state, values = self._state(thread_id)
            rules.check("handback", thread_id, state)
            human = dict(values.get("human") or {})
            kept, storage = self._holds(thread_id)
            try:
                holds = storage.holds(kept.desktop_key)
                hold = holds.held_for(thread_id)
                if hold is not None and person and hold.holder and person != hold.holder:
                    raise ConfigError(
                        f"run {thread_id!r} is held by {hold.describe()}, not by {person}: "
                        f"only they hand it back (or take it first: vnc-use takeover "
                        f"{thread_id} --force)"
                    )
                if hold is not None:
                    holds.free(thread_id, person or hold.holder)
            finally:
                storage.close()
            since = float((hold.since if hold else None) or human.get("since") or clock.time())
            returned: dict[str, Any] = {
                "asked_by": human.get("asked_by", "model"),
                "note": (note or "").strip() or None,
                "seconds": round(max(0.0, clock.time() - since), 1),
            }
            if returned["asked_by"] == "person":
                from vnc_use.runs.takeover import person_input

                returned.update(person_input(Path(kept.runs_dir) / thread_id, since))
            update = handed_back(values, returned)
            self.api.threads.update_state(thread_id, update, as_node="act")
            return self._follow(thread_id, input=None)

    def where(self, result: RunResult) -> str:
        return f" on {self.url}"

    def report_line(self, result: RunResult) -> str | None:
        from vnc_use.record.report import REPORT_NAME

        if not result.run_dir:
            return None
        report = Path(result.run_dir) / REPORT_NAME
        if report.exists():
            return f"report: {report}"
        if Path(result.run_dir).exists():  # here, but the run recorded no outcome
            return None
        return f"report: {report} (on the server's machine)"

    def close(self) -> None:
        """Nothing to let go: the client holds no connection between calls."""


def served_state(thread: Mapping[str, Any], found: Mapping[str, Any]) -> str:
    """A served thread's state as the run rules read it, from the server's thread (its
    status: ``busy`` runs) and its state (values, next nodes, pending interrupts: a person's
    approval); a thread stopped or failed with a step left is ``interrupted`` (the server says
    ``interrupted`` of a cancelled thread too: only a pending interrupt waits for a person)."""
    values = found.get("values") or {}
    status = str(values.get("status") or RunStatus.RUNNING.value)
    pending = [i for task in found.get("tasks") or [] for i in task.get("interrupts") or []]
    return rules.state_of(
        status,
        waiting=bool(pending),
        under_way=thread.get("status") == "busy",
        # a run cancelled just after a node wrote (its writes kept, the step not committed)
        # has that task among the state's tasks but not in its next nodes: a resume goes on
        step_left=bool(found.get("next")) or bool(found.get("tasks")),
    )
