"""One life of a leg, and the one writer of ``run.json``.

A leg is one stretch of a run in one process: lease the desktop, open the run folder (its
listeners, its redaction), write ``run.json`` (the first leg), reach and connect the desktop,
record a video segment, run the graph, record the outcome, close. :class:`RunHost` walks it
for :class:`~vnc_use.runs.agent.VncUseAgent` (its face), so for every door that runs in a
process of its own: ``vnc-use run`` and its verbs (:class:`~vnc_use.runs.executor.LocalExecutor`),
``eval``, MCP ``run_task``, the fleet's workers (``kind`` ``fleet``), and for LangGraph
Server (:mod:`vnc_use.runs.serve`, ``kind`` ``served``), where the server invokes the graph:
:meth:`RunHost.hosted_leg` lives the same leg up to the graph and binds its parts to the
server's graph; :meth:`HostedLeg.finish` records the outcome from the state the server left.

The graph itself (nodes, routing) is in :mod:`vnc_use.agent.graph`; :class:`RunHost` compiles
it with a checkpointer (SQLite in the runs folder, or PostgreSQL: :mod:`vnc_use.store.storage`),
connects the desktop and the model, holds the desktop's lease while the run acts
(:mod:`vnc_use.store.lease`), watches for a stop asked for from any process (a stop request in
the run's journal), and turns the graph's state into a :class:`~vnc_use.agent.state.RunResult`.

:func:`run_record_of` is the one place a run's ``run.json`` is composed, for every kind of run
(``local``, ``served``, ``fleet``, the MCP tool session's ``mcp-session``): the same keys
whatever wrote it (:data:`RECORD_KEYS`; a value the run does not have is null), the run's
spec as given (:meth:`RunSpec.to_record`) with what the run resolved on top (the planner's
settings, the budgets it uses, where its desktop is and how it was reached).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import GraphDrained
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import RunControl
from langgraph.types import Command

from vnc_use import config
from vnc_use.agent import approval as safety
from vnc_use.agent.context import AgentContext, AgentSettings
from vnc_use.agent.graph import build_graph
from vnc_use.agent.outcome import record_outcome, run_outcome
from vnc_use.agent.state import CUAState, RunResult
from vnc_use.desktops.address import parse_server
from vnc_use.desktops.base import Desktop, recordable
from vnc_use.desktops.keyboard import KeyboardLimits
from vnc_use.desktops.region import ScreenRegion
from vnc_use.desktops.rfb_security import Security
from vnc_use.desktops.target import (
    ReachedDesktop,
    reach,
)
from vnc_use.errors import (
    ConfigError,
    VncAuthError,
    VncConnectionError,
    VncError,
    VncTimeoutError,
    VncUseError,
)
from vnc_use.providers.base import Planner
from vnc_use.providers.pricing import price_for
from vnc_use.record import run_record
from vnc_use.record.folder import FolderStore, RunFolder, check_thread_id
from vnc_use.record.report import write_report_safely
from vnc_use.record.video import VideoRecorder
from vnc_use.replay.compare import DEFAULT_TOLERANCE
from vnc_use.runs import rules
from vnc_use.runs.open import (
    check_writable,
    open_planner,
    open_run_storage,
    run_folder,
    sensitive_values,
)
from vnc_use.runs.spec import RunSpec
from vnc_use.status import RunStatus
from vnc_use.store.holds import DesktopHolds, Hold, leg_fence
from vnc_use.store.journal import import_jsonl
from vnc_use.store.lease import LeaseBusy

if TYPE_CHECKING:  # imported when first connecting: Twisted stays out of desktop= runs
    from vnc_use.desktops.vnc import VNCController

__all__ = [
    "RECORD_KEYS",
    "HostedLeg",
    "RunHost",
    "run_record_of",
    "run_state",
    "write_run_record",
]

log = logging.getLogger(__name__)
_Host = TypeVar("_Host", bound="RunHost")

MISSING_SENSITIVE = "sensitive value {name}: give it (sensitive_text=) or set {variable}"

RECORD_KEYS: tuple[str, ...] = tuple(
    dict.fromkeys([*run_record.RunRecord.model_fields, *RunSpec().to_record()])
)
"""Every key of a ``run.json`` this version writes, for every kind of run."""


def run_record_of(
    kind: run_record.RunKind,
    thread_id: str,
    task: str,
    spec: RunSpec | None,
    *,
    planner: Mapping[str, Any] | None = None,
    settings: AgentSettings | None = None,
    where: Mapping[str, Any] | None = None,
    checkpointer: str | None = None,
    started: float | None = None,
) -> run_record.RunRecord:
    """The record of a new run: every key of :data:`RECORD_KEYS`, the spec's values (none
    for the MCP session, which has no model), the ``planner``'s settings and the budgets it
    runs with (``settings``) over them, then where its desktop is (``where``)."""
    data: dict[str, Any] = dict.fromkeys(RECORD_KEYS)
    if spec is not None:
        data.update(spec.to_record())
    data.update(planner or {})
    if settings is not None:
        data.update(
            keep_screenshots=settings.keep_screenshots,
            confirm_actions=list(settings.confirm_actions),
            step_limit=settings.step_limit,
            seconds_timeout=settings.seconds_timeout,
            hitl_mode=settings.hitl_mode,
            include_initial_screenshot=settings.include_initial_screenshot,
            stall_after=settings.stall_after,
            max_cost=settings.max_cost,
            price=list(settings.price) if settings.price else None,
        )
    data.update(where or {})
    data.update(
        kind=kind,
        thread_id=thread_id,
        task=task,
        started=time.time() if started is None else started,
        checkpointer=checkpointer,
        served=True if kind == "served" else None,
    )
    return run_record.RunRecord.from_json(data)


def write_run_record(folder: RunFolder, record: run_record.RunRecord) -> None:
    """Write the run's ``run.json`` (redacted like all its folder holds)."""
    run_record.write(folder, record)


