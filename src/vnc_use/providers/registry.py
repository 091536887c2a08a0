"""Which planner a run uses: the provider's name and settings turned into a planner.

``vnc-use run --provider NAME``, ``VncUseAgent(provider=NAME)`` and ``approve`` / ``deny`` /
``resume`` (rebuilding from ``run.json``) all go through :func:`make_planner`, so a bad setting
fails the same way everywhere: one :class:`~vnc_use.errors.ConfigError` line naming the
problem and the fix. A provider's SDK is imported only when its planner is made (``--help``
imports neither ``google-genai``'s planner nor ``openai``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vnc_use.errors import ConfigError
from vnc_use.providers.base import Planner

__all__ = [
    "ANTHROPIC",
    "DEFAULT_PROVIDER",
    "OPENAI",
    "OPENAI_COMPATIBLE",
    "PROVIDERS",
    "make_planner",
    "planner_from_settings",
    "provider_for_model",
]

DEFAULT_PROVIDER = "gemini"
OPENAI_COMPATIBLE = "openai-compatible"
ANTHROPIC = "anthropic"
OPENAI = "openai"
PROVIDERS: tuple[str, ...] = (DEFAULT_PROVIDER, ANTHROPIC, OPENAI, OPENAI_COMPATIBLE)
"""The names ``--provider`` / ``provider=`` accept (and ``run.json``'s ``provider``)."""

_EXAMPLE_URLS = (
    "http://localhost:1234/v1 (LM Studio), http://localhost:11434/v1 (Ollama), "
    "http://localhost:8000/v1 (vLLM)"
)

_MODEL_PREFIXES: tuple[tuple[str, str], ...] = (
    ("claude-", ANTHROPIC),
    ("gpt-", OPENAI),
    ("computer-use", OPENAI),
)
"""Model id prefixes that clearly belong to one provider (``--provider`` left out)."""


def provider_for_model(model: str | None) -> str | None:
    """The provider a model id clearly belongs to (``claude-`` -> anthropic, ``gpt-`` and
    ``computer-use`` -> openai), else None (the default provider, gemini, is used)."""
    lowered = (model or "").strip().lower()
    for prefix, provider in _MODEL_PREFIXES:
        if lowered.startswith(prefix):
            return provider
    return None


_FLAGS = {"excluded_actions": "--exclude"}
"""Command-line spellings that are not the Python name with dashes."""

_OWNERS: dict[str, tuple[str, ...]] = {
    "base_url": (OPENAI_COMPATIBLE, ANTHROPIC, OPENAI),
    "dialect": (OPENAI_COMPATIBLE,),
    "excluded_actions": (DEFAULT_PROVIDER,),
    "environment": (DEFAULT_PROVIDER,),
    "model_family": (DEFAULT_PROVIDER,),
    "keep_browser_actions": (DEFAULT_PROVIDER,),
    "api_version": (DEFAULT_PROVIDER,),
    "tool_version": (ANTHROPIC, OPENAI),
}
"""Which providers each provider-specific setting is for."""


def _option(name: str) -> str:
    """How a setting is spelled on the command line and in Python, for error lines."""
    return f"{_FLAGS.get(name, '--' + name.replace('_', '-'))} / {name}="


def _check_owners(provider: str, options: Mapping[str, Any]) -> None:
    """A setting given to a provider it is not for: one ConfigError line naming the fix."""
    for key, owners in _OWNERS.items():
        if options.get(key) and provider not in owners:
            if owners == (DEFAULT_PROVIDER,):
                raise ConfigError(
                    f"{_option(key)} is for the gemini provider only; leave it out with "
                    f"--provider {provider}"
                    + (
                        " (use --confirm NAME / confirm_actions= to stop actions for approval)"
                        if key == "excluded_actions"
                        else ""
                    )
                )
            names = " or ".join(f"--provider {o}" for o in owners)
            raise ConfigError(f"{_option(key)} is for {names} (provider=); add it or leave it out")


def make_planner(
    provider: str | None = None,
    *,
    model: str | None = None,
    base_url: str | None = None,
    dialect: str | None = None,
    keep_screenshots: int | None = None,
    excluded_actions: Sequence[str] | None = None,
    environment: str | None = None,
    model_family: str | None = None,
    keep_browser_actions: bool = False,
    api_version: str | None = None,
    tool_version: str | None = None,
) -> Planner:
    """The planner of ``provider`` (default: the one the model id belongs to, else ``gemini``)
    with its settings; ``keep_screenshots`` None means the provider's own default."""
    name = provider or provider_for_model(model) or DEFAULT_PROVIDER
    builder = _BUILDERS.get(name)
    if builder is None:
        raise ConfigError(
            f"unknown provider {name!r} ({_option('provider')}); use one of: {', '.join(PROVIDERS)}"
        )
    options: dict[str, Any] = {
        "model": model,
        "base_url": base_url,
        "dialect": dialect,
        "keep_screenshots": keep_screenshots,
        "excluded_actions": excluded_actions,
        "environment": environment,
        "model_family": model_family,
        "keep_browser_actions": keep_browser_actions,
        "api_version": api_version,
        "tool_version": tool_version,
    }
    _check_owners(name, options)
    return builder(options)


def _gemini(o: Mapping[str, Any]) -> Planner:
    from vnc_use.providers.gemini.planner import DEFAULT_MODEL, GeminiComputerUse

    gemini: dict[str, Any] = {}
    if o["keep_screenshots"] is not None:
        gemini["keep_screenshots"] = o["keep_screenshots"]
    excluded = o["excluded_actions"]
    return GeminiComputerUse(
        excluded_actions=list(excluded) if excluded else None,
        model=o["model"] or DEFAULT_MODEL,
        environment=o["environment"],
        family=o["model_family"],
        keep_browser_actions=o["keep_browser_actions"],
        api_version=o["api_version"],
        **gemini,
    )


def _anthropic(o: Mapping[str, Any]) -> Planner:
    # imports anthropic (ConfigError with the pip command when the extra is missing)
    from vnc_use.providers.anthropic.planner import DEFAULT_MODEL, AnthropicPlanner

    keep = o["keep_screenshots"]
    return AnthropicPlanner(
        o["model"] or DEFAULT_MODEL,
        tool_version=o["tool_version"],
        base_url=o["base_url"],
        keep_screenshots=3 if keep is None else keep,
    )


OPENAI_TOOL = "computer"
"""The one tool version of --provider openai: the GA ``computer`` tool (the preview tool is
shut down)."""


def _openai(o: Mapping[str, Any]) -> Planner:
    if o["tool_version"] and o["tool_version"] != OPENAI_TOOL:
        raise ConfigError(
            f"--tool-version {o['tool_version']} is not an OpenAI tool: --provider {OPENAI} "
            f"uses the GA {OPENAI_TOOL!r} tool only; leave --tool-version out"
        )
    # imports openai (ConfigError with the pip command when the extra is missing)
    from vnc_use.providers.openai import DEFAULT_MODEL, OpenAIPlanner

    keep = o["keep_screenshots"]
    return OpenAIPlanner(
        o["model"] or DEFAULT_MODEL,
        base_url=o["base_url"],
        keep_screenshots=3 if keep is None else keep,
    )


def _openai_compatible(o: Mapping[str, Any]) -> Planner:
    base_url, model, dialect = o["base_url"], o["model"], o["dialect"]
    keep_screenshots = o["keep_screenshots"]
    if not base_url:
        raise ConfigError(
            f"--provider {OPENAI_COMPATIBLE} needs the server's address: {_option('base_url')}"
            f"URL, e.g. {_EXAMPLE_URLS}"
        )
    if not model or not model.strip():
        raise ConfigError(
            f"--provider {OPENAI_COMPATIBLE} needs {_option('model')}ID: the model id the "
            f"server lists at {base_url.rstrip('/')}/models"
        )
    # imports openai (ConfigError with the pip command when the extra is missing)
    from vnc_use.providers.openai_compat import DIALECT_NAMES, OpenAICompatPlanner

    if dialect and dialect not in DIALECT_NAMES:
        raise ConfigError(
            f"unknown dialect {dialect!r} ({_option('dialect')}); use one of: "
            f"{', '.join(DIALECT_NAMES)} (or leave it out: the model id decides)"
        )
    return OpenAICompatPlanner(
        base_url,
        model,
        dialect,
        keep_screenshots=2 if keep_screenshots is None else keep_screenshots,
    )


_BUILDERS: dict[str, Callable[[Mapping[str, Any]], Planner]] = {
    DEFAULT_PROVIDER: _gemini,
    OPENAI_COMPATIBLE: _openai_compatible,
    ANTHROPIC: _anthropic,
    OPENAI: _openai,
}
"""One entry per provider: its name and the function that builds its planner."""


def planner_from_settings(settings: Mapping[str, Any]) -> Planner:
    """The planner a run used, rebuilt from its ``run.json`` settings (for ``approve``,
    ``deny`` and ``resume``); a run without ``provider`` is a Gemini run. A replay's
    (``provider: replay``) is not a provider: :func:`vnc_use.replay.planner_from_run`
    rebuilds any run's planner, a replay's included."""
    keep = settings.get("keep_screenshots")
    return make_planner(
        settings.get("provider") or DEFAULT_PROVIDER,
        model=settings.get("model") or None,
        base_url=settings.get("base_url") or None,
        dialect=settings.get("dialect") or None,
        keep_screenshots=int(keep) if keep is not None else None,
        excluded_actions=settings.get("excluded_actions") or None,
        environment=settings.get("environment") or None,
        model_family=settings.get("model_family") or None,
        keep_browser_actions=bool(settings.get("keep_browser_actions")),
        api_version=settings.get("api_version") or None,
        tool_version=settings.get("tool_version") or None,
    )
