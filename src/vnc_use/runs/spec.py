"""The run specification: everything a run needs to know, as JSON, and never a secret.

:class:`RunSpec` is the one description of a run: the model settings, the budgets, the
approval mode and the desktop (:class:`~vnc_use.desktops.target.DesktopTarget`). Every front
door builds one from its own input in one function (``vnc-use run`` and ``--server``,
``approve``/``deny``/``resume`` from the run's ``run.json``, ``eval``, the MCP ``run_task``
tool, ``replay``), and everything downstream takes it: :meth:`VncUseAgent.from_spec
<vnc_use.runs.agent.VncUseAgent.from_spec>`, the served graph. Its defaults live here (the
budgets' are spelled once, in :mod:`vnc_use.agent.budgets`, which the graph's settings read too).

It is also the served graph's context schema: what a client of LangGraph Server sends as
``context`` when it creates a run. The server stores it with the run record, so it holds only
*names* of secrets: the environment variables with the VNC / RDP password
(``desktop.vnc_password_env``, ``desktop.rdp_password_env``) and the names of sensitive values
(``sensitive_names``, each read from ``VNC_USE_SECRET_<NAME>``). The task arrives as the run's
input (``{"task": "..."}``). Contexts of older clients, with the desktop's keys at the top
level (``vnc_server``, ``rdp_server``, ...), still read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from vnc_use.agent import budgets
from vnc_use.desktops.target import DesktopTarget
from vnc_use.errors import ConfigError
from vnc_use.store.lease import DEFAULT_LEASE_TIMEOUT

if TYPE_CHECKING:  # LangGraph and the action tables load when a run is opened, not before
    from vnc_use.agent.context import AgentSettings
    from vnc_use.providers.base import Planner

__all__ = ["DEFAULT_RECONNECT_WINDOW", "MODEL_FIELDS", "SPEC_NAMESPACE", "RunSpec"]

SPEC_NAMESPACE = ("vnc_use", "run_spec")
"""Where the server's store keeps each thread's run spec (key: the thread id); its
``runs_dir`` there is absolute, on the server's side."""

DEFAULT_RECONNECT_WINDOW = 30.0

_SECRET_LOOKING = re.compile(r"(api[_-]?key|password|passwd|secret|token)$", re.I)
_DESKTOP_KEYS = frozenset(f.name for f in fields(DesktopTarget))

MODEL_FIELDS = (
    "provider",
    "model",
    "tool_version",
    "model_family",
    "environment",
    "base_url",
    "dialect",
    "api_version",
    "keep_browser_actions",
    "keep_screenshots",
    "excluded_actions",
)
"""The spec's fields that choose and configure the model (what ``run.json`` keeps of a
planner's settings)."""


