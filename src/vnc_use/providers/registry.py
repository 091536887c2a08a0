"""Which planner a run uses: the provider's name and settings turned into a planner.

``vnc-use run --provider NAME``, ``VncUseAgent(provider=NAME)`` and ``approve`` / ``deny`` /
``resume`` (rebuilding from ``run.json``) all go through :func:`make_planner`, so a bad setting
fails the same way everywhere: one :class:`~vnc_use.errors.ConfigError` line naming the
problem and the fix. A provider's SDK is imported only when its planner is made (``--help``
imports neither ``google-genai``'s planner nor ``openai``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vnc_use.errors import ConfigError
from vnc_use.providers.base import Planner

__all__ = [
    "DEFAULT_PROVIDER",
    "OPENAI_COMPATIBLE",
    "PROVIDERS",
    "make_planner",
    "planner_from_settings",
]

DEFAULT_PROVIDER = "gemini"
OPENAI_COMPATIBLE = "openai-compatible"
PROVIDERS: tuple[str, ...] = (DEFAULT_PROVIDER, OPENAI_COMPATIBLE)
"""The names ``--provider`` / ``provider=`` accept (and ``run.json``'s ``provider``)."""

_EXAMPLE_URLS = (
    "http://localhost:1234/v1 (LM Studio), http://localhost:11434/v1 (Ollama), "
    "http://localhost:8000/v1 (vLLM)"
)


_FLAGS = {"excluded_actions": "--exclude"}
"""Command-line spellings that are not the Python name with dashes."""


def _option(name: str) -> str:
    """How a setting is spelled on the command line and in Python, for error lines."""
    return f"{_FLAGS.get(name, '--' + name.replace('_', '-'))} / {name}="


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
) -> Planner:
    """The planner of ``provider`` (default ``gemini``) with its settings; ``keep_screenshots``
    None means the provider's own default (3 for Gemini, 2 for openai-compatible)."""
    name = provider or DEFAULT_PROVIDER
    if name == DEFAULT_PROVIDER:
        for key, value in (("base_url", base_url), ("dialect", dialect)):
            if value:
                raise ConfigError(
                    f"{_option(key)} is for the openai-compatible provider; add "
                    f"--provider openai-compatible (provider=) or leave it out"
                )
        from vnc_use.providers.gemini.planner import DEFAULT_MODEL, GeminiComputerUse

        gemini: dict[str, Any] = {}
        if keep_screenshots is not None:
            gemini["keep_screenshots"] = keep_screenshots
        return GeminiComputerUse(
            excluded_actions=list(excluded_actions) if excluded_actions else None,
            model=model or DEFAULT_MODEL,
            environment=environment,
            family=model_family,
            keep_browser_actions=keep_browser_actions,
            api_version=api_version,
            **gemini,
        )
    if name == OPENAI_COMPATIBLE:
        return _openai_compatible(
            model=model,
            base_url=base_url,
            dialect=dialect,
            keep_screenshots=keep_screenshots,
            gemini_only={
                "excluded_actions": excluded_actions,
                "environment": environment,
                "model_family": model_family,
                "keep_browser_actions": keep_browser_actions,
                "api_version": api_version,
            },
        )
    raise ConfigError(
        f"unknown provider {name!r} ({_option('provider')}); use one of: {', '.join(PROVIDERS)}"
    )


def _openai_compatible(
    *,
    model: str | None,
    base_url: str | None,
    dialect: str | None,
    keep_screenshots: int | None,
    gemini_only: Mapping[str, Any],
) -> Planner:
    for key, value in gemini_only.items():
        if value:
            raise ConfigError(
                f"{_option(key)} is for the gemini provider only; leave it out with "
                f"--provider {OPENAI_COMPATIBLE}"
                + (
                    " (use --confirm NAME / confirm_actions= to stop actions for approval)"
                    if key == "excluded_actions"
                    else ""
                )
            )
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


def planner_from_settings(settings: Mapping[str, Any]) -> Planner:
    """The planner a run used, rebuilt from its ``run.json`` settings (for ``approve``,
    ``deny`` and ``resume``); a run without ``provider`` is a Gemini run, a replay's
    (``provider: replay``) is rebuilt by :mod:`vnc_use.replay`."""
    if settings.get("provider") == "replay":
        from vnc_use.replay.planner import replay_planner_from_settings

        return replay_planner_from_settings(settings)
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
    )
