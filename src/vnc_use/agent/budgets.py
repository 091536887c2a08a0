"""A run's default budgets, spelled once (light: no LangGraph).

:class:`~vnc_use.runs.spec.RunSpec` (what a run is) takes its defaults from here, and so does
:class:`~vnc_use.agent.context.AgentSettings` (what the graph's nodes read), so the two never
disagree and no front door repeats them.
"""

from __future__ import annotations

STEP_LIMIT = 40
SECONDS_TIMEOUT = 300.0
HITL_MODE = True
INCLUDE_INITIAL_SCREENSHOT = True
KEEP_SCREENSHOTS = 3
"""The screenshot window when neither the run nor its planner chooses one."""
STALL_AFTER = 4
"""Actions in a row that change nothing before the model is told it is stalled
(``--stall-after``; 0: off)."""
