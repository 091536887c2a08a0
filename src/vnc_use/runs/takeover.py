"""Taking a run's desktop over for a person (``vnc-use takeover ID``), from any process.

The run stops at its next step boundary: an action already sent finishes and is journaled;
no new model call, action or screenshot starts. It then waits with status
``awaiting_human`` (its process exits 3), and its desktop stays its own: a person's hold
(:mod:`vnc_use.store.holds`) with a new epoch, which no other run takes and which refuses a
stale leg's writes. How the pause is reached depends on who acts for the run now:

- a leg under way (it holds the desktop's lease): the new epoch is written, and the leg,
  asking at its next step boundary (``AgentContext.fence``), pauses itself; this waits (up to
  ``timeout``) until it has;
- nobody (a run stopped, crashed, or waiting for a person the model asked for): the pause is
  written here, under the desktop's lease;
- a person holds it already: refused in one line naming the holder and since when, unless
  ``force`` (the new holder's takeover; the old holder's hand-back is then refused).

The person's clicks and key presses are recorded by the interactive view
(:mod:`vnc_use.desktops.vnc.person_tap`) as ``person_input`` events: clicks with their
positions, key presses only as a count, never the text.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from vnc_use.agent.graph import build_graph
from vnc_use.agent.outcome import record_outcome, run_outcome
from vnc_use.agent.state import RunResult
from vnc_use.errors import ConfigError
from vnc_use.record import run_record
from vnc_use.record.runs import read_events
from vnc_use.runs import rules
from vnc_use.runs.open import run_folder
from vnc_use.runs.spec import RunSpec
from vnc_use.status import RunStatus
from vnc_use.store.holds import Hold
from vnc_use.store.lease import DEFAULT_LEASE_TIMEOUT, LeaseBusy
from vnc_use.store.storage import Storage

__all__ = [
    "EventSink",
    "PersonRecorder",
    "desktop_of",
    "held_run",
    "person_input",
    "person_video",
    "take_over",
]

log = logging.getLogger(__name__)

POLL_S = 0.2


def desktop_of(runs_dir: Path, thread_id: str) -> str:
    """The address run ``thread_id``'s desktop lease is keyed by (from its ``run.json``)."""
    record = run_record.read(runs_dir / thread_id)
    spec = RunSpec.from_run_json(record.settings())
    if spec.desktop.rdp_server:
        return spec.desktop.lease_key
    if not record.vnc_server:
        raise ConfigError(
            f"run {thread_id!r} acts on a desktop given in Python ({record.desktop}): there is "
            "no desktop to take over"
        )
    return record.vnc_server


def _state(graph: Any, thread_id: str) -> Any:
    return graph.get_state({"configurable": {"thread_id": thread_id}})


def take_over(
    storage: Storage,
    runs_dir: Path,
    thread_id: str,
    person: str,
    *,
    force: bool = False,
    timeout: float = DEFAULT_LEASE_TIMEOUT,
    secrets: list[str | None] | None = None,
) -> RunResult:
    """``person`` takes run ``thread_id``'s desktop (see the module's doc); returns the run
    paused (``awaiting_human``) once nothing of the run acts any more."""
    graph = build_graph().compile(checkpointer=storage.checkpointer)
    snap = _state(graph, thread_id)
    if not snap.values:
        raise ConfigError(f"no run with thread id {thread_id!r} in {storage.described}")
    status = str(snap.values.get("status") or RunStatus.RUNNING.value)
    state = rules.state_of(
        status, waiting=bool(snap.interrupts), step_left=bool(snap.next or snap.tasks)
    )
    rules.check("takeover", thread_id, state)
    key = desktop_of(runs_dir, thread_id)
    holds = storage.holds(key)
    held = holds.held_for(thread_id)  # a forced take ends this person's hold
    holds.check_take(thread_id, force)
    folder = run_folder(runs_dir, thread_id, secrets or [])
    lease = storage.lease(key, thread_id)
    try:
        lease.acquire(0)
    except LeaseBusy as busy:
        if busy.holder != thread_id:
            raise ConfigError(
                f"the desktop {lease.desktop} is in use by run {busy.holder or 'another run'}, "
                f"not by run {thread_id}: take that run over instead"
            ) from None
        hold = holds.take(thread_id, person)  # the leg pauses itself at its next boundary
        return _paused_by_leg(graph, storage, folder, thread_id, hold, timeout, held)
    try:
        hold = holds.take(thread_id, person)
        return _pause(graph, folder, thread_id, hold, held)
    finally:
        lease.release()


def _human(hold: Hold) -> dict[str, Any]:
    return {"asked_by": "person", "holder": hold.holder, "since": hold.since, "epoch": hold.epoch}


def _pause(graph: Any, folder: Any, thread_id: str, hold: Hold, held: Hold | None) -> RunResult:
    """Write the pause of a run nobody acts for (under the desktop's lease)."""
    update = {"status": RunStatus.AWAITING_HUMAN.value, "done": True, "human": _human(hold)}
    graph.update_state({"configurable": {"thread_id": thread_id}}, update, as_node="act")
    taken = {"forced_from": held.holder} if held is not None else {}
    folder.event("taken_over", node="takeover", **_human(hold), **taken)
    snap = _state(graph, thread_id)
    result = run_outcome(snap.values, snap.next, [], thread_id=thread_id, run_dir=str(folder.path))
    record_outcome(folder, result)
    return result


