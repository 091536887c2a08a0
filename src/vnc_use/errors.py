"""Exceptions raised by vnc-use.

Every error a user can cause or meet carries a one-line message that names the problem and,
where there is one, the fix. The CLI prints ``str(error)``; it never shows a traceback for them.
"""

from __future__ import annotations


class VncUseError(Exception):
    """Base class of every error vnc-use raises on purpose."""


class ConfigError(VncUseError):
    """Bad user input or configuration (a missing key, a malformed address, ...)."""


class VncError(VncUseError):
    """Something went wrong talking to the VNC server."""


class VncConnectionError(VncError):
    """The VNC server could not be reached, or the connection was lost."""


class VncAuthError(VncError):
    """The VNC server rejected the password (or asked for one that was not given)."""


class VncTimeoutError(VncError):
    """The VNC server did not answer within the timeout."""


class PlannerError(VncUseError):
    """The model could not be asked, or its answer could not be used."""


class ApiError(PlannerError):
    """The model's API answered with an error status (after any retries); ``api`` names it
    in the message (the Gemini API unless told otherwise)."""

    def __init__(
        self, status_code: int, status: str | None, message: str, *, api: str = "Gemini API"
    ) -> None:
        self.status_code = status_code
        self.status = status
        self.message = message
        self.api = api
        label = f"{status_code} {status}" if status else str(status_code)
        super().__init__(f"{api} error {label}: {message}")


class StorageError(VncUseError):
    """The checkpoint database (SQLite or PostgreSQL) could not be opened or reached."""


class ServedRunError(RuntimeError):
    """A served run's failure (a :class:`VncUseError`: one line, no secret) as LangGraph Server
    shows it to clients: the server passes a ``RuntimeError``'s message on and hides other
    exceptions' messages ("An internal error occurred"). ``kind`` names the original error."""

    def __init__(self, error: VncUseError) -> None:
        super().__init__(str(error))
        self.kind = type(error).__name__