@dataclass
class RunSpec:
    """A JSON-only run specification (see the module's doc)."""

    # -- the model
    provider: str | None = None
    """gemini (default), anthropic, openai or openai-compatible; None: from the model id."""
    model: str | None = None
    tool_version: str | None = None
    """anthropic / openai: the computer tool to send instead of the model's own."""
    model_family: str | None = None
    environment: str | None = None
    base_url: str | None = None
    dialect: str | None = None
    api_version: str | None = None
    keep_browser_actions: bool = False
    keep_screenshots: int | None = None
    """How many screenshots go to the model (the screenshot window); None: the provider's."""
    excluded_actions: list[str] = field(default_factory=list)
    # -- budgets and approvals
    step_limit: int = budgets.STEP_LIMIT
    seconds_timeout: float = budgets.SECONDS_TIMEOUT
    hitl_mode: bool = budgets.HITL_MODE
    include_initial_screenshot: bool = budgets.INCLUDE_INITIAL_SCREENSHOT
    confirm_actions: list[str] = field(default_factory=list)
    sensitive_names: list[str] = field(default_factory=list)
    """Names of sensitive values; each value is read from ``VNC_USE_SECRET_<NAME>``."""
    lease_timeout: float = DEFAULT_LEASE_TIMEOUT
    """How long a run waits for a desktop another run holds before it fails."""
    reconnect_window_s: float = DEFAULT_RECONNECT_WINDOW
    """How long a run in this process waits for a lost VNC server to come back."""
    runs_dir: str = "runs"
    """Where the run folder goes (screenshots, events, journal), on the acting side."""
    video: bool = True
    """Record each leg into the run folder's ``video.mp4`` (VNC desktops; ``--no-video``)."""
    video_fps: float = 10.0
    """The video's highest frame rate (``--video-fps``)."""
    stall_after: int = budgets.STALL_AFTER
    """Actions in a row that change nothing before the model is told; a stall that goes on
    ends the run ``stuck`` (0: off)."""
    max_cost: float | None = None
    """USD: the run stops (``cost_limit``) before a model call once its cost reached this."""
    price: list[float] | None = None
    """The model's price, ``[INPUT, OUTPUT]`` USD per million tokens (else the price table's)."""
    # -- the desktop
    desktop: DesktopTarget = field(default_factory=DesktopTarget)

    def __post_init__(self) -> None:
        if isinstance(self.desktop, Mapping):  # a context coerced field by field
            self.desktop = DesktopTarget.from_json(self.desktop)

    @classmethod
    def from_context(cls, context: Any) -> RunSpec:
        """The spec a client sent (a dict, or a RunSpec); unknown keys are ignored, a key
        that looks like a secret is refused (the context is stored with the run)."""
        if isinstance(context, RunSpec):
            spec = context
        elif isinstance(context, Mapping):
            spec = cls.from_json(context)
        else:
            raise ConfigError(f"the run's context must be a JSON object, got {type(context)}")
        spec.check()
        return spec

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunSpec:
        """A spec from its JSON; the desktop's keys may also be at the top level (older
        clients); a key that looks like a secret is refused."""
        desktop = dict(data.get("desktop") or {})
        _refuse_secrets(data)
        _refuse_secrets(desktop)
        for key in _DESKTOP_KEYS & set(data):
            if data[key] is not None:
                desktop.setdefault(key, data[key])
        known = {f.name for f in fields(cls)} - {"desktop"}
        values = {k: v for k, v in data.items() if k in known and v is not None}
        return cls(**values, desktop=DesktopTarget.from_json(desktop))

    @classmethod
    def from_run_json(cls, saved: Mapping[str, Any]) -> RunSpec:
        """The spec of a recorded run, from its ``run.json`` (for approve, deny, resume,
        replay): the settings it kept; a missing one is the default."""
        # `local` is kept as the run was asked, but a later leg goes on at the address the
        # run reached (a local desktop's too: its state folder names its password)
        settings = {
            k: v for k, v in saved.items() if k not in ("desktop", "local") and v is not None
        }
        rdp = saved.get("rdp") or {}
        if rdp:  # the bridge's settings as the run recorded them
            settings["vnc_server"] = None
            for key, name in (
                ("rdp_server", "server"),
                ("rdp_username", "username"),
                ("rdp_domain", "domain"),
                ("rdp_size", "size"),
                ("rdp_cert_fingerprint", "cert_fingerprint"),
                ("rdp_paste_text", "paste_text"),
                ("rdp_allow_unverified_login", "allow_unverified_login"),
            ):
                if rdp.get(name):
                    settings[key] = rdp[name]
        spec = cls.from_json({k: v for k, v in settings.items() if v is not None})
        if isinstance(saved.get("desktop"), str):  # a desktop= run (a class name): no VNC
            spec.desktop.label = saved["desktop"]
        return spec

    def check(self) -> None:
        """Refuse settings that cannot work, with one line naming the fix."""
        if self.step_limit < 1:
            raise ConfigError(f"step_limit must be at least 1, got {self.step_limit}")
        if not self.seconds_timeout > 0:
            raise ConfigError(f"seconds_timeout must be positive, got {self.seconds_timeout}")
        if not self.video_fps > 0:
            raise ConfigError(f"video_fps must be positive, got {self.video_fps} (--video-fps)")
        if not self.lease_timeout >= 0:
            raise ConfigError(f"lease_timeout must be 0 or more seconds, got {self.lease_timeout}")
        if self.keep_screenshots is not None and self.keep_screenshots < 0:
            raise ConfigError(f"keep_screenshots must be 0 or more, got {self.keep_screenshots}")
        for name in self.sensitive_names:
            if not name.isidentifier():
                raise ConfigError(f"sensitive name {name!r}: use letters, digits and '_'")
        self._check_costs()
        from vnc_use.agent import approval

        self.confirm_actions = list(approval.check_confirm_actions(self.confirm_actions))
        self.desktop.check()

    def _check_costs(self) -> None:
        """The stall limit, the cost cap and the price: each refused with one line."""
        if self.stall_after < 0:
            raise ConfigError(f"stall_after must be 0 (off) or more, got {self.stall_after}")
        if self.max_cost is not None and not self.max_cost > 0:
            raise ConfigError(f"max_cost must be a positive number of USD, got {self.max_cost}")
        if self.price is not None and (
            len(self.price) != 2
            or not all(isinstance(v, (int, float)) and v >= 0 for v in self.price)
        ):
            raise ConfigError(
                f"price must be [INPUT, OUTPUT] USD per million tokens, got {self.price}"
            )

    # -- compatibility: the desktop's fields read as the flat spec had them (spec.vnc_server)
    def __getattr__(self, name: str) -> Any:
        if name in _DESKTOP_KEYS and "desktop" in self.__dict__:
            return getattr(self.desktop, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def desktop_key(self) -> str:
        """The desktop the run's lease is on (see :attr:`DesktopTarget.lease_key`)."""
        return self.desktop.lease_key

    def rdp_options(self) -> Any:
        """The :class:`~vnc_use.desktops.rdp.RdpOptions` of an RDP run (None: a VNC run)."""
        return self.desktop.rdp_options()

    def to_json(self) -> dict[str, Any]:
        """The spec as the plain dict a client sends as ``context``."""
        return asdict(self)

    def to_record(self) -> dict[str, Any]:
        """The spec as run.json keeps it: the desktop's keys at the top level, as they were
        before the spec had a desktop (readers of older run folders find them there)."""
        record = self.to_json()
        return {**record.pop("desktop"), **record}

    def model_settings(self) -> dict[str, Any]:
        """The model's settings (the keyword arguments of :func:`make_planner`)."""
        return {name: getattr(self, name) for name in MODEL_FIELDS}

    def settings(self, planner: Planner, base: AgentSettings | None = None) -> AgentSettings:
        """The run's budgets and behaviour (over ``base``'s other settings, e.g. how the
        screen settles); the screenshot window is the planner's own unless the spec gives
        one."""
        from dataclasses import replace

        from vnc_use.agent.context import AgentSettings

        own = getattr(planner, "keep_screenshots", None)
        keep = self.keep_screenshots if self.keep_screenshots is not None else own
        return replace(
            base or AgentSettings(),
            step_limit=self.step_limit,
            seconds_timeout=float(self.seconds_timeout),
            hitl_mode=self.hitl_mode,
            include_initial_screenshot=self.include_initial_screenshot,
            keep_screenshots=keep if isinstance(keep, int) else budgets.KEEP_SCREENSHOTS,
            confirm_actions=tuple(self.confirm_actions),
            stall_after=self.stall_after,
            max_cost=self.max_cost,
            price=(float(self.price[0]), float(self.price[1])) if self.price else None,
        )

    def planner(self) -> Planner:
        """The planner the spec names (the provider's SDK is imported here)."""
        from vnc_use.providers.registry import make_planner

        settings = self.model_settings()
        settings["excluded_actions"] = self.excluded_actions or None
        return make_planner(**settings)


def _refuse_secrets(data: Mapping[str, Any]) -> None:
    for key in data:
        if _SECRET_LOOKING.search(str(key)) and not str(key).endswith("_env"):
            raise ConfigError(
                f"the run's context has {key!r}: never send a secret (the server stores the "
                "context with the run); name the environment variable that holds it "
                "(vnc_password_env) or use sensitive_names"
            )
