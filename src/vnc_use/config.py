"""The one reader of vnc-use's environment variables.

Every setting that can come from the environment is read here and handed on as a value: the
rest of the package never looks at ``os.environ`` (a test holds it to that). Each function reads
the environment when it is called, so a variable set after import is seen.

===========================  ================================================================
variable                     what it sets
===========================  ================================================================
``GOOGLE_API_KEY``           the Gemini API key (wins over ``GEMINI_API_KEY``, as in the SDK)
``GEMINI_API_KEY``           the Gemini API key, when ``GOOGLE_API_KEY`` is not set
``GOOGLE_GEMINI_BASE_URL``   another Gemini endpoint (a proxy, the test stand-in)
``OPENAI_API_KEY``           the key of an OpenAI-compatible server (optional: local servers
                             need none, and a placeholder is sent when it is unset)
``GEMINI_API_VERSION``       the Gemini API version requests go to (default ``v1beta``)
``GOOGLE_GENAI_API_VERSION`` the same, the SDK's own name (``beta`` means ``v1beta``); read
                             when ``GEMINI_API_VERSION`` is not set
``VNC_PASSWORD``             the VNC password (``--vnc-password`` shows in the process list)
``VNC_USERNAME``             the user name of servers that ask for one (macOS, VeNCrypt Plain)
``VNC_VIEW_PASSWORD``        the view-only password ``vnc-use view`` may use
``VNC_USE_SECRET_<NAME>``    the value typed for ``{{NAME}}`` (``--sensitive NAME``)
``VNC_USE_DESKTOP_DIR``      where the local desktop keeps its state
``XDG_STATE_HOME``           the default parent of that folder (``~/.local/state``)
``VNC_USE_NOVNC_DIR``        where noVNC's web client is (``/usr/share/novnc``)
``VNC_USE_MCP_TOKEN``        the bearer token ``vnc-use mcp --transport http`` requires (else
                             it makes one and prints it once)
===========================  ================================================================
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "API_VERSION_VARIABLE",
    "DESKTOP_DIR_VARIABLE",
    "MCP_TOKEN_VARIABLE",
    "NOVNC_DIR_VARIABLE",
    "SECRET_PREFIX",
    "child_environment",
    "desktop_state_dir",
    "gemini_api_key",
    "gemini_api_version",
    "gemini_base_url",
    "mcp_token",
    "novnc_dir",
    "openai_api_key",
    "secret_values",
    "sensitive_value",
    "vnc_password",
    "vnc_username",
    "vnc_view_password",
]

API_VERSION_VARIABLE = "GEMINI_API_VERSION"
"""Chooses the Gemini API version (``v1beta``, ``v1``, ...) when no setting or flag does."""

DESKTOP_DIR_VARIABLE = "VNC_USE_DESKTOP_DIR"
"""Overrides where the local desktop (``vnc-use desktop``) keeps its state."""

NOVNC_DIR_VARIABLE = "VNC_USE_NOVNC_DIR"
"""Overrides where the live view finds noVNC."""

MCP_TOKEN_VARIABLE = "VNC_USE_MCP_TOKEN"
"""The bearer token the MCP server's HTTP transport requires (a secret: never recorded)."""

SECRET_PREFIX = "VNC_USE_SECRET_"
"""``--sensitive NAME`` reads its value from ``VNC_USE_SECRET_<NAME>``."""

_SECRET_VARIABLES = (
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "OPENAI_API_KEY",
    "VNC_PASSWORD",
    "VNC_VIEW_PASSWORD",
    MCP_TOKEN_VARIABLE,
)


def _get(name: str) -> str | None:
    """The variable's value, ``None`` when unset or blank."""
    value = os.environ.get(name)
    return value if value and value.strip() else None


def gemini_api_key() -> str | None:
    """The Gemini API key: ``GOOGLE_API_KEY``, else ``GEMINI_API_KEY`` (the SDK's order),
    stripped; ``None`` when neither is set."""
    key = _get("GOOGLE_API_KEY") or _get("GEMINI_API_KEY")
    return key.strip() if key else None


def gemini_base_url() -> str | None:
    """``GOOGLE_GEMINI_BASE_URL``, the endpoint the Gemini SDK uses instead of Google's."""
    return _get("GOOGLE_GEMINI_BASE_URL")


def openai_api_key() -> str | None:
    """``OPENAI_API_KEY``, stripped: the key of an OpenAI-compatible server; ``None`` when
    unset (local servers need none)."""
    key = _get("OPENAI_API_KEY")
    return key.strip() if key else None


def gemini_api_version() -> str | None:
    """``GEMINI_API_VERSION``, else the SDK's ``GOOGLE_GENAI_API_VERSION`` (its ``beta`` read as
    ``v1beta``, as the SDK does), stripped; ``None`` when neither is set."""
    version = _get(API_VERSION_VARIABLE)
    if version:
        return version.strip()
    sdk = _get("GOOGLE_GENAI_API_VERSION")
    if not sdk:
        return None
    return "v1beta" if sdk.strip() == "beta" else sdk.strip()


def vnc_password() -> str | None:
    """``VNC_PASSWORD``."""
    return _get("VNC_PASSWORD")


def vnc_username() -> str | None:
    """``VNC_USERNAME``."""
    return _get("VNC_USERNAME")


def vnc_view_password() -> str | None:
    """``VNC_VIEW_PASSWORD``."""
    return _get("VNC_VIEW_PASSWORD")


def mcp_token() -> str | None:
    """``VNC_USE_MCP_TOKEN``, stripped: the bearer token of ``vnc-use mcp --transport http``."""
    token = _get(MCP_TOKEN_VARIABLE)
    return token.strip() if token else None


def sensitive_value(name: str) -> tuple[str, str | None]:
    """The variable that holds ``{{name}}``'s value, and that value (``None`` when unset)."""
    variable = f"{SECRET_PREFIX}{name.upper()}"
    return variable, _get(variable)


def secret_values() -> list[str]:
    """Every secret this environment holds (keys, passwords, ``VNC_USE_SECRET_*`` values):
    what logs, events and reports must never show."""
    found = [os.environ.get(name) for name in _SECRET_VARIABLES]
    found += [v for k, v in os.environ.items() if k.startswith(SECRET_PREFIX)]
    return [v for v in found if v]


def desktop_state_dir() -> Path:
    """Where the local desktop keeps its state: ``$VNC_USE_DESKTOP_DIR``, else
    ``$XDG_STATE_HOME/vnc-use/desktop``, else ``~/.local/state/vnc-use/desktop``."""
    override = _get(DESKTOP_DIR_VARIABLE)
    if override:
        return Path(override).expanduser()
    base = _get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).expanduser() / "vnc-use" / "desktop"


def novnc_dir() -> str | None:
    """``VNC_USE_NOVNC_DIR``: where noVNC's web client is, when not in the default place."""
    return _get(NOVNC_DIR_VARIABLE)


def child_environment(keep: Iterable[str], prefixes: tuple[str, ...] = ()) -> dict[str, str]:
    """The variables a child process inherits: those named in ``keep`` and those starting with
    one of ``prefixes`` (nothing else: no key or password reaches a desktop's programs)."""
    names = frozenset(keep)
    return {
        k: v for k, v in os.environ.items() if k in names or (prefixes and k.startswith(prefixes))
    }
