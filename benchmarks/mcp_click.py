"""Benchmark the MCP ``click`` round trip against the agent's own step overhead, in one run.

On a real 1440x900 TigerVNC desktop with the busy probe app (as ``step_overhead.py``):

1. **The agent's step overhead**: the full agent (:class:`vnc_use.VncUseAgent`, SQLite
   checkpoints, the google-genai SDK) clicking the canvas, with the Gemini stand-in answering
   at once; from the stand-in's answer to the next request it receives (act, settle,
   screenshot, checkpoint, next request), p50/p95.
2. **The MCP click round trip**: ``vnc-use mcp`` started as a subprocess and driven by the MCP
   SDK's own client, over stdio and over streamable HTTP (bearer token): from the ``click``
   call to its result with the settled screenshot in hand (journal, click, settle, PNG,
   base64, transport), p50/p95, and its ratio to (1).

Run: ``python benchmarks/mcp_click.py`` (about a minute); ``--clicks`` and ``--steps`` change
the sizes.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from step_overhead import (
    DUMMY_KEY,
    HEIGHT,
    WIDTH,
    TimedStandIn,
    clicker,
    overheads,
    row,
    run_agent,
    start_probe,
)
from vnc_use.agent import AgentSettings
from vnc_use.testing.desktop import TestDesktop

CLI = [sys.executable, "-m", "vnc_use.cli"]
TOKEN = "mcp-click-benchmark-token-0123456789"


def agent_overhead(desk: TestDesktop, tmp: Path, steps: int) -> list[float]:
    """Milliseconds from each model answer to the next request, over ``steps`` clicks."""
    with TimedStandIn(clicker(steps, seed=7)) as api:
        run_agent(desk, tmp / "runs-agent", "agent", steps, AgentSettings())
        return overheads(api.times)[:steps]


async def timed_clicks(client: Client, clicks: int, seed: int) -> list[float]:
    """Milliseconds from each ``click`` call to its screenshot."""
    rng = random.Random(seed)
    await client.call_tool("screenshot", {})
    times = []
    for _ in range(clicks):
        x, y = rng.randrange(60, 600), rng.randrange(200, 780)
        t0 = time.perf_counter()
        result = await client.call_tool("click", {"x": x, "y": y})
        times.append((time.perf_counter() - t0) * 1000)
        if result.is_error or not any(b.type == "image" for b in result.content):
            raise RuntimeError(f"click failed: {result.content}")
    return times


def over_stdio(desk: TestDesktop, runs: Path, clicks: int) -> list[float]:
    params = StdioServerParameters(
        command=CLI[0],
        args=[*CLI[1:], "mcp", "--vnc", desk.server, "--runs-dir", str(runs)],
        env={**os.environ, "VNC_PASSWORD": desk.password},
    )
    return _drive(lambda: Client(params), clicks, seed=1)


def over_http(desk: TestDesktop, runs: Path, clicks: int) -> list[float]:
    env = {**os.environ, "VNC_PASSWORD": desk.password, "VNC_USE_MCP_TOKEN": TOKEN}
    args = ["mcp", "--vnc", desk.server, "--transport", "http", "--port", "0"]
    proc = subprocess.Popen(
        [*CLI, *args, "--runs-dir", str(runs)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = ""
        for line in proc.stdout:
            if " at http://" in line:
                url = line.split(" at ", 1)[1].split()[0]
                break
        if not url:
            raise RuntimeError("vnc-use mcp --transport http did not say where it listens")
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})
        return _drive(lambda: Client(streamable_http_client(url, http_client=http)), clicks, 2)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _drive(make: Callable[[], Client], clicks: int, seed: int) -> list[float]:
    found: list[float] = []

    async def main() -> None:
        async with make() as client:
            found.extend(await timed_clicks(client, clicks, seed))

    anyio.run(main)
    return found


def _section(name: str, values: list[float], base: list[float]) -> None:
    ratio = statistics.median(values) / statistics.median(base)
    print(row(name, values))
    print(f"    ratio to the agent's step overhead at p50: {ratio:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--clicks", type=int, default=40, help="MCP clicks per transport")
    parser.add_argument("--steps", type=int, default=40, help="agent steps")
    args = parser.parse_args()
    os.environ["GOOGLE_API_KEY"] = DUMMY_KEY
    with tempfile.TemporaryDirectory(prefix="vnc-use-mcp-bench-") as tmp_name:
        tmp = Path(tmp_name)
        with TestDesktop(WIDTH, HEIGHT) as desk:
            start_probe(desk, tmp)
            agent = agent_overhead(desk, tmp, args.steps)
            stdio = over_stdio(desk, tmp / "runs-stdio", args.clicks)
            http = over_http(desk, tmp / "runs-http", args.clicks)
    print(f"MCP click round trip vs the agent's step overhead ({WIDTH}x{HEIGHT}, busy probe)")
    print(row(f"agent step overhead ({len(agent)} steps)", agent))
    _section(f"MCP click over stdio ({len(stdio)} clicks)", stdio, agent)
    _section(f"MCP click over HTTP ({len(http)} clicks)", http, agent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