def _paused_by_leg(
    graph: Any,
    storage: Storage,
    folder: Any,
    thread_id: str,
    hold: Hold,
    timeout: float,
    held: Hold | None,
) -> RunResult:
    """Wait until the leg under way has paused at its next step boundary (or has ended: then
    the pause is written here)."""
    deadline = time.monotonic() + timeout
    while True:
        snap = _state(graph, thread_id)
        human = snap.values.get("human") or {}
        if (
            snap.values.get("status") == RunStatus.AWAITING_HUMAN.value
            and human.get("epoch") == hold.epoch
        ):
            return run_outcome(
                snap.values, snap.next, [], thread_id=thread_id, run_dir=str(folder.path)
            )
        lease = storage.lease(desktop_of(Path(folder.path).parent, thread_id), thread_id)
        try:
            lease.acquire(0)
        except LeaseBusy:
            pass
        else:  # the leg ended before its next boundary (a crash, an end): pause it here
            try:
                if snap.values.get("status") == RunStatus.RUNNING.value or snap.next:
                    return _pause(graph, folder, thread_id, hold, held)
                holds = storage.holds(desktop_of(Path(folder.path).parent, thread_id))
                holds.free(thread_id, hold.holder)  # it ended: nothing to hold for it
                raise ConfigError(
                    f"run {thread_id!r} ended ({snap.values.get('status')}) before its next "
                    "step: there is nothing to take over"
                )
            finally:
                lease.release()
        if time.monotonic() >= deadline:
            raise ConfigError(
                f"run {thread_id!r} did not reach a step boundary within {timeout:g} s; it "
                "pauses at its next one and the desktop is yours then (vnc-use runs shows it)"
            )
        time.sleep(POLL_S)


def person_input(run_dir: Path, since: float) -> dict[str, int]:
    """What the person did on the desktop since ``since``, as recorded by the interactive
    view: their clicks and key presses (counts; their text is never recorded)."""
    clicks = keys = 0
    for event in read_events(run_dir):
        if event.get("event") != "person_input" or float(event.get("ts") or 0) < since:
            continue
        if event.get("kind") == "click":
            clicks += 1
        elif event.get("kind") == "keys":
            keys += int(event.get("count") or 0)
    return {"clicks": clicks, "keys": keys}


def held_run(runs_dir: Path, thread_id: str) -> str:
    """The VNC address of run ``thread_id``'s desktop, for a person's interactive view: only
    while the run waits for a person (``awaiting_human``, its ``run.json``); one line
    otherwise."""
    record = run_record.read(runs_dir / thread_id)
    if record.status != RunStatus.AWAITING_HUMAN.value:
        raise ConfigError(
            f"run {thread_id!r} is not held by a person ({record.status or 'running'}): take "
            f"it over first (vnc-use takeover {thread_id}); the agent acts on it otherwise"
        )
    if not record.vnc_server:
        raise ConfigError(f"run {thread_id!r} has no VNC desktop to show")
    return record.vnc_server


class EventSink(Protocol):
    """Where a run's events are written (a :class:`~vnc_use.record.folder.RunFolder`)."""

    def event(self, event: str, /, **fields: Any) -> Any: ...


class PersonRecorder:
    """Writes what a person does on a held run's desktop into its events
    (:class:`~vnc_use.desktops.person_tap.PersonTap`'s callbacks): each click with its
    position (``person_input`` ``kind: click``), key presses as a count (``kind: keys``,
    written before the next click and at :meth:`close`), never which keys."""

    def __init__(
        self,
        runs_dir: Path,
        thread_id: str,
        secrets: list[str | None],
        *,
        folder: EventSink | None = None,
    ) -> None:
        """``folder``: where the events go instead of the run's folder here (a fleet run's
        events in the fleet's database)."""
        self.folder: EventSink = folder or run_folder(runs_dir, thread_id, secrets)
        self.keys = 0
        self._lock = threading.Lock()

    def _flush(self) -> None:
        if self.keys:
            self.folder.event("person_input", kind="keys", count=self.keys)
            self.keys = 0

    def click(self, x: int, y: int, button: int) -> None:
        with self._lock:
            self._flush()
            self.folder.event("person_input", kind="click", x=x, y=y, button=button)

    def key(self, count: int) -> None:
        with self._lock:
            self.keys += count

    def lost(self, why: str) -> None:
        with self._lock:
            self._flush()
            self.folder.event(
                "person_input_unrecorded",
                message=f"the person's input is no longer recorded: {why}",
            )

    def close(self) -> None:
        with self._lock:
            self._flush()


@contextlib.contextmanager
def person_video(
    runs_dir: Path,
    thread_id: str,
    server: str,
    password: str,
    *,
    events: EventSink | None = None,
) -> Iterator[None]:
    """Record the person's part into the run's video (a segment marked ``person``) while the
    block runs, when the run records video; a desktop that cannot be recorded is told in the
    run's events (``events``: where they go instead of the run's folder here, as for
    :class:`PersonRecorder`) and the block goes on."""
    from vnc_use.desktops.vnc import VNCController
    from vnc_use.errors import VncError
    from vnc_use.record.video import DEFAULT_VIDEO_FPS, record_desktop, stop_recording

    record = run_record.read(runs_dir / thread_id)
    if record.video is False:
        yield
        return
    fps = float(record.video_fps or DEFAULT_VIDEO_FPS)
    try:
        controller = VNCController(timeout=10.0, connect_timeout=10.0).connect(server, password)
    except VncError as exc:
        log.info("the person's part is not recorded: %s", exc)
        sink: EventSink = events or run_folder(runs_dir, thread_id, [password])
        sink.event("video_failed", message=f"the person's part is not in the video: {exc}")
        yield
        return
    recorder = record_desktop(controller, runs_dir / thread_id, fps, person=True)
    try:
        yield
    finally:
        try:
            stop_recording(controller, recorder)
        finally:
            controller.disconnect()
