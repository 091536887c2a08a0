"""The run specification: everything a run needs to know, as JSON, and never a secret.

:class:`RunSpec` is the graph's context schema (``context_schema``): what a client of LangGraph
Server sends as ``context`` when it creates a run (``vnc-use run --server URL`` does). The
server stores it with the run record, so it holds only *names* of secrets: the environment
variable with the VNC password (``vnc_password_env``) and the names of sensitive values
(``sensitive_names``, each read from ``VNC_USE_SECRET_<NAME>`` on the server). The task
arrives as the run's input (``{"task": "..."}``).

The live parts a run acts with (the VNC connection, the planner, the run folder, the journal)
are built from it on the server by :mod:`vnc_use.agent.serve`.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from vnc_use.agent import approval as safety
from vnc_use.agent.context import AgentSettings
from vnc_use.agent.stall import DEFAULT_STALL_AFTER
from vnc_use.errors import ConfigError
from vnc_use.providers.base import Planner
from vnc_use.store.lease import DEFAULT_LEASE_TIMEOUT

__all__ = ["SPEC_NAMESPACE", "RunSpec"]

SPEC_NAMESPACE = ("vnc_use", "run_spec")
"""Where the server's store keeps each thread's run spec (key: the thread id); its
``runs_dir`` there is absolute, on the server's side."""

_SECRET_LOOKING = re.compile(r"(api[_-]?key|password|passwd|secret|token)$", re.I)


