"""Benchmark runs served by LangGraph Server (``langgraph dev`` from ``langgraph.json``).

Real parts: ``--desktops`` TigerVNC desktops with the probe app, the Gemini stand-in answering
at once (inside the server, through the real google-genai SDK), the server driven with
``langgraph-sdk``. Prints:

1. **Runs served concurrently**: ``--threads`` threads on the server, of which ``--desktops``
   act at the same time (one per desktop, ``--steps`` clicks each) while the others wait for an
   approval (holding no job); the most runs the server showed busy at once, the acting phase's
   wall time, and how many runs acted at once on average (the runs' spans, first to last model
   request, summed, over the span of them all).
2. **Server overhead per step**: the time from one model request to the next (the model
   answers at once, so this is vnc-use's step: screenshot, settle, act, checkpoint) for one run
   served by the server against the in-process agent (``VncUseAgent``) on the same desktop, in
   alternating blocks of the same benchmark run; p50 and the difference.
3. **Approve to action**: from ``runs.create(..., command={"resume": [{"type": "accept"}]})``
   (as Agent Inbox sends it) to the click in the probe's event log, for each waiting run.

Run: ``python benchmarks/server.py`` (defaults: 20 threads, 8 desktops, 5 steps; about 2
minutes on 2 cores); smaller: ``--threads 4 --desktops 2 --steps 3``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph_sdk import get_sync_client

from vnc_use import VncUseAgent
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.langgraph_dev import LangGraphDev
from vnc_use.testing.probe import ProbeLog

DUMMY_KEY = "AIzaStandInDummyKey-0123456789abcdef"
WIDTH, HEIGHT = 800, 600
GRAPH = "vnc_use"
_TASK = re.compile(r"bench (\S+) steps (\d+)( confirm)?")


class Model:
    """The scripted model: ``bench ID steps N [confirm]`` clicks N times (asking first when
    ``confirm``), then is done; notes when each request of each run arrived."""

    def __init__(self) -> None:
        self.arrivals: dict[str, list[float]] = defaultdict(list)
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any], index: int) -> Reply:
        now = time.monotonic()
        contents = request.get("contents") or []
        found = _TASK.search(json.dumps(contents[:1]))
        assert found is not None
        run_id, steps, confirm = found.group(1), int(found.group(2)), found.group(3)
        with self._lock:
            self.arrivals[run_id].append(now)
        done = sum(1 for c in contents if c.get("role") == "model")
        if done >= steps:
            return Reply.text("done")
        x = 300 + 40 * (done % 10)
        args: dict[str, Any] = {"x": x, "y": 500}
        if confirm:
            args["safety_decision"] = {"decision": "require_confirmation", "explanation": "go?"}
        return Reply.calls(FunctionCallSpec("click_at", **args))

    def step_gaps(self, run_id: str) -> list[float]:
        """Seconds between consecutive model requests of one run (one per agent step)."""
        times = self.arrivals[run_id]
        return [b - a for a, b in itertools.pairwise(times)]


@dataclass
class Desk:
    desktop: TestDesktop
    log: ProbeLog
    variable: str


def start_desks(stack: ExitStack, count: int, tmp: Path) -> list[Desk]:
    desks = []
    for i in range(count):
        desk = stack.enter_context(TestDesktop(WIDTH, HEIGHT))
        path = tmp / f"probe-{i}.jsonl"
        desk.launch([sys.executable, "-m", "vnc_use.testing.probe", "--out", str(path)])
        log = ProbeLog(path)
        log.wait_type("ready", timeout=30)
        desks.append(Desk(desk, log, f"VNC_PASSWORD_{i}"))
    return desks


def spec(desk: Desk, runs: Path) -> dict[str, Any]:
    return {
        "vnc_server": desk.desktop.server,
        "vnc_password_env": desk.variable,
        "runs_dir": str(runs),
        "step_limit": 1000,
    }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def waiting_runs(client: Any, desks: list[Desk], count: int, runs: Path) -> list[tuple[str, Desk]]:
    """``count`` runs that pause at an approval (spread over the desktops), paused."""
    made = []
    for i in range(count):
        desk = desks[i % len(desks)]
        tid = client.threads.create()["thread_id"]
        client.runs.create(
            tid,
            GRAPH,
            input={"task": f"bench wait{i} steps 1 confirm"},
            context=spec(desk, runs),
        )
        made.append((tid, desk))
    for tid, _ in made:
        wait_status(client, tid, "interrupted")
    return made


def wait_status(client: Any, tid: str, status: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while client.threads.get(tid)["status"] != status:
        if time.monotonic() > deadline:
            raise TimeoutError(f"thread {tid} never became {status}")
        time.sleep(0.05)


def watch_busy(client: Any, stop: threading.Event, seen: list[int]) -> None:
    while not stop.is_set():
        seen.append(len(client.threads.search(status="busy", limit=100)))
        stop.wait(0.1)


def acting_phase(
    client: Any, model: Model, desks: list[Desk], steps: int, runs: Path
) -> tuple[float, float, int]:
    """One acting run per desktop at once: wall time, the mean number of runs acting at once
    (their summed spans over the span of all, first to last model request), most busy."""
    stop, seen = threading.Event(), [0]
    watcher = threading.Thread(target=watch_busy, args=(client, stop, seen), daemon=True)
    watcher.start()
    t0 = time.monotonic()
    started = []
    for i, desk in enumerate(desks):
        tid = client.threads.create()["thread_id"]
        run = client.runs.create(
            tid, GRAPH, input={"task": f"bench act{i} steps {steps}"}, context=spec(desk, runs)
        )
        started.append((tid, run["run_id"], f"act{i}"))
    for tid, run_id, _ in started:
        client.runs.join(tid, run_id)
        assert client.threads.get_state(tid)["values"]["status"] == "done"
    wall = time.monotonic() - t0
    stop.set()
    watcher.join()
    spans = [(model.arrivals[name][0], model.arrivals[name][-1]) for _, _, name in started]
    union = max(b for _, b in spans) - min(a for a, _ in spans)
    return wall, sum(b - a for a, b in spans) / union, max(seen)


def overhead(
    client: Any, model: Model, desk: Desk, steps: int, blocks: int, runs: Path
) -> tuple[list[float], list[float]]:
    """Step gaps of served runs and in-process runs on one desktop, alternating blocks."""
    served: list[float] = []
    local: list[float] = []
    for b in range(blocks):
        tid = client.threads.create()["thread_id"]
        client.runs.wait(
            tid, GRAPH, input={"task": f"bench srv{b} steps {steps}"}, context=spec(desk, runs)
        )
        served += model.step_gaps(f"srv{b}")
        with VncUseAgent(
            vnc_server=desk.desktop.server,
            vnc_password=desk.desktop.password,
            runs_dir=runs / "local",
            step_limit=1000,
        ) as agent:
            result = agent.run(f"bench loc{b} steps {steps}")
            assert result.status == "done", result.error
        local += model.step_gaps(f"loc{b}")
    return served, local


def approve_to_action(client: Any, waiting: list[tuple[str, Desk]]) -> list[float]:
    """Seconds from an inbox-style accept to the click in the probe's log, per waiting run."""
    out = []
    for tid, desk in waiting:
        desk.log.clear()
        t0 = time.time()
        client.runs.create(tid, GRAPH, command={"resume": [{"type": "accept", "args": None}]})
        press = desk.log.wait_type("press", timeout=60)
        out.append(press["t"] - t0)
        wait_status(client, tid, "idle")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=20, help="threads on the server")
    parser.add_argument("--desktops", type=int, default=8, help="desktops = runs acting at once")
    parser.add_argument("--steps", type=int, default=5, help="clicks per acting run")
    parser.add_argument("--blocks", type=int, default=3, help="alternating blocks for 2.")
    args = parser.parse_args(argv)
    if args.threads < args.desktops:
        parser.error("--threads must be at least --desktops")
    os.environ["GOOGLE_API_KEY"] = DUMMY_KEY  # the in-process agent's (a dummy: the stand-in)
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        runs = tmp / "runs"
        model = Model()
        standin = stack.enter_context(GeminiStandIn(model))
        desks = start_desks(stack, args.desktops, tmp)
        env = {
            "GOOGLE_API_KEY": DUMMY_KEY,
            "GOOGLE_GEMINI_BASE_URL": standin.base_url,
            **{d.variable: d.desktop.password for d in desks},
        }
        t0 = time.monotonic()
        server = stack.enter_context(LangGraphDev(env, jobs=max(args.desktops, 2)))
        print(f"langgraph dev up in {time.monotonic() - t0:.1f} s ({server.url})")
        client = get_sync_client(url=server.url, api_key=None)

        waiting = waiting_runs(client, desks, args.threads - args.desktops, runs)
        wall, together, busy = acting_phase(client, model, desks, args.steps, runs)
        total = len(client.threads.search(limit=1000))
        print(
            f"1. served: {total} threads, {len(waiting)} waiting for approval (no job) while "
            f"{len(desks)} acted on {len(desks)} desktops ({args.steps} steps each); at most "
            f"{busy} busy at once (server's view); acting phase {wall:.1f} s, on average "
            f"{together:.1f} runs acting at once"
        )
        served, local = overhead(client, model, desks[0], args.steps, args.blocks, runs)
        s50, l50 = statistics.median(served), statistics.median(local)
        print(
            f"2. per step p50 / p95: served {s50 * 1000:.0f} / {pct(served, 0.95) * 1000:.0f} "
            f"ms, in-process {l50 * 1000:.0f} / {pct(local, 0.95) * 1000:.0f} ms; server "
            f"overhead {(s50 - l50) * 1000:+.0f} ms per step (n={len(served)}, {len(local)})"
        )
        latencies = approve_to_action(client, waiting)
        print(
            f"3. accept -> click: p50 {statistics.median(latencies) * 1000:.0f} ms, max "
            f"{max(latencies) * 1000:.0f} ms (n={len(latencies)}; langgraph dev's queue "
            "polls every 0.5 s)"
            if latencies
            else "3. accept -> click: no waiting runs (--threads = --desktops)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
