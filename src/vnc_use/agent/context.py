"""What the graph's nodes share: the run's settings and context, and the screen capture.

The context (:class:`AgentContext`) reaches the desktop, the model and the run folder; it lives
in memory only and is never checkpointed. State holds only JSON-able values and screenshot
digests (see :mod:`vnc_use.agent.state`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vnc_use.actions.execute import DEFAULT_SEARCH_URL
from vnc_use.agent import budgets
from vnc_use.agent.state import CUAState
from vnc_use.desktops.base import DEFAULT_QUIET_S, CaptureRule, Desktop
from vnc_use.desktops.png import DEFAULT_MAX_PNG_BYTES, screen_size_of
from vnc_use.providers.base import Planner
from vnc_use.record.folder import RunFolder
from vnc_use.store.journal import Journal


@dataclass
class AgentSettings:
    """Budgets and behaviour of a run (everything but the connections)."""

    step_limit: int = budgets.STEP_LIMIT
    seconds_timeout: float = budgets.SECONDS_TIMEOUT
    hitl_mode: bool = budgets.HITL_MODE
    include_initial_screenshot: bool = budgets.INCLUDE_INITIAL_SCREENSHOT
    keep_screenshots: int = budgets.KEEP_SCREENSHOTS
    search_url: str = DEFAULT_SEARCH_URL
    settle_min_s: float = 0.0
    settle_max_s: float = 1.0
    settle_quiet_s: float = DEFAULT_QUIET_S
    """After an action, the screen has settled once it did not change for this long."""
    settle_fixed_s: float | None = None
    """Sleep this long and take one frame instead of detecting the settle (for comparisons)."""
    screenshot_max_size: tuple[int, int] | None = None
    """Downscale screenshots to fit this size (coordinates still map to the real screen)."""
    screenshot_max_bytes: int | None = DEFAULT_MAX_PNG_BYTES
    """Downscale a screenshot whose PNG is bigger than this (huge images fail at the API)."""
    wait_seconds: float = 5.0
    confirm_actions: tuple[str, ...] = ()
    """Actions that always wait for a person's approval, whatever the model says (the approval
    policy, ``--confirm``): names of the action vocabulary, or ``"all"``."""
    stall_after: int = budgets.STALL_AFTER
    """Actions in a row that change nothing before the model is told it is stalled; a stall
    that goes on ends the run ``stuck`` (``--stall-after``; 0: off)."""
    max_cost: float | None = None
    """USD: the run stops (``cost_limit``) before a model call once its cost reached this."""
    price: tuple[float, float] | None = None
    """USD per million input and output tokens (``--price``), instead of the price table's."""


@dataclass
class AgentContext:
    """What the nodes use besides state; lives in memory only (never checkpointed)."""

    desktop: Desktop
    planner: Planner
    run: RunFolder
    settings: AgentSettings
    journal: Journal
    secrets: dict[str, str] = field(default_factory=dict)
    """Sensitive values by placeholder name: ``{{name}}`` in typed text becomes the value."""
    stop: threading.Event = field(default_factory=threading.Event)
    screen_cells: dict[str, Any] = field(default_factory=dict)
    """Stall detection's cells of recent screenshots by digest (see ``act._same_screen``)."""
    fence: Callable[[], dict[str, Any] | None] | None = None
    """Asked at each step boundary (before a model call or an action): a person's hold on
    the desktop taken since this leg began (who, since when, the epoch), or None. Raises when
    the desktop moved on without this run (a stale holder). None: nobody can take it over."""


def png_size(ctx: AgentContext, sha: str | None) -> tuple[int, int] | None:
    """The real screen size a stored screenshot shows (not its image size: it may be
    downscaled)."""
    if not sha:
        return None
    return screen_size_of(ctx.run.load_screenshot(sha))


def screen_size(ctx: AgentContext, state: CUAState) -> tuple[int, int] | None:
    """The real screen size of the last screenshot the model saw (kept next to it in state)."""
    size = state.get("last_screen_size")
    if size:
        return int(size[0]), int(size[1])
    return png_size(ctx, state.get("last_screenshot_png"))


def capture(
    ctx: AgentContext, on_input_handled: Callable[[], object] | None = None
) -> tuple[str, tuple[int, int]]:
    """A settled screenshot, stored in the run folder; returns its digest and the real screen
    size (what grid coordinates scale to, even when the PNG is downscaled).
    ``on_input_handled``: see :attr:`~vnc_use.desktops.base.CaptureRule.on_input_handled`."""
    s = ctx.settings
    shot = ctx.desktop.capture(
        CaptureRule(
            min_wait=s.settle_min_s,
            max_wait=s.settle_max_s,
            quiet=s.settle_quiet_s,
            fixed_s=s.settle_fixed_s,
            max_size=s.screenshot_max_size,
            max_bytes=s.screenshot_max_bytes,
            sleep=ctx.stop.wait,
            on_input_handled=on_input_handled,
        )
    )
    sha = ctx.run.put_screenshot(shot.png)
    ctx.run.event(
        "screenshot",
        screenshot=sha,
        settled=shot.settled,
        waited_ms=shot.waited_ms,
        updates=shot.frames,
        changes=shot.changes,
        encode_ms=shot.encode_ms,
        bytes=len(shot.png),
        size=list(shot.size),
        screen_size=list(shot.screen_size),
    )
    if not shot.settled:
        ctx.run.event("screen_not_settled", waited_ms=shot.waited_ms, frames=shot.frames)
    return sha, shot.screen_size


_INT64 = 2**63


def storable(value: Any) -> Any:
    """The model's arguments as the checkpoint can hold them: integers beyond 64 bits (which
    msgpack cannot encode) become floats. No valid argument is that large."""
    if isinstance(value, int) and not isinstance(value, bool) and not -_INT64 <= value < _INT64:
        return float(value)
    if isinstance(value, dict):
        return {k: storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable(v) for v in value]
    return value


def over_time(state: CUAState, ctx: AgentContext) -> bool:
    return state.get("active_seconds", 0.0) >= ctx.settings.seconds_timeout
