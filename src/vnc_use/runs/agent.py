"""``VncUseAgent``: the public face of the agent, in Python.

:meth:`VncUseAgent.from_spec` builds it from a :class:`~vnc_use.runs.spec.RunSpec` (what every
front door builds); ``VncUseAgent(...)`` keeps its keyword arguments as a thin face that builds
the spec. Everything else, the verbs (``run``, ``approve``, ``deny``, ``resume``, ``result``,
``replay``) and the one life of a leg (lease, run folder, ``run.json``, desktop, video, graph,
outcome), is :class:`~vnc_use.runs.leg.RunHost`'s, which the front doors reach through
:class:`~vnc_use.runs.executor.LocalExecutor`. A run's id is its LangGraph thread id, so
``approve``, ``deny`` and ``resume`` work from any process that opens the same ``runs_dir``
and checkpoints.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from vnc_use.agent.context import AgentSettings
from vnc_use.desktops.base import Desktop
from vnc_use.desktops.keyboard import KeyboardLimits
from vnc_use.desktops.region import ScreenRegion
from vnc_use.desktops.target import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_VNC_SERVER,
    DesktopTarget,
    ReachedDesktop,
    reach,
)
from vnc_use.errors import (
    ConfigError,
)
from vnc_use.providers.base import Planner
from vnc_use.record.video import DEFAULT_VIDEO_FPS
from vnc_use.runs.leg import RunHost
from vnc_use.runs.spec import DEFAULT_RECONNECT_WINDOW, RunSpec
from vnc_use.store.lease import DEFAULT_LEASE_TIMEOUT
from vnc_use.store.storage import CHECKPOINT_DB

if TYPE_CHECKING:  # imported when first connecting: Twisted stays out of desktop= runs
    pass

__all__ = ["CHECKPOINT_DB", "DEFAULT_VNC_SERVER", "AgentSettings", "VncUseAgent"]

log = logging.getLogger(__name__)


class VncUseAgent(RunHost):
    """Drive a VNC desktop with a computer-use model until the task is done or a budget ends.

    >>> agent = VncUseAgent(vnc_server="localhost::5901")          # doctest: +SKIP
    >>> result = agent.run(task="Open the terminal and run 'ls'")   # doctest: +SKIP
    >>> result.status, result.final_text                             # doctest: +SKIP

    Runs are checkpointed in ``<runs_dir>/vnc-use.sqlite`` under their thread id, so
    :meth:`approve`, :meth:`deny` and :meth:`resume` work from any process. ``checkpointer``
    keeps them elsewhere: a ``postgresql://`` URL (or a ``PostgresSaver``) for runs that
    several machines share, or any LangGraph checkpointer; the action journal goes into the same
    database (:mod:`vnc_use.store.storage`). A run holds its desktop's lease while it acts
    (:mod:`vnc_use.store.lease`); another run on the same desktop waits up to
    ``lease_timeout`` seconds, then fails with :class:`~vnc_use.store.lease.LeaseBusy`.
    ``screen_size`` is only a hint: the real size of every screenshot is what coordinates are
    scaled to.
    ``screen_region`` (``"WxH+X+Y"``, see :mod:`vnc_use.desktops.region`) is the part of the
    server's
    framebuffer that is the screen, for servers that export more (multi-monitor, x11vnc's
    ``-ncache``); it is kept in ``run.json``.

    ``model`` decides the action set (:mod:`vnc_use.providers.gemini.families`: Gemini 2.5 / 3
    Flash speak 13
    functions, ``gemini-3.5-flash`` the intent-bearing set); ``model_family`` names the family
    for an id it does not know. ``environment`` is ``"browser"`` or ``"desktop"`` (default: the
    family's, desktop for 3.5); on a desktop the 2.5 / 3 browser-only functions are excluded
    unless ``keep_browser_actions=True``. ``api_version`` is the Gemini API version requests go
    to (default ``GEMINI_API_VERSION``, else ``v1beta``); run.json keeps it.

    ``provider`` names who serves the model (:mod:`vnc_use.providers.registry`): ``"gemini"``
    (default), ``"anthropic"`` (Claude; key ``ANTHROPIC_API_KEY``, ``tool_version`` overrides
    the model's computer tool) or ``"openai-compatible"``, which needs ``base_url`` (the
    server's ``.../v1``) and ``model``, and takes ``dialect`` (default: from the model id); the
    key comes from ``OPENAI_API_KEY``. Left out, a ``claude-`` model id means anthropic.
    ``planner`` instead uses a planner you built (the provider arguments
    are then ignored). ``keep_screenshots`` (else the one of a ``settings`` given) is how many
    screenshots go to the model; without either, the planner's own (3 Gemini, 2
    openai-compatible). ``confirm_actions`` (action names, or ``"all"``) always wait for a
    person's approval, like a call the model marked for confirmation; run.json keeps it.

    ``desktop`` runs the agent on any :class:`~vnc_use.desktops.base.Desktop` instead of a VNC
    server (e.g. :class:`vnc_use.testing.FakeDesktop` in tests); the agent then uses it as
    given (no reconnecting; :meth:`close` leaves it open), and the VNC options
    (``vnc_server``, ``vnc_password``, ``vnc_username``, ``vnc_ca``, ``screen_region``) must
    not be given. ``run.json`` then records ``"desktop"`` (the class name) and no VNC
    address. Without ``desktop``, the server is ``vnc_server`` (default
    ``localhost::5901``).

    Behind an RDP bridge (:mod:`vnc_use.desktops.rdp`), ``keyboard`` gives the limits of its
    keyboard path, ``rdp`` its settings (run.json then names ``rdp://HOST:PORT (via
    FreeRDP)``) and ``lost_reason`` says when the RDP session ended.
    """

    def __init__(
        self,
        vnc_server: str | None = None,
        vnc_password: str | None = None,
        screen_size: tuple[int, int] = (1440, 900),
        excluded_actions: list[str] | None = None,
        step_limit: int | None = None,
        seconds_timeout: float | None = None,
        hitl_mode: bool | None = None,
        include_initial_screenshot: bool | None = None,
        runs_dir: str | Path = "runs",
        *,
        provider: str | None = None,
        model: str | None = None,
        base_url: str | None = None,
        dialect: str | None = None,
        confirm_actions: Sequence[str] | None = None,
        environment: str | None = None,
        model_family: str | None = None,
        keep_browser_actions: bool = False,
        api_version: str | None = None,
        tool_version: str | None = None,
        planner: Planner | None = None,
        keep_screenshots: int | None = None,
        checkpoint_db: str | Path | None = None,
        checkpointer: BaseCheckpointSaver[Any] | str | None = None,
        lease_timeout: float = DEFAULT_LEASE_TIMEOUT,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        settings: AgentSettings | None = None,
        sensitive_text: Mapping[str, str] | None = None,
        reconnect_window_s: float = DEFAULT_RECONNECT_WINDOW,
        vnc_username: str | None = None,
        vnc_ca: str | Path | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        screen_region: str | ScreenRegion | None = None,
        desktop: Desktop | None = None,
        keyboard: KeyboardLimits | None = None,
        rdp: Mapping[str, Any] | None = None,
        lost_reason: Callable[[], str | None] | None = None,
        video: bool = True,
        video_fps: float = DEFAULT_VIDEO_FPS,
        stall_after: int | None = None,
        max_cost: float | None = None,
        price: Sequence[float] | None = None,
    ) -> None:
        # a thin face: the arguments become a RunSpec (and the live objects a spec cannot
        # hold: a desktop, a planner, callbacks), then from_spec's setup
        if desktop is not None:
            _refuse_vnc_options_with_a_desktop(
                vnc_server=vnc_server,
                vnc_password=vnc_password,
                vnc_username=vnc_username,
                vnc_ca=vnc_ca,
                screen_region=screen_region,
            )
        target = DesktopTarget(
            vnc_server=vnc_server or DEFAULT_VNC_SERVER,
            vnc_username=vnc_username or None,
            vnc_ca=str(vnc_ca) if vnc_ca else None,
            connect_timeout=float(connect_timeout),
            screen_region=str(screen_region) if screen_region else None,
            label=str(rdp["label"]) if rdp and rdp.get("label") else None,
        )
        spec = RunSpec(
            provider=provider,
            model=model,
            tool_version=tool_version,
            model_family=model_family,
            environment=environment,
            base_url=base_url,
            dialect=dialect,
            api_version=api_version,
            keep_browser_actions=keep_browser_actions,
            excluded_actions=list(excluded_actions or []),
            sensitive_names=sorted(sensitive_text or {}),
            lease_timeout=lease_timeout,
            reconnect_window_s=reconnect_window_s,
            runs_dir=str(runs_dir),
            video=bool(video),
            video_fps=float(video_fps),
            desktop=target,
            **_budgets(
                settings,
                step_limit=step_limit,
                seconds_timeout=seconds_timeout,
                hitl_mode=hitl_mode,
                include_initial_screenshot=include_initial_screenshot,
                keep_screenshots=keep_screenshots,
                confirm_actions=None if confirm_actions is None else list(confirm_actions),
                stall_after=stall_after,
                max_cost=max_cost,
                price=[float(price[0]), float(price[1])] if price else None,
            ),
        )
        reached = None
        if desktop is None and (keyboard is not None or rdp or lost_reason is not None):
            reached = _reached(target, vnc_password)  # behind a bridge the caller holds
            reached.keyboard, reached.lost_reason = keyboard, lost_reason
            reached.rdp = dict(rdp) if rdp else None
        self._open(
            spec,
            desktop=desktop,
            reached=reached,
            planner=planner,
            vnc_password=vnc_password,
            settings=settings,
            on_event=on_event,
            sensitive_text=sensitive_text,
            checkpointer=checkpointer or checkpoint_db,
            screen_size=screen_size,
        )

    @classmethod
    def from_spec(
        cls,
        spec: RunSpec,
        *,
        desktop: Desktop | None = None,
        reached: ReachedDesktop | None = None,
        planner: Planner | None = None,
        vnc_password: str | None = None,
        settings: AgentSettings | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        sensitive_text: Mapping[str, str] | None = None,
        checkpointer: BaseCheckpointSaver[Any] | str | Path | None = None,
        screen_size: tuple[int, int] = (1440, 900),
    ) -> VncUseAgent:
        """The agent of ``spec`` (:class:`~vnc_use.runs.spec.RunSpec`), with the live objects
        a spec cannot hold: a ``desktop`` to act on instead of the spec's, the spec's desktop
        already ``reached`` by the caller (:func:`~vnc_use.desktops.target.reach`: a bridge
        or the local desktop it holds), a ``planner`` of your own, a VNC password given
        directly, ``settings`` (how the screen settles, ...; the spec's budgets win), the
        events' listener, the values of the spec's ``sensitive_names`` (default: read from
        ``VNC_USE_SECRET_<NAME>``) and the checkpointer (a URL, a file or a saver).

        A spec whose desktop is the local one or an RDP host is reached here (the planner's
        readiness check first) and let go by :meth:`close`."""
        agent = cls.__new__(cls)
        agent._open(
            spec,
            desktop=desktop,
            reached=reached,
            planner=planner,
            vnc_password=vnc_password,
            settings=settings,
            on_event=on_event,
            sensitive_text=sensitive_text,
            checkpointer=checkpointer,
            screen_size=screen_size,
        )
        return agent


def _refuse_vnc_options_with_a_desktop(**options: Any) -> None:
    """A run uses one desktop: the VNC options make no sense next to ``desktop=``."""
    clash = [name for name, value in options.items() if value is not None]
    if clash:
        raise ConfigError(
            f"desktop= and {clash[0]}= were both given; a run uses one desktop: "
            f"leave out {clash[0]}= (the VNC options are for a VNC server only)"
        )


def _budgets(given: AgentSettings | None, **arguments: Any) -> dict[str, Any]:
    """The spec's budgets: the arguments given (those not None), else those of a
    ``settings=`` given, else the spec's defaults."""
    budgets = {}
    for name, value in arguments.items():
        if value is None and given is not None:
            value = getattr(given, name)
            value = (
                list(value) if name in ("confirm_actions", "price") and value is not None else value
            )
        if value is not None:
            budgets[name] = value
    return budgets


def _reached(target: DesktopTarget, password: str | None) -> ReachedDesktop:
    with reach(target, password=password) as reached:
        return reached
