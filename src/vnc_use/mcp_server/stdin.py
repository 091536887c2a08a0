"""stdin's lines for the MCP stdio transport, read by the event loop, not by a worker thread.

The SDK's own stdio reader waits in ``readline`` on a worker thread, and nothing ends that wait
but a line or the end of stdin. A server told to stop (SIGTERM from its host, Ctrl-C) while
its client keeps stdin open could then only be stopped by raising ``KeyboardInterrupt`` at
whatever the event loop was doing, and that lands in the middle of the SDK's and anyio's
bookkeeping: of 12 SIGTERMs sent while requests were flowing, 7 ended with a traceback,
asyncio errors on the way out, or a process that never exited (a worker thread left waiting
for work that was never queued). Here the event loop waits until stdin is readable, so a
cancellation ends the wait at once and the server stops like a closed stdin.

:func:`claimed_stdin` also points fd 0 at the null device while it serves, as the SDK does:
a child process or a library reading stdin gets end-of-file, never the client's messages.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import AsyncIterator, Iterator

import anyio
import anyio.to_thread

__all__ = ["StdinLines", "claimed_stdin"]

_CHUNK = 1 << 16


class StdinLines:
    """The lines of a file descriptor, ``\\n`` kept, decoded as UTF-8 (bad bytes replaced),
    for ``async for``; a last line without ``\\n`` is given too."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._pollable = True

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        pending = b""
        while chunk := await self._read():
            pending += chunk
            *lines, pending = pending.split(b"\n")  # split first: a character may span chunks
            for line in lines:
                yield line.decode("utf-8", "replace") + "\n"
        if pending:
            yield pending.decode("utf-8", "replace")

    async def _read(self) -> bytes:
        """What the descriptor holds now, once it holds something; ``b""`` at its end."""
        if self._pollable:
            try:
                await anyio.wait_readable(self.fd)
            except OSError:  # a regular file (``< requests.jsonl``): never blocks, cannot be polled
                self._pollable = False
            else:
                try:
                    return os.read(self.fd, _CHUNK)
                except BlockingIOError:  # someone else read it first: wait again
                    return await self._read()
        return await anyio.to_thread.run_sync(os.read, self.fd, _CHUNK)


@contextlib.contextmanager
def claimed_stdin() -> Iterator[StdinLines | None]:
    """stdin for the transport alone while serving: the lines of a private duplicate of fd 0,
    with fd 0 pointing at the null device meanwhile (restored after). ``None`` when the
    process has no stdin to claim (the SDK's own reader then serves what there is)."""
    try:
        private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:
        yield None
        return
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(null, 0)
        finally:
            os.close(null)
        try:
            yield StdinLines(private)
        finally:
            os.dup2(private, 0)
    finally:
        os.close(private)
