"""Replay a recorded run without the model (``vnc-use replay``, ``VncUseAgent.replay``).

:mod:`~vnc_use.replay.recording` reads what a run performed, :mod:`~vnc_use.replay.compare`
measures how far the screen is from the recorded one, and :mod:`~vnc_use.replay.planner`
answers the agent's turns with the recorded actions.
"""

from vnc_use.replay.compare import DEFAULT_TOLERANCE, difference, parse_tolerance
from vnc_use.replay.planner import (
    PROVIDER,
    ReplayOptions,
    ReplayPlanner,
    planner_from_run,
    replay_planner_from_settings,
)
from vnc_use.replay.recording import RecordedStep, Recording, load_recording

__all__ = [
    "DEFAULT_TOLERANCE",
    "PROVIDER",
    "RecordedStep",
    "Recording",
    "ReplayOptions",
    "ReplayPlanner",
    "difference",
    "load_recording",
    "parse_tolerance",
    "planner_from_run",
    "replay_planner_from_settings",
]
