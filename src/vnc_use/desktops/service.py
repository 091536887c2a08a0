"""A base for things that run between ``start()`` and ``stop()``: servers, proxies, desktops.

A subclass defines :meth:`Service.start` (returning itself) and :meth:`Service.stop`, and is
then a context manager: ``with TestDesktop() as desk: ...`` starts it and always stops it.
"""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar

__all__ = ["Service"]

_S = TypeVar("_S", bound="Service")


class Service:
    """Started by :meth:`start`, stopped by :meth:`stop`; ``with`` does both."""

    def start(self: _S) -> _S:
        """Start, and return ``self``."""
        raise NotImplementedError

    def stop(self) -> None:
        """Stop and release everything :meth:`start` took (safe to call twice)."""
        raise NotImplementedError

    def __enter__(self: _S) -> _S:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
