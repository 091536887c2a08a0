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
``OPENAI_API_KEY``           the OpenAI API key (``--provider openai``: required), also the
                             key of an OpenAI-compatible server (optional: local servers
                             need none, and a placeholder is sent when it is unset)
``OPENAI_BASE_URL``          another OpenAI Responses API endpoint (a proxy, the test
                             stand-in) for ``--provider openai``
``ANTHROPIC_API_KEY``        the Anthropic API key (``--provider anthropic``)
``ANTHROPIC_BASE_URL``       another Anthropic endpoint (a proxy, the test stand-in)
``GEMINI_API_VERSION``       the Gemini API version requests go to (default ``v1beta``)
``GOOGLE_GENAI_API_VERSION`` the same, the SDK's own name (``beta`` means ``v1beta``); read
                             when ``GEMINI_API_VERSION`` is not set
``VNC_PASSWORD``             the VNC password (``--vnc-password`` shows in the process list)
``VNC_USERNAME``             the user name of servers that ask for one (macOS, VeNCrypt Plain)
``VNC_VIEW_PASSWORD``        the view-only password ``vnc-use view`` may use
``RDP_USERNAME``             the user name of an RDP server (``--rdp-user`` wins)
``RDP_PASSWORD``             the RDP password (there is no flag: argv is visible to all)
``VNC_USE_RDP_DIR``          where RDP certificates trusted on first use and the kept-up
                             RDP bridge (``vnc-use desktop rdp``) are recorded
``VNC_USE_SECRET_<NAME>``    the value typed for ``{{NAME}}`` (``--sensitive NAME``)
``VNC_USE_DESKTOP_DIR``      where the local desktop keeps its state
``XDG_STATE_HOME``           the default parent of that folder (``~/.local/state``)
``VNC_USE_NOVNC_DIR``        where noVNC's web client is (``/usr/share/novnc``)
``VNC_USE_DATABASE_URL``     where checkpoints, the journal and leases live when
                             ``--checkpointer`` is not given: a ``postgresql://`` URL (its
                             password, like ``PGPASSWORD``, is a secret never written)
``VNC_USE_MCP_TOKEN``        the bearer token ``vnc-use mcp --transport http`` requires (else
                             it makes one and prints it once)
``VNC_USE_CONSOLE_TOKEN``    the login token of ``vnc-use console`` (else a random one per
                             start, in the URL it prints)
===========================  ================================================================
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = [
    "API_VERSION_VARIABLE",
    "CONSOLE_TOKEN_VARIABLE",
    "DATABASE_URL_VARIABLE",
    "DESKTOP_DIR_VARIABLE",
    "MCP_TOKEN_VARIABLE",
    "NOVNC_DIR_VARIABLE",
    "SECRET_PREFIX",
    "anthropic_api_key",
    "anthropic_base_url",
    "child_environment",
    "console_token",
    "database_url",
    "desktop_state_dir",
    "environment_with",
    "gemini_api_key",
    "gemini_api_version",
    "gemini_base_url",
    "mcp_token",
    "named_secret",
    "novnc_dir",
    "openai_api_key",
    "openai_base_url",
    "person_name",
    "rdp_password",
    "rdp_state_dir",
    "rdp_username",
    "secret_values",
    "sensitive_value",
    "url_has_password",
    "vnc_password",
    "vnc_username",
    "vnc_view_password",
    "x_display",
]

API_VERSION_VARIABLE = "GEMINI_API_VERSION"
"""Chooses the Gemini API version (``v1beta``, ``v1``, ...) when no setting or flag does."""

DESKTOP_DIR_VARIABLE = "VNC_USE_DESKTOP_DIR"
"""Overrides where the local desktop (``vnc-use desktop``) keeps its state."""

NOVNC_DIR_VARIABLE = "VNC_USE_NOVNC_DIR"
"""Overrides where the live view finds noVNC."""

DATABASE_URL_VARIABLE = "VNC_USE_DATABASE_URL"
"""The checkpoint database (``postgresql://...``) when ``--checkpointer`` is not given."""
MCP_TOKEN_VARIABLE = "VNC_USE_MCP_TOKEN"
"""The bearer token the MCP server's HTTP transport requires (a secret: never recorded)."""

CONSOLE_TOKEN_VARIABLE = "VNC_USE_CONSOLE_TOKEN"
"""The web console's login token (a secret: never recorded)."""

SECRET_PREFIX = "VNC_USE_SECRET_"
"""``--sensitive NAME`` reads its value from ``VNC_USE_SECRET_<NAME>``."""

