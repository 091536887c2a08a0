"""The run rules: which verb a run in each state accepts, and what each verb then does.

Spelled once here and applied by every executor (:mod:`vnc_use.runs.executor`: in this
process, on LangGraph Server, on the fleet), so a verb answers the same way wherever the run
executes:

=================  =========  ==================  =======  ======  ========  =========
state              approve,   resume              stop     result  takeover  handback
                   deny
=================  =========  ==================  =======  ======  ========  =========
awaiting_approval  answer     refused             refused  show    refused   refused
awaiting_human     refused    refused (--answer)  refused  show    held [1]  hand back
running            refused    refused             stop     show    take      refused
interrupted        refused    continue            stop     show    take      refused
stuck, cost_limit  refused    reopen              refused  show    refused   refused
finished           refused    show (no change)    refused  show    refused   refused
=================  =========  ==================  =======  ======  ========  =========

[1] a run a person holds already is refused in one line naming who holds it and since when
(``--force`` takes it from them); one the model asked a person for is taken (the person who
answers may want the desktop first).

A run ``awaiting_human`` is continued by ``handback`` (``resume --answer TEXT`` is the same as
``handback --note TEXT``); a plain ``resume`` is refused in one line naming the command.

The state is what an executor sees of the run (:func:`state_of`): ``running`` is a run known
to be under way (a fleet's queued or running leg, a server's busy thread); ``interrupted`` is
a run whose checkpoint has a step left to run (stopped on request, by a lost desktop, an error
or a crash: this process cannot tell a crashed run from one another process runs, so a
``stop`` is recorded for it too and ``resume`` waits for the desktop's lease); *finished* is
every other status (``done``, ``denied``, a budget, ``blocked``, ``diverged``, an error with
nothing left to run). A refused verb is a :class:`~vnc_use.errors.ConfigError` whose text is
the one line every door shows (exit 2).

*Resume of a run that waits for an approval* is refused in one line (exit 2) on every
executor: a person's answer is what it waits for (``approve`` / ``deny``), and a resume that
silently left it pending looked like a success. *Reopening* a ``stuck`` or ``cost_limit`` run
(:func:`reopened`) sets its state running again: stall detection starts afresh (``stuck``),
the cost spent so far is kept (``cost_limit``: with a higher ``max_cost`` it goes on; a cap not
above the cost spent stops it again at once). A finished run (``done``, ``denied``, a budget,
``blocked``, ``diverged``, an error with nothing left to run) is shown as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from vnc_use.errors import ConfigError
from vnc_use.status import RunStatus

__all__ = [
    "VERBS",
    "Verb",
    "Way",
    "check",
    "reopened",
    "state_of",
]

Verb = Literal["approve", "deny", "resume", "stop", "result", "takeover", "handback"]
VERBS: tuple[Verb, ...] = (
    "approve",
    "deny",
    "resume",
    "stop",
    "result",
    "takeover",
    "handback",
)

Way = Literal["answer", "continue", "reopen", "show", "stop", "take", "hand_back"]
"""What a verb does to a run it accepts: ``answer`` the pending approval, ``continue`` from the
last checkpoint, ``reopen`` a stuck or cost-limited run, ``show`` it as it is, request a
``stop`` at the next step boundary, ``take`` the desktop for a person (the run pauses at its
next step boundary), ``hand_back`` the desktop (the run goes on)."""

REOPENS = frozenset({RunStatus.STUCK.value, RunStatus.COST_LIMIT.value})
WAITING = RunStatus.AWAITING_APPROVAL.value
HUMAN = RunStatus.AWAITING_HUMAN.value
RUNNING = RunStatus.RUNNING.value
INTERRUPTED = RunStatus.INTERRUPTED.value


def state_of(
    status: str, *, waiting: bool = False, under_way: bool = False, step_left: bool = False
) -> str:
    """The state the rules read (a row of the module's table) from what an executor sees of a
    run: its status, whether it ``waiting`` for an approval, known to be ``under_way`` (a
    fleet's queued or running leg, a server's busy thread) or has a ``step_left`` in its
    checkpoint (stopped on request, on an error or by a crash: ``interrupted``)."""
    if waiting:
        return WAITING
    if under_way:
        return RUNNING
    if step_left:
        return INTERRUPTED
    return str(status)


def check(verb: Verb, thread_id: str, state: str) -> Way:
    """What ``verb`` does to run ``thread_id`` in ``state`` (:func:`state_of`), or the
    one-line refusal (:class:`ConfigError`)."""
    state = str(state)
    if verb == "result":
        return "show"
    if verb in ("approve", "deny"):
        if state != WAITING:
            raise ConfigError(f"run {thread_id!r} is not waiting for an approval ({state})")
        return "answer"
    if verb == "stop":
        if state not in (RUNNING, INTERRUPTED):
            raise ConfigError(f"run {thread_id!r} is not running ({state}): nothing to stop")
        return "stop"
    if verb in ("takeover", "handback"):
        return _person_way(verb, thread_id, state)
    if verb != "resume":
        raise ConfigError(f"unknown verb {verb!r}: use one of {', '.join(VERBS)}")
    return _resume_way(thread_id, state)


def _person_way(verb: Verb, thread_id: str, state: str) -> Way:
    """What ``takeover`` and ``handback`` do in ``state`` (the module's table)."""
    if verb == "handback":
        if state != HUMAN:
            raise ConfigError(
                f"run {thread_id!r} is not waiting for a person ({state}): nothing to hand back"
            )
        return "hand_back"
    if state not in (RUNNING, INTERRUPTED, HUMAN):
        why = "answer its approval first (approve or deny)" if state == WAITING else "it is over"
        raise ConfigError(f"run {thread_id!r} cannot be taken over ({state}): {why}")
    return "take"


def _resume_way(thread_id: str, state: str) -> Way:
    """What ``resume`` does in ``state`` (the module's table)."""
    if state == WAITING:
        raise ConfigError(
            f"run {thread_id!r} waits for an approval: answer it with approve or deny, not resume"
        )
    if state == HUMAN:
        raise ConfigError(
            f"run {thread_id!r} waits for a person: continue it with 'vnc-use handback "
            f"{thread_id} --note TEXT' (or resume --answer TEXT)"
        )
    if state == RUNNING:
        raise ConfigError(f"run {thread_id!r} is running already: wait for it, or stop it first")
    if state in REOPENS:
        return "reopen"
    if state == INTERRUPTED:
        return "continue"
    return "show"


def reopened(values: Mapping[str, Any]) -> dict[str, Any]:
    """The state update that reopens a ``stuck`` or ``cost_limit`` run (``values``: its
    state): running again, stall detection afresh after ``stuck``, the cost spent kept."""
    from vnc_use.agent import stall

    update: dict[str, Any] = {"status": RUNNING, "done": False, "error": None}
    if values.get("status") == RunStatus.STUCK.value:
        update["stall"] = stall.cleared(values.get("stall"))
    return update
