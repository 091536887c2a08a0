"""vnc-use: let Google's Gemini Computer Use model operate any VNC desktop.

>>> from vnc_use import VncUseAgent          # doctest: +SKIP
>>> VncUseAgent(vnc_server="localhost::5901").run(task="Open the terminal")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vnc_use.errors import (
    ApiError,
    ConfigError,
    PlannerError,
    VncAuthError,
    VncConnectionError,
    VncError,
    VncTimeoutError,
    VncUseError,
)
from vnc_use.version import __version__

if TYPE_CHECKING:
    from vnc_use.agent.state import RunResult
    from vnc_use.runs.agent import VncUseAgent

__all__ = [
    "ApiError",
    "ConfigError",
    "PlannerError",
    "RunResult",
    "VncAuthError",
    "VncConnectionError",
    "VncError",
    "VncTimeoutError",
    "VncUseAgent",
    "VncUseError",
    "__version__",
]


def __getattr__(name: str) -> Any:
    # The agent pulls in LangGraph, google-genai and Twisted: import it only when asked for,
    # so that `vnc-use --help` and the light modules stay fast.
    if name == "VncUseAgent":
        from vnc_use.runs.agent import VncUseAgent

        return VncUseAgent
    if name == "RunResult":
        from vnc_use.agent.state import RunResult

        return RunResult
    raise AttributeError(f"module 'vnc_use' has no attribute {name!r}")
