"""How a run stands: one enum, spelled once.

Members are strings (``str`` and :class:`enum.Enum`, :class:`enum.StrEnum` before Python
3.11): state, events, ``run.json`` and JSON output hold the plain value, and
``RunStatus.DONE == "done"`` holds.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["FINAL", "RunStatus"]


class RunStatus(str, Enum):
    """A run's status: ``running`` only inside the graph; every other value is final or a
    pause (``awaiting_approval``, ``awaiting_human``, ``interrupted``: resumable)."""

    RUNNING = "running"
    DONE = "done"
    """The model finished normally and proposed no more actions."""
    AWAITING_APPROVAL = "awaiting_approval"
    """Paused before an action the model marked for a person's confirmation."""
    AWAITING_HUMAN = "awaiting_human"
    """Waiting for a person: the model asked for one (UI-TARS ``call_user``, UI-Venus
    ``CallUser``: its question is kept), or a person took the desktop over (``vnc-use
    takeover``). ``vnc-use handback ID [--note TEXT]`` continues it; never ``done``."""
    DENIED = "denied"
    """A person (or the policy, with approvals off) refused an action."""
    STEP_LIMIT = "step_limit"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"
    """Stopped on request or by a lost desktop; ``resume`` goes on from the last step."""
    ERROR = "error"
    BLOCKED = "blocked"
    """The model's turn was blocked or refused (a safety filter, or a call the model itself
    marked ``blocked``); nothing of that turn ran. The error names the reason."""
    DIVERGED = "diverged"
    """A replay found the screen not as recorded before a step and stopped before performing
    it (:mod:`vnc_use.replay`); the error names the step and the difference."""
    STUCK = "stuck"
    """The model went on repeating actions that changed nothing on the screen after it was
    told so (stall detection, ``--stall-after``); ``resume`` gives it another chance."""
    FAILED = "failed"
    """The model itself reported that the task failed (an explicit failure signal of its
    dialect: Qwen's ``terminate(status="failure")``, OpenCUA's ``computer.terminate("failure")``);
    the error holds the model's words."""
    COST_LIMIT = "cost_limit"
    """The run's cost reached its cap (``--max-cost``) before a model call; ``resume`` with a
    higher cap continues it (the running total is kept)."""

    def __str__(self) -> str:
        return self.value

    @property
    def final(self) -> bool:
        """True when the graph ends with this status (nothing more happens on its own)."""
        return self in FINAL


FINAL = frozenset(
    {
        RunStatus.DONE,
        RunStatus.DENIED,
        RunStatus.STEP_LIMIT,
        RunStatus.TIMEOUT,
        RunStatus.ERROR,
        RunStatus.BLOCKED,
        RunStatus.DIVERGED,
        RunStatus.STUCK,
        RunStatus.COST_LIMIT,
        RunStatus.FAILED,
    }
)
"""Statuses that end the graph."""