class RunHost:
    """What hosts a run's legs in one process (see the module's doc): the desktop (reached,
    connected, reconnected), the storage, the graph; each leg leased, recorded, run,
    its outcome recorded. :class:`~vnc_use.runs.agent.VncUseAgent` is its face."""

    kind: run_record.RunKind = "local"
    """What its runs' ``run.json`` says of where they executed (a fleet's worker: ``fleet``)."""
    spec: RunSpec
    settings: AgentSettings
    planner: Planner
    on_event: Callable[[dict[str, Any]], None] | None
    sensitive_text: dict[str, str]

    # -- the verbs ---------------------------------------------------------------------------
    def run(self, task: str, thread_id: str | None = None) -> RunResult:
        """Start a run for ``task``; returns when it is done, paused for approval, or stopped."""
        if not task or not task.strip():
            raise ConfigError("the task is empty: say in plain words what the agent should do")
        thread_id = check_thread_id(thread_id or uuid.uuid4().hex[:12])
        if self._snapshot(thread_id).values:
            raise ConfigError(
                f"thread {thread_id!r} already exists: use resume/approve/deny, or a new id"
            )
        planner = self._planner_of(thread_id)
        # Fail before anything is recorded when the key or the desktop is missing.
        planner.check_ready()
        self._check_cost_cap(planner)
        with self._leased(thread_id):
            return self._start(task, thread_id, planner)

    def replay(
        self,
        thread_id: str,
        *,
        replay_id: str | None = None,
        tolerance: float | str | None = DEFAULT_TOLERANCE,
        speed: str = "fast",
        from_step: int = 1,
        masks: Sequence[str] = (),
        heal: bool = False,
    ) -> RunResult:
        """Perform the actions run ``thread_id`` (of this ``runs_dir``) performed, in order,
        without asking the model: a new run (``replay_id``, default a new id) with its own
        folder, events and report.

        Before each action the settled screen is compared with the one the recorded run had
        there (:mod:`vnc_use.replay.compare`): beyond ``tolerance`` percent of the screen
        (``"off"`` / None: never) the run stops before acting with status ``diverged``, unless
        ``heal``, which hands the rest of the task to this agent's model. ``speed``
        ``"recorded"`` waits as long as the recorded model took; ``from_step`` starts at that
        recorded step; ``masks`` (``WxH+X+Y`` in recorded pixels) are left out of the
        comparison. Grid coordinates map to this desktop's size; ``{{name}}`` placeholders take
        their values from ``sensitive_text`` again. ``resume`` continues an interrupted replay
        like any run (the journal keeps any action from running twice).
        """
        from vnc_use.replay import ReplayOptions, ReplayPlanner, load_recording

        options = ReplayOptions.make(tolerance, speed, from_step, masks, heal)
        recording = load_recording(self.runs_dir, thread_id, self.storage.journal(thread_id))
        planner = ReplayPlanner(recording, options, self.planner if heal else None)
        missing = sorted(recording.sensitive_names(planner.start) - set(self.sensitive_text))
        if missing:
            variable, _ = config.sensitive_value(missing[0])
            raise ConfigError(
                f"run {thread_id!r} types the sensitive value {{{{{missing[0]}}}}}: give it "
                f"again (sensitive_text=, or set {variable}); it is never kept in the record"
            )
        try:
            new_id = check_thread_id(replay_id or uuid.uuid4().hex[:12])
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if new_id == thread_id or self._snapshot(new_id).values:
            raise ConfigError(f"thread {new_id!r} already exists: give the replay an id of its own")
        self._replays[new_id] = planner
        folder = self._folder(new_id)
        for sha in recording.screenshots():  # the recorded screens, for the report
            try:
                folder.put_screenshot(recording.screenshot(sha))
            except ConfigError:
                if options.tolerance is not None:  # needed for the comparison
                    raise
        # room for every recorded step and the turn that ends the replay (with heal, the model
        # has what the step limit leaves)
        self.settings.step_limit = max(
            self.settings.step_limit, len(recording.steps) - planner.start + 1
        )
        # a replay performs what was recorded: actions that changed nothing then are no
        # stall now (its screens are checked against the recording instead)
        self.settings.stall_after = 0
        return self.run(recording.task, thread_id=new_id)

    def approve(self, thread_id: str) -> RunResult:
        """Approve the call a run is waiting on; the run goes on from there."""
        return self._answer(thread_id, safety.APPROVE)

    def deny(self, thread_id: str, reason: str | None = None) -> RunResult:
        """Deny the call a run is waiting on (``reason``: why, kept in its events); nothing is
        executed and the run stops."""
        return self._answer(thread_id, safety.DENY, reason)

    def resume(self, thread_id: str) -> RunResult:
        """Continue a run that stopped on request, on an error or a crash, or one that ended
        ``stuck`` (the model gets another chance) or at its cost cap (``cost_limit``: with a
        higher ``max_cost``; the running total is kept). A finished run is returned as it is;
        a run waiting for an approval is refused (:mod:`vnc_use.runs.rules`)."""
        snap = self._existing(thread_id)
        way = rules.check("resume", thread_id, run_state(snap))
        if way in ("continue", "reopen"):
            self._planner_of(thread_id).check_ready()  # before the desktop is touched
        folder = self._folder(thread_id)
        if way == "reopen":
            return self._continue_stopped(thread_id, folder, snap.values)
        if way == "show":
            return self._result(thread_id, folder, emit=False)
        with self._leased(thread_id):
            folder.event("resumed", thread_id=thread_id)
            return self._invoke(None, thread_id, folder)

    def handback(
        self, thread_id: str, note: str | None = None, *, person: str | None = None
    ) -> RunResult:
        """Continue a run that waits for a person (``awaiting_human``): the model's question
        answered with ``note``, or the desktop a person took over handed back (``person``:
        who hands it back; only the holder may, :mod:`vnc_use.runs.takeover`). The run goes
        on in this process from a fresh screenshot; the model's next request says what the
        person did (how long, their clicks and key presses: counts) and the note."""
        from vnc_use.agent.human import handed_back
        from vnc_use.runs.takeover import person_input

        snap = self._existing(thread_id)
        rules.check("handback", thread_id, run_state(snap))
        self._planner_of(thread_id).check_ready()  # before the desktop is touched
        human = dict(snap.values.get("human") or {})
        folder = self._folder(thread_id)
        with self._leased(thread_id, handing_back=person or config.person_name()) as hold:
            since = float((hold.since if hold else None) or human.get("since") or time.time())
            returned: dict[str, Any] = {
                "asked_by": human.get("asked_by", "model"),
                "note": (note or "").strip() or None,
                "seconds": round(max(0.0, time.time() - since), 1),
            }
            if returned["asked_by"] == "person":
                returned.update(person_input(folder.path, since))
            self.graph.update_state(
                self._config(thread_id), handed_back(snap.values, returned), as_node="act"
            )
            folder.event("handed_back", thread_id=thread_id, holder=person, **returned)
            return self._invoke(None, thread_id, folder)

    def result(self, thread_id: str) -> RunResult:
        """How a run stands now, without running anything."""
        self._existing(thread_id)
        return self._result(thread_id, self._folder(thread_id), emit=False)

    # -- internals ---------------------------------------------------------------------------

    # -- the host ----------------------------------------------------------------------------
    def _open(
        self,
        spec: RunSpec,
        *,
        desktop: Desktop | None,
        reached: ReachedDesktop | None,
        planner: Planner | None,
        vnc_password: str | None,
        settings: AgentSettings | None,
        on_event: Callable[[dict[str, Any]], None] | None,
        sensitive_text: Mapping[str, str] | None,
        checkpointer: BaseCheckpointSaver[Any] | str | Path | None,
        screen_size: tuple[int, int],
    ) -> None:
        spec.check()
        self.spec = spec
        self.runs_dir = Path(spec.runs_dir)
        self.lease_timeout = float(spec.lease_timeout)
        self.reconnect_window_s = float(spec.reconnect_window_s)
        #: Record each leg of a run on a VNC desktop into the run folder's video.mp4.
        self.video = spec.video
        self.video_fps = float(spec.video_fps)
        self._recorder: VideoRecorder | None = None
        self.screen_size = screen_size
        self.on_event = on_event
        #: Where the run folders' content also goes as it is written, and where a screenshot
        #: a folder lacks is fetched from (a fleet's database; None: the folder alone).
        self.folder_store: FolderStore | None = None
        if sensitive_text is None:
            sensitive_text = sensitive_values(spec.sensitive_names, missing=MISSING_SENSITIVE)
        self.sensitive_text = dict(sensitive_text)
        for name in self.sensitive_text:
            if not name.isidentifier():
                raise ConfigError(f"sensitive_text name {name!r}: use letters, digits and '_'")
        # Gemini: model picks the family (action set); environment "browser" | "desktop"
        # (None: the family's default); see vnc_use.providers.gemini.families.
        needs_reaching = desktop is None and reached is None and not _plain_vnc(spec)
        self.planner: Planner = open_planner(spec, planner, ready=needs_reaching)
        self.settings = spec.settings(self.planner, base=settings)
        self._exits = contextlib.ExitStack()
        self._given_desktop = desktop
        self._reach: ReachedDesktop | None = None
        if desktop is None:
            self._reach = reached or self._exits.enter_context(
                reach(spec.desktop, password=vnc_password, log_path=self.runs_dir / "freerdp.log")
            )
        if self._reach is not None and self._reach.bridged:
            self.reconnect_window_s = 0.0  # the bridge says when its RDP session ended
        #: The VNC server's address (None when the agent was given a ``desktop``).
        self.vnc_server = self._reach.server if self._reach is not None else None
        self._controller: VNCController | None = None
        self._replays: dict[str, Planner] = {}
        self._control: RunControl | None = None
        self._stop = threading.Event()
        check_writable(self.runs_dir)
        self.storage = open_run_storage(checkpointer, self.runs_dir)
        try:
            self.checkpointer: BaseCheckpointSaver[Any] = self.storage.checkpointer
        except BaseException:
            self.storage.close()
            self._exits.close()
            raise
        # the topology for state reads; each invocation compiles the same builder with the
        # run's live parts bound (as the LangGraph Server factory does per run)
        self.graph: CompiledStateGraph[CUAState, Any, CUAState, CUAState] = build_graph().compile(
            checkpointer=self.checkpointer
        )

    # -- the desktop's connection settings, as attributes (read-only) -----------------------
    @property
    def vnc_username(self) -> str | None:
        return self._reach.username if self._reach is not None else None

    @property
    def vnc_ca(self) -> str | None:
        return self._reach.ca_file if self._reach is not None else None

    @property
    def connect_timeout(self) -> float:
        return self.spec.desktop.connect_timeout

    @property
    def screen_region(self) -> ScreenRegion | None:
        return self._reach.screen_region if self._reach is not None else None

    @property
    def keyboard(self) -> KeyboardLimits | None:
        """Limits of the keyboard path behind the VNC server (the RDP bridge's), if any."""
        return self._reach.keyboard if self._reach is not None else None

    @property
    def rdp(self) -> dict[str, Any] | None:
        """The RDP connection behind the VNC server (an RDP bridge's settings, no secrets):
        run.json and the events then name ``rdp://HOST:PORT (via FreeRDP)``."""
        return self._reach.rdp if self._reach is not None else None

    @property
    def lost_reason(self) -> Callable[[], str | None] | None:
        """Says why the desktop went away for good (the RDP bridge: the session ended)."""
        return self._reach.lost_reason if self._reach is not None else None

    # -- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        """Disconnect from the VNC server and close the checkpoint database and journal (if it
        opened them); a ``desktop`` or ``checkpointer`` given to the agent is left as it is."""
        if self._controller is not None:
            self._controller.disconnect()
            self._controller = None
        try:
            self.storage.close()
        finally:
            self._exits.close()  # a desktop reached here (an RDP bridge) is let go

    def __enter__(self: _Host) -> _Host:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def desktop(self) -> Desktop:
        """The desktop the agent acts on: the one it was given, else :attr:`controller`."""
        if self._given_desktop is not None:
            return self._given_desktop
        return self.controller

    @property
    def controller(self) -> VNCController:
        """The VNC connection, opened on first use (and again after it was lost)."""
        if self.vnc_server is None:
            raise ConfigError("this agent was given a desktop= and has no VNC connection")
        if self._controller is None or not self._controller.is_connected():
            if self._controller is not None:
                self._controller.disconnect()
            assert self._reach is not None
            self._controller = self._reach.connect()
        return self._controller

    # -- runs --------------------------------------------------------------------------------
    def _start(self, task: str, thread_id: str, planner: Planner) -> RunResult:
        """Record and run a new run (its desktop leased)."""
        folder = self._folder(thread_id)
        started = self._record_new(folder, thread_id, task, planner)
        folder.event("run_started", thread_id=thread_id, task=task, **started)
        initial: CUAState = {
            "task": task,
            "pending_calls": [],
            "responses": [],
            "last_screenshot_png": None,
            "step": 0,
            "done": False,
            "safety": None,
            "approved_call": None,
            "call_index": 0,
            "status": "running",
            "final_text": "",
            "error": None,
            "model_calls": 0,
        }
        return self._invoke(initial, thread_id, folder)

    def _record_new(
        self, folder: RunFolder, thread_id: str, task: str, planner: Planner
    ) -> dict[str, Any]:
        """Write a new run's ``run.json`` (its desktop connected first: how it was reached
        is part of the record); returns what ``run_started`` says of the desktop."""
        where = self._where(self.desktop)
        record = run_record_of(
            self.kind,
            thread_id,
            task,
            replace(self.spec, video=self.video, video_fps=self.video_fps),
            planner=planner.run_settings(),
            settings=self.settings,
            where={"vnc_server": None, **where} if "desktop" in where else where,
            checkpointer=self.storage.described,  # never its password
        )
        write_run_record(folder, record)
        return {k: where[k] for k in ("desktop", "vnc_server", "security", "rdp") if k in where}

    def _planner_of(self, thread_id: str) -> Planner:
        """The planner of run ``thread_id``: a replay's own (rebuilt from its run.json in a
        new process, with this agent's model to heal with), else the agent's."""
        from vnc_use.replay import PROVIDER, ReplayPlanner, replay_planner_from_settings

        if thread_id in self._replays:
            return self._replays[thread_id]
        if isinstance(self.planner, ReplayPlanner):
            return self.planner
        record = run_record.load(self.runs_dir / thread_id)
        if record is None or record.provider != PROVIDER:
            return self.planner
        planner = replay_planner_from_settings(record.settings(), healer=self.planner)
        self._replays[thread_id] = planner
        return planner

    def _where(self, desktop: Desktop) -> dict[str, Any]:
        """What run.json records of the desktop: the VNC connection (address, user, CA file,
        timeout, security, region; never the password), or a given desktop's class name."""
        if self.vnc_server is None:
            return {"desktop": type(desktop).__name__}
        security = self._controller.security if self._controller is not None else None
        if self.rdp is not None:  # an RDP bridge: the RDP server is the desktop
            return {
                "vnc_server": self.rdp.get("label", self.vnc_server),
                "rdp": self.rdp,
                "connect_timeout": self.connect_timeout,
            }
        return {
            "vnc_server": self.vnc_server,
            "vnc_username": self.vnc_username,
            "vnc_ca": self.vnc_ca,
            "connect_timeout": self.connect_timeout,
            "security": _security_json(security),
            "screen_region": str(self.screen_region) if self.screen_region else None,
            **_local_desktop_dir(self._reach),
        }

    def _continue_stopped(
        self, thread_id: str, folder: RunFolder, values: dict[str, Any]
    ) -> RunResult:
        """Go on with a run that ended ``stuck`` or ``cost_limit`` (:func:`rules.reopened`);
        a cost cap not above the cost spent stops it again at once."""
        with self._leased(thread_id):
            self.graph.update_state(self._config(thread_id), rules.reopened(values), as_node="act")
            folder.event(
                "resumed",
                thread_id=thread_id,
                after=values.get("status"),
                max_cost=self.settings.max_cost,
            )
            run_record.update(folder, max_cost=self.settings.max_cost)
            return self._invoke(None, thread_id, folder)

    def _check_cost_cap(self, planner: Planner) -> None:
        """Refuse a cost cap on a model whose price is unknown (one line naming the fix)."""
        cap = self.settings.max_cost
        if cap is None:
            return
        if not cap > 0:
            raise ConfigError(f"--max-cost must be a positive number of USD, got {cap:g}")
        provider = planner.run_settings().get("provider")
        if price_for(planner.model, provider, self.settings.price) is None:
            raise ConfigError(
                f"--max-cost needs the price of {planner.model}, which vnc-use does not know: "
                "give it with --price INPUT/OUTPUT (USD per million tokens)"
            )

    def _answer(
        self, thread_id: str, decision: safety.Decision, reason: str | None = None
    ) -> RunResult:
        snap = self._existing(thread_id)
        rules.check(decision, thread_id, run_state(snap))
        folder = self._folder(thread_id)
        if decision == safety.APPROVE:  # the model is asked after the action: its key first
            self._planner_of(thread_id).check_ready()
        answer: Any = {"decision": decision, "reason": reason} if reason else decision
        with self._leased(thread_id):
            if decision == safety.APPROVE:
                self._connect_before_answering(thread_id)
            return self._invoke(Command(resume=answer), thread_id, folder)

    def _connect_before_answering(self, thread_id: str) -> None:
        """Reach the desktop before an approval is given to the run: a desktop that cannot
        be reached (a password, a server that is down) leaves the run waiting, as it was."""
        if self._given_desktop is not None:
            return
        try:
            _ = self.controller
        except (VncError, ConfigError) as exc:
            raise type(exc)(
                f"{exc} (run {thread_id} is still waiting for approval: nothing was done)"
            ) from None

    def _lease_key(self) -> str | None:
        """The address the desktop's lease is keyed by (None: a given desktop has none)."""
        if self.vnc_server is None:
            return None
        return self.spec.desktop.lease_key if self.spec.desktop.rdp_server else self.vnc_server

    @contextlib.contextmanager
    def _leased(self, thread_id: str, handing_back: str | None = None) -> Iterator[Hold | None]:
        """Hold the desktop's lease (a VNC address; a given desktop has none) for the block.

        A desktop a person holds (:mod:`vnc_use.store.holds`) is not taken: for another run
        it is busy (waited for like a lease); for this run only a hand-back by the holder
        (``handing_back``: who hands it back) goes on, and frees it; the block gets the hold
        it freed."""
        key = self._lease_key()
        if key is None:
            yield None
            return
        lease = self.storage.lease(key, thread_id)

        def waiting(holder: str | None) -> None:  # the run has no folder yet: tell on_event
            if self.on_event is not None:
                who = f"run {holder}" if holder else "another run"
                self.on_event(
                    {
                        "event": "waiting_for_desktop",
                        "thread_id": thread_id,
                        "holder": holder,
                        "message": f"the desktop {lease.desktop} is in use by {who}; waiting "
                        f"up to {self.lease_timeout:g} s",
                    }
                )

        holds = self.storage.holds(key)
        deadline = time.monotonic() + self.lease_timeout
        told = False
        while True:
            try:
                lease.acquire(max(0.0, deadline - time.monotonic()), waiting)
            except LeaseBusy as busy:  # named with the whole wait
                raise LeaseBusy(busy.desktop, busy.holder, self.lease_timeout) from None
            with contextlib.ExitStack() as held:
                held.callback(lease.release)
                other = holds.held_for_other(thread_id)
                if other is None:
                    yield _person_hold(holds, thread_id, handing_back)
                    return
            if time.monotonic() >= deadline:  # a person holds it for another run
                raise LeaseBusy(lease.desktop, other.run, self.lease_timeout, person=other)
            if not told:
                waiting(other.run)
                told = True
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))

    def _config(self, thread_id: str) -> Any:
        return {"configurable": {"thread_id": thread_id}}

    def _snapshot(self, thread_id: str) -> Any:
        return self.graph.get_state(self._config(thread_id))

    def _existing(self, thread_id: str) -> Any:
        check_thread_id(thread_id)
        snap = self._snapshot(thread_id)
        if not snap.values:
            where = self.storage.described
            raise ConfigError(f"no run with thread id {thread_id!r} in {where}")
        return snap

    def _folder(self, thread_id: str) -> RunFolder:
        return run_folder(
            self.runs_dir, thread_id, self._secrets(), self.on_event, self.folder_store
        )

    def _secrets(self) -> list[str | None]:
        return [
            self._reach.password if self._reach is not None else None,
            *self.storage.secrets,
            *config.secret_values(),
            *self.sensitive_text.values(),
        ]

    def request_stop(self) -> None:
        """Stop the current run at the next step boundary (safe from a signal handler or
        another thread); it returns with status ``interrupted`` and can be resumed."""
        self._stop.set()
        if self._control is not None:
            self._control.request_drain("stop requested")

    def _invoke(self, inp: Any, thread_id: str, folder: RunFolder) -> RunResult:
        """Run the graph; reconnect and continue when the desktop drops out for a while."""
        try:
            with self._segment(thread_id, folder) as journal:
                return self._legs(inp, thread_id, folder, journal)
        finally:  # a leg cut short by an exception leaves no step's events out of it
            folder.keep_summary()

    @contextlib.contextmanager
    def _segment(self, thread_id: str, folder: RunFolder) -> Iterator[Any]:
        """The acting part of a leg (its lease held, its folder open): the run's journal
        (yielded), the leg's video segment, and a stop asked for from any process."""
        self._stop.clear()
        journal = self.storage.journal(thread_id)
        import_jsonl(journal, folder.path / "journal.jsonl")  # a run of an older version

        def stop_asked() -> None:  # by another process (vnc-use stop, an executor's stop)
            folder.event(
                "stop_requested",
                thread_id=thread_id,
                message="a stop was asked for (vnc-use stop): stopping after this step",
            )
            self.request_stop()

        with self._recording(folder), _watching_stops(journal, stop_asked):
            yield journal

    def _context(
        self,
        thread_id: str,
        folder: RunFolder,
        journal: Any,
        fence: Callable[[], dict[str, Any] | None] | None,
    ) -> AgentContext:
        """The live parts the graph's nodes act with (the desktop connected, feeding the
        leg's video segment)."""
        ctx = AgentContext(
            desktop=self.desktop,
            planner=self._planner_of(thread_id),
            run=folder,
            settings=self.settings,
            journal=journal,
            secrets=self.sensitive_text,
            stop=self._stop,
            fence=fence,
        )
        self._record_video_of(ctx.desktop)
        return ctx

    @contextlib.contextmanager
    def hosted_leg(self, thread_id: str) -> Iterator[HostedLeg]:
        """One leg of a run whose graph another host invokes (LangGraph Server: the factory
        of :mod:`vnc_use.runs.serve`), lived as a leg this host runs itself: the desktop's
        lease (a person's hold on it included), the run folder, ``run.json`` (a first leg:
        its task is recorded when it enters the graph, :meth:`HostedLeg.started`; a cost cap
        it cannot keep refused first, as :meth:`run` refuses it), the
        desktop, the video segment and the stop watch. The host reads the graph's state as
        the leg left it and hands it to :meth:`HostedLeg.finish` before the block ends."""
        planner = self._planner_of(thread_id)
        first = run_record.load(self.runs_dir / thread_id) is None
        if first:  # as run() does, before anything is recorded
            self._check_cost_cap(planner)
        with self._leased(thread_id):
            folder = self._folder(thread_id)
            if first:
                self._record_new(folder, thread_id, "", planner)
            else:  # a later leg: a cap raised on resume (--max-cost) is the run's cap now
                run_record.update(folder, max_cost=self.settings.max_cost)
            with self._segment(thread_id, folder) as journal:
                ctx = self._context(thread_id, folder, journal, self._fence(thread_id))
                label = self._reach.label if self._reach is not None else None
                yield HostedLeg(self, thread_id, ctx, label)

    def _legs(self, inp: Any, thread_id: str, folder: RunFolder, journal: Any) -> RunResult:
        """The graph's invocations of one leg: again after each reconnect."""
        error: str | None = None
        interrupted = False
        deadline: float | None = None
        fence = self._fence(thread_id)
        while True:
            self._control = RunControl()
            try:
                ctx = self._context(thread_id, folder, journal, fence)
                # "sync": each step's checkpoint is on disk before the next step starts, so
                # a process killed at any point resumes from the step it was in.
                graph = build_graph(live=ctx).compile(checkpointer=self.checkpointer)
                graph.invoke(
                    inp,
                    self._config(thread_id),
                    durability="sync",
                    control=self._control,
                )
            except GraphDrained:
                interrupted = True
                folder.event("interrupted", reason="stop requested")
            except (VncConnectionError, VncTimeoutError) as exc:
                if deadline is None:
                    deadline = time.monotonic() + self.reconnect_window_s
                folder.event("connection_lost", message=str(exc))
                gone = self.lost_reason() if self.lost_reason is not None else None
                if self.vnc_server is None or gone:  # nothing to reconnect to
                    error = (
                        f"{gone}. The run is saved: continue it with 'vnc-use resume {thread_id}'"
                        if gone
                        else f"{exc}. The run is saved: continue it with resume({thread_id!r})"
                    )
                    folder.event("error", message=error, kind=type(exc).__name__)
                    break
                if self._reconnect(deadline, folder):
                    inp = None  # continue from the last checkpoint
                    continue
                host, port = parse_server(self.vnc_server)
                error = (
                    f"{exc}; the VNC server at {host} port {port} did not come back within "
                    f"{self.reconnect_window_s:g} s. The run is saved: continue it with "
                    f"'vnc-use resume {thread_id}'"
                )
                folder.event("error", message=error, kind=type(exc).__name__)
            except VncUseError as exc:
                error = str(exc)
                folder.event("error", message=error, kind=type(exc).__name__)
            finally:
                self._control = None
            break
        return self._result(thread_id, folder, error=error, interrupted=interrupted)

    def _fence(self, thread_id: str) -> Callable[[], dict[str, Any] | None] | None:
        """The leg's step-boundary check of its desktop's hold (:mod:`vnc_use.store.holds`):
        a person who took the run over pauses it; a desktop whose epoch moved on otherwise
        refuses this leg's writes (a stale holder)."""
        key = self._lease_key()
        if key is None:
            return None
        return leg_fence(self.storage.holds(key), thread_id)

    @contextlib.contextmanager
    def _recording(self, folder: RunFolder) -> Iterator[None]:
        """Record the leg into the run folder's video (a new segment), when on (VNC only)."""
        if not self.video or self.vnc_server is None:
            yield
            return
        recorder = VideoRecorder(folder.path, self.video_fps).start()
        self._recorder = recorder
        try:
            yield
        finally:
            self._recorder = None
            if self._controller is not None:
                self._controller.stop_recording()
            recorder.close()
            if recorder.error:  # the run went on, but its video is cut short: say so
                folder.event("video_failed", message=f"the video stopped: {recorder.error}")
            if recorder.frames:  # the report written at the leg's end plays it complete
                write_report_safely(folder)

    def _record_video_of(self, desktop: Desktop) -> None:
        """Feed the leg's video from this VNC connection (again after a reconnect)."""
        found = recordable(desktop)
        if self._recorder is not None and found is not None:  # a Recordable desktop
            found.start_recording(self._recorder)

    def _reconnect(self, deadline: float, folder: RunFolder) -> bool:
        """Try to reconnect with backoff until ``deadline``; False when it stays down."""
        if self._controller is not None:
            self._controller.disconnect()
            self._controller = None
        delay = 0.25
        while not self._stop.is_set():
            try:
                _ = self.controller
            except VncAuthError:
                return False  # a password problem will not fix itself
            except VncError as exc:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                log.info("VNC reconnect failed (%s); retrying in %.2f s", exc, min(delay, left))
                self._stop.wait(min(delay, left))
                delay = min(delay * 2, 4.0)
                continue
            folder.event(
                "reconnected",
                vnc_server=self.vnc_server,
                security=_security_json(self.controller.security),
            )
            return True
        return False

    def _result(
        self,
        thread_id: str,
        folder: RunFolder,
        error: str | None = None,
        *,
        emit: bool = True,
        interrupted: bool = False,
    ) -> RunResult:
        return self._outcome(
            self._snapshot(thread_id), folder, error, emit=emit, interrupted=interrupted
        )

    def _outcome(
        self,
        snap: Any,
        folder: RunFolder,
        error: str | None = None,
        *,
        emit: bool = True,
        interrupted: bool = False,
        resume_hint: str | None = None,
    ) -> RunResult:
        """The run's result from the state its graph left (``snap``: a state snapshot, or
        None when there is none), recorded in its folder (``emit``)."""
        result = run_outcome(
            dict(snap.values) if snap is not None else {},
            snap.next if snap is not None else (),
            [i.value for i in snap.interrupts] if snap is not None else [],
            thread_id=folder.thread_id,
            run_dir=str(folder.path),
            error=error,
            interrupted=interrupted,
            **({"resume_hint": resume_hint} if resume_hint else {}),
        )
        if emit:
            record_outcome(folder, result)
        return result


