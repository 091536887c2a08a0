"""What both model stand-ins share: a script of replies, served in order from a local server.

:class:`ScriptedServer` keeps the script (a list of items, or one callable that answers each
request), counts what was served, and runs an HTTP server on 127.0.0.1 in a daemon thread.
:class:`~vnc_use.testing.gemini_standin.GeminiStandIn` and
:class:`~vnc_use.testing.openai_standin.OpenAIStandIn` add their API's rules and replies.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, TypeVar

from typing_extensions import Self

from vnc_use.desktops.service import Service

__all__ = ["ScriptedServer"]

logger = logging.getLogger(__name__)

ItemT = TypeVar("ItemT")


class ScriptedServer(Service, Generic[ItemT]):
    """A local HTTP server that answers from a script (the stand-ins' common part).

    A subclass names its request handler (:attr:`handler`) and its thread (:attr:`name`); the
    handler reaches the subclass as ``self.server.standin``. As a
    :class:`~vnc_use.desktops.service.Service`, ``with`` starts and stops it.
    """

    handler: type[BaseHTTPRequestHandler]
    server_class: type[ThreadingHTTPServer] = ThreadingHTTPServer
    name = "scripted-server"

    def __init__(self, script: Any = None, *, port: int = 0, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = port
        self.exhausted_count = 0
        """Requests that arrived after a list script ran out."""
        self._lock = threading.Lock()
        self._items: list[ItemT] = []
        self._fn: Callable[[dict[str, Any], int], Any] | None = None
        self._served = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.script(script)

    # ---------------------------------------------------------------- script

    def script(self, *items: Any) -> Self:
        """Replace the script: replies as arguments, one list of them, or one callable
        ``(request body, index) -> reply``."""
        if len(items) == 1 and (callable(items[0]) or isinstance(items[0], (list, tuple))):
            arg = items[0]
        elif len(items) == 1 and items[0] is None:
            arg = []
        else:
            arg = list(items)
        with self._lock:
            self._served = 0
            if callable(arg) and not isinstance(arg, (list, tuple)) and self._is_script_fn(arg):
                self._fn, self._items = arg, []
            else:
                self._fn, self._items = None, list(arg)
        return self

    def _is_script_fn(self, value: Any) -> bool:
        """True when a callable given to :meth:`script` is a script function (not a reply)."""
        return True

    def extend(self, *items: ItemT) -> Self:
        """Append replies to a list script."""
        with self._lock:
            if self._fn is not None:
                raise ValueError("extend() needs a list script, not a callable one")
            self._items.extend(items)
        return self

    @property
    def exhausted(self) -> bool:
        """True once a request arrived after the list script ran out."""
        return self.exhausted_count > 0

    @property
    def remaining(self) -> int:
        """Script items not served yet (0 for a callable script)."""
        return max(0, len(self._items) - self._served) if self._fn is None else 0

    def _next_item(self, body: dict[str, Any], request_index: int) -> tuple[int, Any] | None:
        """The next script item and its index, or None when a list script ran out (counted).

        Called with the lock held by the subclass's request handling.
        """
        index = self._served
        if self._fn is not None:
            item: Any = self._fn(body, index)
        elif index < len(self._items):
            item = self._items[index]
        else:
            self.exhausted_count += 1
            logger.warning("%s: script exhausted at request %d", self.name, request_index)
            return None
        self._served += 1
        return index, item

    # ---------------------------------------------------------------- lifecycle

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:<port>`` (only valid once started)."""
        if self._server is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return f"http://{self.host}:{self._server.server_address[1]}"

    def start(self) -> Self:
        """Start serving in a daemon thread (idempotent)."""
        if self._server is None:
            server = self.server_class((self.host, self.port), self.handler)
            server.daemon_threads = True
            server.standin = self  # type: ignore[attr-defined]  # how the handler reaches us
            self._server = server
            self._thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.05},  # how quickly stop() returns
                name=self.name,
                daemon=True,
            )
            self._thread.start()
            logger.debug("%s serving at %s", self.name, self.root_url)
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            if self._thread is not None:
                self._thread.join()
            self._server = None
            self._thread = None
