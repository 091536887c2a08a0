"""A TCP proxy on 127.0.0.1 that delays every byte by a fixed time each way: a slow link.

Tests and benchmarks put it between vnc-use and a VNC server to see what a link with a long
round trip does (issue 15: screenshots that missed what was drawn after the first update)::

    with DelayProxy(5901, delay_ms=200) as proxy:            # doctest: +SKIP
        VNCController().connect(proxy.server, password)

Each chunk read from one side is written to the other ``delay_ms`` after it was read, in
order; the delay adds latency, never lowers throughput. Both ends are on the loopback
interface only. Run ``python -m vnc_use.testing.delay_proxy PORT --delay MS`` to put one in
front of a server by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import logging
import sys
import threading

from vnc_use.desktops.service import Service

__all__ = ["DelayProxy"]

log = logging.getLogger(__name__)

_CHUNK = 65536


class DelayProxy(Service):
    """Forward ``127.0.0.1:port`` to ``127.0.0.1:target_port``, ``delay_ms`` later each way.

    :meth:`start` runs an asyncio loop in a daemon thread and returns once the proxy
    listens; :meth:`stop` closes the listener and every connection and ends the thread.
    """

    def __init__(self, target_port: int, delay_ms: float, *, port: int = 0) -> None:
        if delay_ms < 0:
            raise ValueError(f"delay must not be negative, got {delay_ms} ms")
        self.target_port = int(target_port)
        self.delay = float(delay_ms) / 1000.0
        self.port = int(port)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def server(self) -> str:
        """The proxy's VNC address, ``"127.0.0.1::PORT"``."""
        return f"127.0.0.1::{self.port}"

    def start(self) -> DelayProxy:
        """Listen and forward in a background thread; returns ``self`` once listening."""
        if self._thread is not None:
            return self
        ready = threading.Event()
        failure: list[BaseException] = []
        loop = asyncio.new_event_loop()
        self._loop = loop

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._accept, "127.0.0.1", self.port)
                )
                self.port = int(self._server.sockets[0].getsockname()[1])
            except BaseException as exc:  # reported to start()'s caller
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="delay-proxy", daemon=True)
        self._thread.start()
        ready.wait(timeout=10)
        if failure:
            self._thread.join(timeout=5)
            self._thread = None
            raise OSError(f"the delay proxy cannot listen on 127.0.0.1:{self.port}: {failure[0]}")
        log.info(
            "delay proxy 127.0.0.1:%d -> :%d, +%g ms",
            self.port,
            self.target_port,
            self.delay * 1000,
        )
        return self

    def stop(self) -> None:
        """Close the listener and every connection, stop the loop and its thread (idempotent)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            asyncio.run_coroutine_threadsafe(self._close(), loop).result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        self._loop = self._thread = None

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError as exc:
            log.info("delay proxy: cannot reach 127.0.0.1:%d: %s", self.target_port, exc)
            client_w.transport.abort()
            return
        self._writers |= {client_w, server_w}
        pipes = [
            asyncio.ensure_future(self._pipe(client_r, server_w)),
            asyncio.ensure_future(self._pipe(server_r, client_w)),
        ]
        self._tasks.update(pipes)
        try:
            await asyncio.gather(*pipes, return_exceptions=True)
        finally:
            self._tasks.difference_update(pipes)
            for writer in (client_w, server_w):
                self._writers.discard(writer)
                writer.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copy ``reader`` to ``writer``, each chunk ``delay`` after it was read, in order."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                due, data = await queue.get()
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:  # the other side closed: pass the close on, as late as the data
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()

        sender = asyncio.ensure_future(send())
        try:
            while True:
                try:
                    data = await reader.read(_CHUNK)
                except (ConnectionError, OSError):
                    data = b""
                queue.put_nowait((loop.time() + self.delay, data))
                if not data:
                    break
            await sender
        finally:
            sender.cancel()


def main(argv: list[str] | None = None) -> int:
    """Run a delay proxy in front of a local port until Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog="python -m vnc_use.testing.delay_proxy",
        description="Forward a new port on 127.0.0.1 to a local port, MS later each way.",
    )
    parser.add_argument("target_port", type=int, help="the local port to forward to")
    parser.add_argument("--delay", type=float, default=100.0, metavar="MS", help="each way")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: free)")
    args = parser.parse_args(argv)
    try:
        proxy = DelayProxy(args.target_port, args.delay, port=args.port).start()
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"forwarding {proxy.server} -> 127.0.0.1::{args.target_port}, +{args.delay:g} ms each way"
    )
    print("Press Ctrl-C to stop.", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        proxy.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