@dataclass
class RunSpec:
    """A JSON-only run specification (the graph's context schema; see the module's doc)."""

    vnc_server: str = "localhost::5901"
    vnc_password_env: str = "VNC_PASSWORD"
    """The name of the environment variable (on the server) that holds the VNC password."""
    vnc_username: str | None = None
    vnc_ca: str | None = None
    connect_timeout: float = 5.0
    screen_region: str | None = None
    provider: str | None = None
    model: str | None = None
    model_family: str | None = None
    environment: str | None = None
    base_url: str | None = None
    dialect: str | None = None
    api_version: str | None = None
    keep_browser_actions: bool = False
    step_limit: int = 40
    seconds_timeout: float = 300.0
    hitl_mode: bool = True
    include_initial_screenshot: bool = True
    keep_screenshots: int | None = None
    """How many screenshots go to the model (the screenshot window); None: the provider's."""
    confirm_actions: list[str] = field(default_factory=list)
    excluded_actions: list[str] = field(default_factory=list)
    sensitive_names: list[str] = field(default_factory=list)
    """Names of sensitive values; each value is read from ``VNC_USE_SECRET_<NAME>``."""
    lease_timeout: float = DEFAULT_LEASE_TIMEOUT
    """How long a run waits for a desktop another run holds before it fails."""
    runs_dir: str = "runs"
    """Where the run folder goes (screenshots, events, journal), on the server's side."""
    rdp_server: str | None = None
    """An RDP desktop (``HOST[:PORT]``) instead of ``vnc_server``: each leg of the run starts
    a FreeRDP bridge to it on the server (:mod:`vnc_use.agent.rdp_leg`)."""
    rdp_password_env: str = "RDP_PASSWORD"
    """The name of the environment variable (on the server) that holds the RDP password."""
    rdp_username: str | None = None
    rdp_domain: str | None = None
    rdp_size: str | None = None
    """The remote session's size, ``WxH`` (default 1280x800)."""
    rdp_cert_fingerprint: str | None = None
    """The SHA-256 the RDP server's certificate must have (default: trust on first use)."""
    rdp_paste_text: bool = False
    """Text the RDP keyboard cannot type goes through the RDP clipboard and a paste."""
    rdp_allow_unverified_login: bool = False
    """Give the credentials to an RDP server without NLA (which checks them in its own login
    screen, so a wrong password cannot be told from a desktop)."""
    video: bool = True
    """Record each leg into the run folder's ``video.mp4`` (VNC desktops; ``--no-video``)."""
    video_fps: float = 10.0
    """The video's highest frame rate (``--video-fps``)."""
    stall_after: int = DEFAULT_STALL_AFTER
    """Actions in a row that change nothing before the model is told; a stall that goes on
    ends the run ``stuck`` (0: off)."""
    max_cost: float | None = None
    """USD: the run stops (``cost_limit``) before a model call once its cost reached this."""
    price: list[float] | None = None
    """The model's price, ``[INPUT, OUTPUT]`` USD per million tokens (else the price table's)."""

    @classmethod
    def from_context(cls, context: Any) -> RunSpec:
        """The spec a client sent (a dict, or a RunSpec); unknown keys are ignored, a key
        that looks like a secret is refused (the context is stored with the run)."""
        if isinstance(context, RunSpec):
            return context
        if not isinstance(context, dict):
            raise ConfigError(f"the run's context must be a JSON object, got {type(context)}")
        for key in context:
            if _SECRET_LOOKING.search(str(key)) and not str(key).endswith("_env"):
                raise ConfigError(
                    f"the run's context has {key!r}: never send a secret (the server stores the "
                    "context with the run); name the environment variable that holds it "
                    "(vnc_password_env) or use sensitive_names"
                )
        known = {f.name for f in fields(cls)}
        spec = cls(**{k: v for k, v in context.items() if k in known and v is not None})
        spec.check()
        return spec

    def check(self) -> None:
        """Refuse settings that cannot work, with one line naming the fix."""
        if self.step_limit < 1:
            raise ConfigError(f"step_limit must be at least 1, got {self.step_limit}")
        if not self.seconds_timeout > 0:
            raise ConfigError(f"seconds_timeout must be positive, got {self.seconds_timeout}")
        if not self.video_fps > 0:
            raise ConfigError(f"video_fps must be positive, got {self.video_fps} (--video-fps)")
        if not self.connect_timeout > 0:
            raise ConfigError(f"connect_timeout must be positive, got {self.connect_timeout}")
        for name in self.sensitive_names:
            if not name.isidentifier():
                raise ConfigError(f"sensitive name {name!r}: use letters, digits and '_'")
        self.confirm_actions = list(safety.check_confirm_actions(self.confirm_actions))
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
        self.rdp_options()  # a bad RDP address, size or fingerprint fails here

    def rdp_options(self) -> Any:
        """The :class:`~vnc_use.desktops.rdp.RdpOptions` of an RDP run (None: a VNC run)."""
        if not self.rdp_server:
            return None
        from vnc_use.desktops.local import parse_size
        from vnc_use.desktops.rdp import DEFAULT_RDP_SIZE, RdpOptions, RdpTarget, parse_fingerprint

        pin = self.rdp_cert_fingerprint
        return RdpOptions(
            target=RdpTarget.parse(self.rdp_server),
            username=self.rdp_username,
            domain=self.rdp_domain,
            size=parse_size(self.rdp_size) if self.rdp_size else DEFAULT_RDP_SIZE,
            fingerprint=parse_fingerprint(pin) if pin else None,
            connect_timeout=self.connect_timeout,
            allow_unverified_login=self.rdp_allow_unverified_login,
            paste_text=self.rdp_paste_text,
        )

    @property
    def desktop_key(self) -> str:
        """The desktop the run's lease is on: the RDP server (as ``host::port``: one
        address cannot be both), else the VNC server."""
        options = self.rdp_options()
        if options is None:
            return self.vnc_server
        host = options.target.host
        return (
            f"[{host}]::{options.target.port}" if ":" in host else f"{host}::{options.target.port}"
        )

    def to_json(self) -> dict[str, Any]:
        """The spec as the plain dict a client sends as ``context``."""
        return asdict(self)

    def settings(self, planner: Planner) -> AgentSettings:
        """The run's budgets and behaviour; the screenshot window is the planner's own
        unless the spec gives one."""
        own = getattr(planner, "keep_screenshots", None)
        keep = self.keep_screenshots if self.keep_screenshots is not None else own
        return AgentSettings(
            step_limit=self.step_limit,
            seconds_timeout=float(self.seconds_timeout),
            hitl_mode=self.hitl_mode,
            include_initial_screenshot=self.include_initial_screenshot,
            keep_screenshots=keep if isinstance(keep, int) else 3,
            confirm_actions=tuple(self.confirm_actions),
            stall_after=self.stall_after,
            max_cost=self.max_cost,
            price=(float(self.price[0]), float(self.price[1])) if self.price else None,
        )

    def planner(self) -> Planner:
        """The planner the spec names (the provider's SDK is imported here)."""
        from vnc_use.providers.registry import make_planner

        return make_planner(
            self.provider,
            model=self.model,
            base_url=self.base_url,
            dialect=self.dialect,
            keep_screenshots=self.keep_screenshots,
            excluded_actions=self.excluded_actions or None,
            environment=self.environment,
            model_family=self.model_family,
            keep_browser_actions=self.keep_browser_actions,
            api_version=self.api_version,
        )
