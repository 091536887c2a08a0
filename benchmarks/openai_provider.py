"""Benchmark the openai provider (GA computer tool, Responses API) next to Gemini.

Runs the full agent (:class:`vnc_use.VncUseAgent`, real SQLite checkpoints) against a real
1440x900 TigerVNC desktop with the busy probe app, alternating two model APIs: the Gemini
stand-in with :class:`~vnc_use.providers.gemini.planner.GeminiComputerUse` (real google-genai
SDK) and the Responses stand-in with :class:`~vnc_use.providers.openai.OpenAIPlanner` (real
``openai`` SDK, stateless replay: ``store: false``, encrypted reasoning replayed). Each
scripted model clicks random points of the canvas (one ``computer_call`` with one ``click`` a
step, pixels of the screenshot sent), then finishes; stand-ins answer at once. Both keep their
default of the last 3 screenshots. Printed:

1. **Request bytes per step**: the HTTP body at steps 5 and 20 (the last step when ``--steps``
   is smaller), and how much of it is screenshots.
2. **vnc-use's own overhead per step** (from the stand-in's answer to the next request:
   settle, screenshot, encode, checkpoint, building and sending the request), p50 and p95, and
   the openai provider's ratio to Gemini's p50.

Run: ``python benchmarks/openai_provider.py`` (about 30 s on 2 cores); ``--steps`` and
``--blocks`` change the sizes. :func:`measure_openai` is the piece a multi-provider benchmark
plugs in: one run, the timings of its requests.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from step_overhead import DUMMY_KEY, FAST, HEIGHT, WIDTH, TimedStandIn, clicker, pct, start_probe
from vnc_use import VncUseAgent
from vnc_use.providers.base import Planner
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.providers.openai import OpenAIPlanner
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.openai_responses_standin import OpenAIResponsesStandIn, Turn

KEEP_SCREENSHOTS = 3
OPENAI_KEY = "sk-benchmark-not-a-real-key"

Timing = tuple[float, float, int, int]
"""``(received, answered, body bytes, screenshot bytes)`` of one request."""


class TimedResponsesStandIn(OpenAIResponsesStandIn):
    """The Responses stand-in, also noting when each request arrived and was answered, its body
    size and how much of it is screenshot data URLs (image bytes dropped once answered)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.times: list[Timing] = []

    def _handle(
        self, raw_path: str, headers: Mapping[str, str], raw: bytes
    ) -> tuple[int, dict[str, Any], Mapping[str, str]]:
        received = time.monotonic()
        status, answer, extra = super()._handle(raw_path, headers, raw)
        rec = self.requests[-1]
        images = 0
        for item in rec.items():
            if item.get("type") == "computer_call_output":
                images += len(item["output"].get("image_url", ""))
                item["output"]["image_url"] = ""
            for part in item.get("content") or [] if isinstance(item.get("content"), list) else []:
                if part.get("type") == "input_image":
                    images += len(part.get("image_url", ""))
                    part["image_url"] = ""
        self.times.append((received, time.monotonic(), len(raw), images))
        return status, answer, extra


def openai_clicker(n_steps: int, seed: int) -> Callable[[Any, int], Turn]:
    """A GA computer-use model that clicks the canvas ``n_steps`` times, then finishes."""
    rng = random.Random(seed)

    def script(body: Any, index: int) -> Turn:
        if index >= n_steps:
            return Turn.message("All done: every requested point was clicked.")
        x, y = rng.randrange(60, 600), rng.randrange(200, 780)
        text = (
            f"Step {index + 1}: the canvas is visible and nothing is in the way. I will click "
            f"the point at ({x}, {y}) as asked, then look at the screen again."
        )
        return Turn.call({"type": "click", "button": "left", "x": x, "y": y}, text=text)

    return script