_SECRET_VARIABLES = (
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "VNC_PASSWORD",
    "VNC_VIEW_PASSWORD",
    "PGPASSWORD",  # libpq's own: the database password when the URL holds none
    "RDP_PASSWORD",
    MCP_TOKEN_VARIABLE,
    CONSOLE_TOKEN_VARIABLE,
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


def openai_base_url() -> str | None:
    """``OPENAI_BASE_URL``, stripped: where ``--provider openai`` sends its Responses API
    requests instead of ``https://api.openai.com/v1``; ``None`` when unset."""
    url = _get("OPENAI_BASE_URL")
    return url.strip() if url else None


def anthropic_api_key() -> str | None:
    """``ANTHROPIC_API_KEY``, stripped; ``None`` when unset."""
    key = _get("ANTHROPIC_API_KEY")
    return key.strip() if key else None


def anthropic_base_url() -> str | None:
    """``ANTHROPIC_BASE_URL``, the endpoint the Anthropic SDK uses instead of Anthropic's."""
    return _get("ANTHROPIC_BASE_URL")


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


def named_secret(variable: str) -> str | None:
    """The value of the environment variable a served run's spec names for its VNC password
    (``vnc_password_env``); ``None`` when unset."""
    return _get(variable)


def vnc_username() -> str | None:
    """``VNC_USERNAME``."""
    return _get("VNC_USERNAME")


def vnc_view_password() -> str | None:
    """``VNC_VIEW_PASSWORD``."""
    return _get("VNC_VIEW_PASSWORD")


def rdp_username() -> str | None:
    """``RDP_USERNAME``."""
    return _get("RDP_USERNAME")


def rdp_password() -> str | None:
    """``RDP_PASSWORD`` (never a flag: a command line is visible to every user)."""
    return os.environ.get("RDP_PASSWORD") or None


def rdp_state_dir() -> Path:
    """Where RDP certificates trusted on first use and the kept-up bridge live:
    ``$VNC_USE_RDP_DIR``, else ``$XDG_STATE_HOME/vnc-use/rdp``, else ``~/.local/state/...``."""
    override = _get("VNC_USE_RDP_DIR")
    if override:
        return Path(override).expanduser()
    base = _get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).expanduser() / "vnc-use" / "rdp"


def mcp_token() -> str | None:
    """``VNC_USE_MCP_TOKEN``, stripped: the bearer token of ``vnc-use mcp --transport http``."""
    token = _get(MCP_TOKEN_VARIABLE)
    return token.strip() if token else None


def console_token() -> str | None:
    """``VNC_USE_CONSOLE_TOKEN``, stripped: the login token of ``vnc-use console``."""
    token = _get(CONSOLE_TOKEN_VARIABLE)
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
    found.append(_url_password(database_url()))
    return [v for v in found if v]


def person_name() -> str:
    """Who a person at this terminal is, for a run's takeover record: ``VNC_USE_PERSON``,
    else the login name (``LOGNAME``, ``USER``), else ``a person``."""
    for name in ("VNC_USE_PERSON", "LOGNAME", "USER"):
        value = _get(name)
        if value:
            return value
    return "a person"


def database_url() -> str | None:
    """``VNC_USE_DATABASE_URL``, stripped: where checkpoints live when no ``--checkpointer``."""
    url = _get(DATABASE_URL_VARIABLE)
    return url.strip() if url else None


def url_has_password(url: str) -> bool:
    """Whether a ``scheme://user:password@host/...`` URL carries a password."""
    return _url_password(url) is not None


def _url_password(url: str | None) -> str | None:
    """The password of a ``scheme://user:password@host/...`` URL (``None`` without one)."""
    if not url or "://" not in url:
        return None
    try:
        password = urlsplit(url).password
    except ValueError:
        return None
    return unquote(password) if password else None


def desktop_state_dir() -> Path:
    """Where the local desktop keeps its state: ``$VNC_USE_DESKTOP_DIR``, else
    ``$XDG_STATE_HOME/vnc-use/desktop``, else ``~/.local/state/vnc-use/desktop``."""
    override = _get(DESKTOP_DIR_VARIABLE)
    if override:
        return Path(override).expanduser()
    base = _get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).expanduser() / "vnc-use" / "desktop"


def x_display() -> str | None:
    """The X display this process was started on (``DISPLAY``), if any."""
    return _get("DISPLAY")


def environment_with(**extra: str) -> dict[str, str]:
    """This process's environment with ``extra`` set: for a child that needs all of it
    (a window opened on another display)."""
    return {**os.environ, **extra}


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
