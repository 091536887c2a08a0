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
from dataclasses import Field, asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from vnc_use.agent import budgets
from vnc_use.desktops.target import DesktopTarget
from vnc_use.errors import ConfigError
from vnc_use.setting import Setting, setting, settings_of
from vnc_use.store.lease import DEFAULT_LEASE_TIMEOUT

if TYPE_CHECKING:  # LangGraph and the action tables load when a run is opened, not before
    from vnc_use.agent.context import AgentSettings
    from vnc_use.providers.base import Planner

__all__ = [
    "DEFAULT_RECONNECT_WINDOW",
    "MODEL_FIELDS",
    "SPEC_NAMESPACE",
    "RunSpec",
    "run_settings",
    "where_settings",
]

SPEC_NAMESPACE = ("vnc_use", "run_spec")
"""Where the server's store keeps each thread's run spec (key: the thread id); its
``runs_dir`` there is absolute, on the server's side."""

DEFAULT_RECONNECT_WINDOW = 30.0

_SECRET_LOOKING = re.compile(r"(api[_-]?key|password|passwd|secret|token)$", re.I)
_DESKTOP_KEYS = frozenset(f.name for f in fields(DesktopTarget))


@dataclass
class RunSpec:
    """A JSON-only run specification (see the module's doc)."""

    # -- the model
    provider: str | None = setting(
        None,
        group="planner",
        flag="--provider",
        metavar="NAME",
        tool=True,
        shown_default="from the model id, else gemini",
        help="who serves the model: gemini, anthropic (Claude), openai, or openai-compatible "
        "(any OpenAI-compatible server: LM Studio, Ollama, vLLM, llama.cpp); a model id "
        "starting claude- means anthropic and gpt- openai; kept for approve/deny/resume",
    )
    model: str | None = setting(
        None,
        group="planner",
        flag="--model",
        tool=True,
        shown_default="the provider's default",
        help="model id: for Gemini e.g. gemini-3.5-flash (its family decides the action set); "
        "for openai-compatible the id the server lists at BASE_URL/models",
    )
    tool_version: str | None = setting(
        None,
        group="planner",
        flag="--tool-version",
        metavar="VERSION",
        help="anthropic: the computer tool to send instead of the model's own "
        "(computer_toolset_20260801, computer_20251124, computer_20250124); kept for "
        "approve/deny/resume",
    )
    model_family: str | None = setting(
        None,
        group="planner",
        flag="--model-family",
        metavar="NAME",
        help="action set for a model id vnc-use does not know: gemini-2.5, gemini-3, gemini-3.5",
    )
    environment: str | None = setting(
        None,
        group="planner",
        flag="--environment",
        choices=("browser", "desktop"),
        shown_default="the model family's; desktop for 3.5 Flash",
        help="what the model is driving",
    )
    base_url: str | None = setting(
        None,
        group="planner",
        flag="--base-url",
        metavar="URL",
        help="openai-compatible: the server's address, e.g. http://localhost:1234/v1 (LM "
        "Studio), http://localhost:11434/v1 (Ollama), http://localhost:8000/v1 (vLLM); the API "
        "key, if any, comes from OPENAI_API_KEY and is never recorded",
    )
    dialect: str | None = setting(
        None,
        group="planner",
        flag="--dialect",
        metavar="NAME",
        shown_default="from the model id, else tools",
        help="openai-compatible: how the model answers: tools, qwen3-vl, qwen2.5-vl, ui-tars, "
        "holo, ui-venus, opencua (run vnc-use calibrate to check)",
    )
    api_version: str | None = setting(
        None,
        group="planner",
        flag="--api-version",
        metavar="VERSION",
        shown_default="the GEMINI_API_VERSION environment variable, else v1beta, the version "
        "of Google's Computer Use examples",
        help="Gemini API version requests go to; kept for approve/deny/resume",
    )
    keep_browser_actions: bool = setting(
        False,
        group="planner",
        flag="--keep-browser-actions",
        kind="switch",
        help="on a desktop, keep navigate/search/go_back/... (2.5 and 3 Flash families)",
    )
    keep_screenshots: int | None = setting(
        None,
        group="planner",
        flag="--keep-screenshots",
        metavar="N",
        parse="count",
        shown_default="the provider's, 3 for Gemini and Claude, 2 for openai-compatible",
        help="send the model only the last N screenshots: the screenshot window",
    )
    excluded_actions: list[str] = setting(
        default_factory=list,
        group="planner",
        flag="--exclude",
        metavar="NAME",
        kind="many",
        help="actions to forbid",
    )
    # -- budgets and approvals
    step_limit: int = setting(
        budgets.STEP_LIMIT,
        group="budget",
        flag="--step-limit",
        metavar="N",
        parse="int",
        tool=True,
        bounds=(("ge", 1),),
        help="most actions the model may take before the run stops",
    )
    seconds_timeout: float = setting(
        budgets.SECONDS_TIMEOUT,
        group="budget",
        flag="--timeout",
        metavar="S",
        parse="float",
        help="seconds budget: the run stops (timeout) once it has acted this long",
    )
    hitl_mode: bool = setting(
        budgets.HITL_MODE,
        group="approvals",
        flag="--no-hitl",
        kind="negated",
        help="never ask: deny risky actions",
    )
    include_initial_screenshot: bool = setting(
        budgets.INCLUDE_INITIAL_SCREENSHOT,
        group="approvals",
        flag="--no-initial-screenshot",
        kind="negated",
        help="send the task without a screenshot",
    )
    confirm_actions: list[str] = setting(
        default_factory=list,
        group="approvals",
        flag="--confirm",
        metavar="NAME",
        kind="many",
        help="actions that always wait for your approval (vnc-use approve/deny), for every "
        "provider and on top of the model's own requests: action names, e.g. type press_key, "
        "or all",
    )
    sensitive_names: list[str] = setting(
        default_factory=list,
        group="approvals",
        flag="--sensitive",
        metavar="NAME",
        kind="each",
        help="a secret the model types as {{NAME}}: the value comes from the environment "
        "variable VNC_USE_SECRET_NAME and never appears in logs, reports or checkpoints",
    )
    lease_timeout: float = setting(
        DEFAULT_LEASE_TIMEOUT,
        where=True,
        group="local",
        flag="--lease-timeout",
        metavar="SECONDS",
        parse="wait",
        cli_default=True,
        help="how long to wait for a desktop another run is driving before giving up",
    )
    reconnect_window_s: float = setting(
        DEFAULT_RECONNECT_WINDOW,
        where=True,
        group="local",
        flag="--reconnect-window",
        metavar="S",
        parse="float",
        shown_default=f"{DEFAULT_RECONNECT_WINDOW:g} (not with --server)",
        help="how long to wait for a lost VNC server to come back before the run ends as an "
        "error (resumable)",
    )
    runs_dir: str = setting(
        "runs",
        where=True,
        group="runs_dir",
        flag="--runs-dir",
        cli_default=True,
        help="folder of run folders and checkpoints (on the acting side)",
    )
    video: bool = setting(
        True,
        where=True,
        group="recording",
        flag="--video",
        kind="on_off",
        shown_default="on for a new run; approve, deny and resume keep the run's own choice",
        help="record video.mp4 from the VNC connection",
    )
    video_fps: float = setting(
        10.0,
        where=True,
        group="recording",
        flag="--video-fps",
        metavar="N",
        parse="fps",
        shown_default="10, or the run's own",
        help="the video's highest frame rate; frames only when the screen changes",
    )
    stall_after: int = setting(
        budgets.STALL_AFTER,
        group="stall",
        flag="--stall-after",
        metavar="N",
        parse="count",
        help="tell the model when its last N actions changed nothing on the screen, and stop "
        "the run as stuck (exit 8) if it goes on; 0: off",
    )
    max_cost: float | None = setting(
        None,
        where=True,
        group="cost",
        flag="--max-cost",
        metavar="USD",
        parse="usd",
        tool=True,
        bounds=(("gt", 0),),
        help="stop the run (status cost_limit, exit 5) before a model call once its cost "
        "reached this many USD; resume --max-cost HIGHER continues it",
    )
    price: list[float] | None = setting(
        None,
        group="cost",
        flag="--price",
        metavar="INPUT/OUTPUT",
        parse="price",
        shown_default="vnc-use's price table; a model not in it costs 'unknown', a local "
        "openai-compatible model 0",
        help="the model's price in USD per million input and output tokens, e.g. 1.25/10",
    )
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
        if rdp:  # the bridge's settings as the run recorded them (rdp_size: "size")
            settings["vnc_server"] = None
            for key in _DESKTOP_KEYS:
                if key.startswith("rdp_") and rdp.get(key.removeprefix("rdp_")):
                    settings[key] = rdp[key.removeprefix("rdp_")]
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
        from dataclasses import fields as fields_of
        from dataclasses import replace

        from vnc_use.agent.context import AgentSettings

        own = getattr(planner, "keep_screenshots", None)
        keep = self.keep_screenshots if self.keep_screenshots is not None else own
        shared = {f.name for f in fields_of(AgentSettings)} & {f.name for f in fields(self)}
        values: dict[str, Any] = {name: getattr(self, name) for name in shared}
        values.update(  # the graph's own types: a float budget, tuples, a whole window
            seconds_timeout=float(self.seconds_timeout),
            keep_screenshots=keep if isinstance(keep, int) else budgets.KEEP_SCREENSHOTS,
            confirm_actions=tuple(self.confirm_actions),
            price=(float(self.price[0]), float(self.price[1])) if self.price else None,
        )
        return replace(base or AgentSettings(), **values)

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


MODEL_FIELDS: tuple[str, ...] = tuple(
    f.name for f, s in settings_of(RunSpec) if s.group == "planner"
)
"""The spec's fields that choose and configure the model (what ``run.json`` keeps of a
planner's settings): its settings of the ``planner`` group."""


def run_settings() -> list[tuple[Field[Any], Setting]]:
    """Every setting of a run, each with its one description: the desktop's, then the
    spec's own (what the doors are built from, :mod:`vnc_use.setting`)."""
    return [*settings_of(DesktopTarget), *settings_of(RunSpec)]


def where_settings() -> list[tuple[Field[Any], Setting]]:
    """The settings that say where and how a run executes (:attr:`Setting.where
    <vnc_use.setting.Setting.where>`): what an executor may refuse."""
    return [(f, s) for f, s in run_settings() if s.where]
