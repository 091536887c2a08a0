"""Benchmark ``replay``: a recorded run performed again without the model, against the original.

On a real 1440x900 TigerVNC desktop with the probe app, a run of ``--steps`` clicks (default
20) is recorded with the Gemini API stand-in (real google-genai SDK, real SQLite checkpoints),
once with the stand-in answering at once and once with it waiting ``--delay`` seconds (default
2, a real model's order of magnitude) before each answer. Each recorded run is then replayed
on the same desktop with the probe app restarted (so the first screen is the recorded one),
with the default divergence tolerance, at ``--speed fast`` and, for the delayed run, at
``--speed recorded`` as well. Every figure is one measured run (wall-clock time of
``VncUseAgent.run`` / ``VncUseAgent.replay``), nothing is computed from other figures.

Run: ``python benchmarks/replay.py`` (about a minute); ``--steps 5`` for a quick check.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from subprocess import Popen
from typing import Any

from vnc_use import VncUseAgent
from vnc_use.agent.state import RunResult
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.probe import ProbeLog

WIDTH, HEIGHT = 1440, 900
DUMMY_KEY = "AIzaStandInDummyKey-0123456789abcdef"
FAST = {"retry_initial_delay": 0.01, "retry_max_delay": 0.05}


@contextmanager
def probe_app(desk: TestDesktop, folder: Path) -> Iterator[ProbeLog]:
    """The probe app, started afresh (its first screen is always the same), then stopped."""
    out = folder / f"probe-{time.monotonic_ns()}.jsonl"
    process: Popen[bytes] = desk.launch(
        [sys.executable, "-m", "vnc_use.testing.probe", "--out", str(out)]
    )
    log = ProbeLog(out)
    try:
        log.wait_type("ready", timeout=30)
        yield log
    finally:
        process.terminate()
        process.wait(5)


def script(steps: int, delay: float) -> Callable[[Any, int], Reply]:
    """Click ``steps`` points of the canvas (a diagonal, away from the entry), then finish;
    each answer after ``delay`` seconds."""

    def reply(body: Any, index: int) -> Reply:
        if delay:
            time.sleep(delay)
        if index >= steps:
            return Reply.text("Clicked every point.")
        x = 300 + (index * 37) % 600
        y = 250 + (index * 53) % 600
        return Reply.calls(FunctionCallSpec("click_at", x=x, y=y))

    return reply


def agent(desk: TestDesktop, runs: Path) -> VncUseAgent:
    return VncUseAgent(
        vnc_server=desk.server,
        vnc_password=desk.password,
        runs_dir=runs,
        planner=GeminiComputerUse(**FAST),
        step_limit=1000,
        seconds_timeout=3600,
    )


def timed(fn: Callable[[], RunResult]) -> tuple[float, RunResult]:
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def record(desk: TestDesktop, runs: Path, tmp: Path, steps: int, delay: float) -> tuple[str, float]:
    """A recorded run of ``steps`` clicks; its thread id and wall time."""
    with GeminiStandIn(script(steps, delay)) as standin, probe_app(desk, tmp):
        os.environ["GOOGLE_GEMINI_BASE_URL"] = standin.root_url
        with agent(desk, runs) as a:
            seconds, result = timed(lambda: a.run(task=f"Click {steps} points"))
    if result.status != "done" or result.steps != steps:
        raise SystemExit(f"the recorded run ended {result.status}: {result.error}")
    return result.thread_id, seconds


def replay(desk: TestDesktop, runs: Path, tmp: Path, thread_id: str, speed: str) -> float:
    """Replay ``thread_id`` on the restarted probe; its wall time."""
    os.environ.pop("GOOGLE_GEMINI_BASE_URL", None)  # no model is needed (nor reachable)
    with probe_app(desk, tmp) as log, agent(desk, runs) as a:
        seconds, result = timed(lambda: a.replay(thread_id, speed=speed))
        presses = len(log.events("press"))
    if result.status != "done":
        raise SystemExit(f"the replay ended {result.status}: {result.error}")
    if presses != result.steps:
        raise SystemExit(f"the probe got {presses} presses for {result.steps} replayed steps")
    return seconds


def line(label: str, seconds: float, steps: int, against: float | None = None) -> str:
    ratio = f"  (original / this = {against / seconds:.2f})" if against else ""
    return f"  {label:<42} {seconds:7.2f} s  {1000 * seconds / steps:7.0f} ms/step{ratio}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="actions in the recorded run")
    parser.add_argument(
        "--delay", type=float, default=2.0, help="seconds the stand-in waits per model call"
    )
    args = parser.parse_args()
    os.environ["GOOGLE_API_KEY"] = DUMMY_KEY
    print(
        f"vnc-use replay benchmark: {WIDTH}x{HEIGHT} TigerVNC, probe app, {args.steps}-step "
        "run (clicks), Gemini stand-in, one run per figure"
    )
    with tempfile.TemporaryDirectory() as name, TestDesktop(WIDTH, HEIGHT) as desk:
        tmp = Path(name)
        runs = tmp / "runs"
        for delay in (0.0, args.delay):
            thread, original = record(desk, runs, tmp, args.steps, delay)
            fast = replay(desk, runs, tmp, thread, "fast")
            calls = args.steps + 1
            print(f"stand-in answering {'at once' if not delay else f'after {delay:g} s'}:")
            print(line(f"original run ({calls} model calls)", original, args.steps))
            print(line("replay, --speed fast (no model)", fast, args.steps, original))
            if delay:
                recorded = replay(desk, runs, tmp, thread, "recorded")
                print(line("replay, --speed recorded", recorded, args.steps, original))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
