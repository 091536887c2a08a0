"""One leg of a fleet run on one desktop: start it, approve, deny or continue it.

A leg does what its action says unless the run's checkpoint says it already happened: a
``run`` leg whose thread has a checkpoint (a leg recovered after its worker died) continues
it, or returns its outcome as it is when it paused for a person meanwhile; an
``approve``/``deny`` leg of a run no longer waiting continues it; a ``handback`` leg hands a
run that waits for a person back (its note, who hands it back), or continues it when it no
longer waits. The action journal
(:mod:`vnc_use.store.journal`) keeps every action from being performed twice, and an action
whose outcome is unknown is never re-sent blindly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vnc_use import config
from vnc_use.agent.state import RunResult
from vnc_use.errors import ConfigError
from vnc_use.runs.agent import VncUseAgent
from vnc_use.runs.open import sensitive_values
from vnc_use.runs.spec import RunSpec
from vnc_use.status import RunStatus

if TYPE_CHECKING:
    from vnc_use.desktops.target import DesktopTarget, ReachedDesktop
    from vnc_use.record.folder import FolderStore

__all__ = ["LegRequest", "drive_leg", "result_json"]

HUMAN = RunStatus.AWAITING_HUMAN.value
ACTIONS = ("run", "approve", "deny", "resume", "handback")


class LegRequest:
    """What a leg is to do, where, with what."""

    def __init__(
        self,
        payload: dict[str, Any],
        spec: dict[str, Any],
        server: str,
        password: str | None,
        runs_dir: Path,
        database: str,
        *,
        rdp: tuple[DesktopTarget, ReachedDesktop] | None = None,
        store: FolderStore | None = None,
    ) -> None:
        self.thread_id = str(payload["thread_id"])
        self.action = str(payload.get("action", "run"))
        if self.action not in ACTIONS:
            raise ConfigError(f"unknown leg action {self.action!r}")
        self.task = str(payload.get("task") or "")
        self.note: str | None = payload.get("note")
        """A ``handback`` leg's note to the model."""
        self.person: str | None = payload.get("person")
        """Who hands a ``handback`` leg's run back (only the holder may)."""
        self.spec = RunSpec.from_context(spec)
        self.server = server
        self.password = password
        self.runs_dir = runs_dir
        self.database = database
        self.rdp = rdp
        """An RDP host's target and the bridge to it (``server`` is the bridge's)."""
        self.store = store
        """Where the run folder's content also goes (the fleet's database), and where a
        screenshot the folder lacks comes from: the folder is this host's cache."""


def _agent(req: LegRequest) -> VncUseAgent:
    """The leg's agent, from the run's spec on the worker's desktop, in its runs folder, its
    checkpoints in the fleet's database; its runs' ``run.json`` says ``fleet``."""
    spec = req.spec
    sensitive = sensitive_values(spec.sensitive_names, missing=MISSING_ON_WORKER)
    reached = None
    if req.rdp is not None:  # the run names the RDP host; its lease is on the host
        target, reached = req.rdp
    else:
        target = replace(spec.desktop, vnc_server=req.server, local=False, rdp_server=None)
    on_worker = replace(spec, desktop=target, runs_dir=str(req.runs_dir))
    agent = VncUseAgent.from_spec(
        on_worker,
        reached=reached,
        planner=spec.planner(),
        vnc_password=req.password or config.named_secret(spec.vnc_password_env),
        sensitive_text=sensitive,
        checkpointer=req.database,
    )
    agent.kind = "fleet"
    return agent


MISSING_ON_WORKER = "sensitive name {name}: set {variable} in the worker's environment"


def drive_leg(req: LegRequest, running: Callable[[VncUseAgent | None], None]) -> RunResult:
    """Run the leg to its end or pause; ``running`` is told the agent (to stop it on a
    drain) and None when it is done."""
    with _agent(req) as agent:
        agent.folder_store = req.store
        running(agent)
        try:
            snap = agent.graph.get_state({"configurable": {"thread_id": req.thread_id}})
            if req.action == "run" and not snap.values:
                return agent.run(task=req.task, thread_id=req.thread_id)
            if req.action in ("approve", "deny") and snap.interrupts:
                answer = agent.approve if req.action == "approve" else agent.deny
                return answer(req.thread_id)
            if req.action == "handback" and snap.values.get("status") == HUMAN:
                return agent.handback(req.thread_id, req.note, person=req.person)
            if snap.interrupts:  # a recovered leg of a run that paused for a person meanwhile
                return agent.result(req.thread_id)
            return agent.resume(req.thread_id)
        finally:
            running(None)


def result_json(result: RunResult) -> dict[str, Any]:
    """The result as plain JSON (what the database keeps and the submitter prints)."""
    data = asdict(result)
    data["status"] = RunStatus(result.status).value
    data.pop("transcript", None)  # the report has it
    return data