class HostedLeg:
    """A leg another host runs the graph of (:meth:`RunHost.hosted_leg`): the live parts it
    binds (:attr:`context`), its start, its outcome."""

    def __init__(
        self, host: RunHost, thread_id: str, context: AgentContext, label: str | None
    ) -> None:
        self.host = host
        self.thread_id = thread_id
        self.context = context
        self.label = label
        """The desktop as records name it (``rdp://HOST:PORT (via FreeRDP)`` behind a bridge)."""

    @property
    def folder(self) -> RunFolder:
        return self.context.run

    def started(self, state: CUAState) -> None:
        """A new run's task entered the graph (the host never sees the run's input itself):
        ``run_started`` and the task in ``run.json``, as :meth:`RunHost.run` records them."""
        task = state.get("task", "")
        security = _security_json(getattr(self.context.desktop, "security", None))
        run_record.update(
            self.folder, task=task, started=time.time(), security=security, status="running"
        )
        self.folder.event(
            "run_started",
            thread_id=self.thread_id,
            task=task,
            vnc_server=self.label,
            security=security,
        )

    def finish(
        self, snap: Any, error: BaseException | None, resume_hint: str | None = None
    ) -> RunResult:
        """The leg paused or ended (``snap``: the graph's state as it left it; ``error``:
        what stopped it, a cancellation an interruption): its outcome, recorded."""
        message = None
        interrupted = isinstance(error, asyncio.CancelledError)
        if error is not None and not interrupted:
            message = str(error) or type(error).__name__
            self.folder.event("error", message=message, kind=type(error).__name__)
        return self.host._outcome(
            snap, self.folder, message, interrupted=interrupted, resume_hint=resume_hint
        )