def run_once(desk: TestDesktop, runs: Path, thread: str, steps: int, planner: Planner) -> None:
    """One run of ``steps`` clicks with a fresh agent."""
    with VncUseAgent(
        vnc_server=desk.server,
        vnc_password=desk.password,
        runs_dir=runs,
        step_limit=steps + 1,
        planner=planner,
        keep_screenshots=KEEP_SCREENSHOTS,
        stall_after=0,  # random clicks on a static canvas: a stall by design, not measured
    ) as agent:
        result = agent.run(task="Click the points I ask for, one by one", thread_id=thread)
    if result.status != "done":
        raise RuntimeError(f"run {thread} ended {result.status}: {result.error}")


def measure_openai(desk: TestDesktop, runs: Path, steps: int, seed: int) -> list[Timing]:
    """One openai run of ``steps`` clicks; the timings of its requests."""
    with TimedResponsesStandIn(openai_clicker(steps, seed)) as server:
        planner = OpenAIPlanner(
            "gpt-5.5", api_key=OPENAI_KEY, base_url=server.base_url, max_retries=0
        )
        run_once(desk, runs, f"openai-{seed}", steps, planner)
        if server.violations:
            raise RuntimeError(f"the stand-in refused requests: {server.violations}")
        return server.times


def measure_gemini(desk: TestDesktop, runs: Path, steps: int, seed: int) -> list[Timing]:
    """One Gemini run of ``steps`` clicks; the timings of its requests."""
    with TimedStandIn(clicker(steps, seed)) as api:
        run_once(desk, runs, f"gemini-{seed}", steps, GeminiComputerUse(**FAST))
        return [(r, a, size, 0) for r, a, size in api.times]


def overheads(times: list[Timing], steps: int) -> list[float]:
    """Milliseconds from each answer (but the finish) to the next request."""
    return [(times[i + 1][0] - times[i][1]) * 1000 for i in range(min(steps, len(times) - 1))]


def main() -> int:
    """Run both providers and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="clicks per run (>= 5)")
    parser.add_argument("--blocks", type=int, default=2, help="runs per provider, alternating")
    args = parser.parse_args()
    if args.steps < 5 or args.blocks < 1:
        parser.error("--steps must be >= 5 and --blocks >= 1")
    os.environ["GOOGLE_API_KEY"] = DUMMY_KEY
    for name in ("GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "OPENAI_API_KEY"):
        os.environ.pop(name, None)
    started = time.monotonic()
    print(
        f"vnc-use openai provider benchmark: {WIDTH}x{HEIGHT} TigerVNC, busy probe, stand-ins "
        f"answering at once, keep_screenshots={KEEP_SCREENSHOTS}, {args.steps} clicks per run, "
        f"{args.blocks} run(s) per provider"
    )
    measures = {"gemini": measure_gemini, "openai": measure_openai}
    per: dict[str, list[float]] = {name: [] for name in measures}
    first: dict[str, list[Timing]] = {}
    with TestDesktop(WIDTH, HEIGHT) as desk, tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        start_probe(desk, tmp)
        for block in range(args.blocks):
            for n, (name, measure) in enumerate(measures.items()):
                times = measure(desk, tmp / "runs", args.steps, block * 10 + n)
                first.setdefault(name, times)
                per[name] += overheads(times, args.steps)
    late = min(20, args.steps)
    print("1. Request body bytes per step (MB; screenshots are base64 data URLs in the body)")
    print(f"  {'':10}{'step 5':>10}{f'step {late}':>10}   screenshots at {late}")
    for name, times in first.items():
        images = f"{times[late][3] / 1e6:.3f}" if name == "openai" else "  -  "
        print(f"  {name:10}{times[5][2] / 1e6:10.3f}{times[late][2] / 1e6:10.3f}   {images}")
    gemini_p50 = statistics.median(per["gemini"])
    print(f"2. Step overhead: model answer -> next request, {len(per['gemini'])} steps each (ms)")
    for name, values in per.items():
        p50, p95 = statistics.median(values), pct(values, 0.95)
        ratio = "" if name == "gemini" else f"   {p50 / gemini_p50:5.2f}x Gemini's p50"
        print(f"  {name:10} p50 {p50:7.1f} ms   p95 {p95:7.1f} ms{ratio}")
    print(f"(benchmark took {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