STOP_POLL = 0.5
"""Seconds between two looks for a stop another process asked for (``vnc-use stop``)."""


@contextlib.contextmanager
def _watching_stops(journal: Any, stop: Callable[[], None]) -> Iterator[None]:
    """While the block runs a leg, a stop asked for from any process (a stop request in the
    run's journal, :meth:`~vnc_use.store.journal.Journal.request_stop`) stops it at the next
    step boundary; requests made before the leg began do not count."""
    seen = journal.stop_requests()
    done = threading.Event()

    def watch() -> None:
        while not done.wait(STOP_POLL):
            try:
                asked = journal.stop_requests()
            except Exception:  # the storage is closing, or away for a moment: look again
                log.debug("cannot read the stop requests", exc_info=True)
                continue
            if asked > seen:
                stop()
                return

    watcher = threading.Thread(target=watch, name="vnc-use stop watcher", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def _person_hold(holds: DesktopHolds, thread_id: str, handing_back: str | None) -> Hold | None:
    """Under the lease: the person's hold of this run's desktop, freed when ``handing_back``
    is its holder (returned); a run a person holds does not go on otherwise (one line)."""
    hold = holds.held_for(thread_id)
    if hold is None:
        return None
    if handing_back is None:
        raise ConfigError(
            f"run {thread_id!r} is held by {hold.describe()}: it goes on when they hand it "
            f"back (vnc-use handback {thread_id})"
        )
    if handing_back and hold.holder and handing_back != hold.holder:
        raise ConfigError(
            f"run {thread_id!r} is held by {hold.describe()}, not by {handing_back}: only "
            f"they hand it back (or take it first: vnc-use takeover {thread_id} --force)"
        )
    holds.free(thread_id, handing_back or hold.holder)
    return hold


def run_state(snap: Any) -> str:
    """The run's state as the run rules read it, from its checkpoint (:mod:`vnc_use.runs.rules`)."""
    status = str(snap.values.get("status") or RunStatus.RUNNING.value)
    return rules.state_of(
        status, waiting=bool(snap.interrupts), step_left=bool(snap.next or snap.tasks)
    )


def _security_json(security: Security | None) -> dict[str, Any] | None:
    """The connection's security for run.json and events: type number, name, encrypted."""
    if security is None:
        return None
    return {"type": security.number, "name": security.name, "encrypted": security.encrypted}


def _plain_vnc(spec: RunSpec) -> bool:
    """A VNC address: reaching it starts nothing (no local desktop, no bridge)."""
    return not spec.desktop.local and not spec.desktop.rdp_server


def _local_desktop_dir(reached: ReachedDesktop | None) -> dict[str, Any]:
    """run.json's ``local_desktop_dir``: the state folder of the managed local desktop the
    run acts on (approve/resume from another shell find its password there, or say so)."""
    if reached is None or not reached.local_desktop_dir:
        return {}
    return {"local_desktop_dir": reached.local_desktop_dir}
