"""Benchmark each model provider with a stand-in: request bytes per step and vnc-use's own
overhead per step, on a 1440x900 desktop.

Runs the full agent (:class:`vnc_use.VncUseAgent`, real SQLite checkpoints, real SDKs) against a
real 1440x900 TigerVNC desktop with the busy probe app, once per provider in :data:`PROVIDERS`
(one entry each: a name, a stand-in and a planner). Each scripted model clicks random points
of the canvas in its own coordinates with a sentence of reasoning, then finishes; stand-ins
answer at once; each provider keeps its own default number of screenshots. Printed:

1. **Request bytes per step**: the HTTP body of the request at step 5 and at the last step;
2. **vnc-use's overhead per step** (from the stand-in's answer to the next request: settle,
   screenshot, resize and encode, checkpoint, building and sending the request), p50 and p95.

Run: ``python benchmarks/providers.py`` (one run per provider); ``--steps`` changes the size.
To add a provider, add one :class:`Provider` to :data:`PROVIDERS`.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openai_provider import TimedResponsesStandIn, openai_clicker
from step_overhead import DUMMY_KEY, FAST, HEIGHT, WIDTH, TimedStandIn, clicker, pct, start_probe
from vnc_use import VncUseAgent
from vnc_use.providers.anthropic.planner import AnthropicPlanner
from vnc_use.providers.base import Planner
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.providers.openai import OpenAIPlanner
from vnc_use.testing.anthropic_standin import Action, AnthropicStandIn, Reply
from vnc_use.testing.desktop import TestDesktop

Timing = tuple[float, float, int]
"""``(received, answered, body bytes)`` of one model request."""


class TimedAnthropicStandIn(AnthropicStandIn):
    """The Anthropic stand-in, also noting when each request arrived and was answered and its
    size (bodies dropped once answered)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.times: list[Timing] = []

    def _handle(
        self, raw_path: str, headers: Mapping[str, str], raw: bytes
    ) -> tuple[int, dict[str, Any], tuple[tuple[str, str], ...]]:
        received = time.monotonic()
        answer = super()._handle(raw_path, headers, raw)
        self.times.append((received, time.monotonic(), len(raw)))
        self.requests[-1].body = None
        return answer


def claude_clicker(n_steps: int, seed: int) -> Callable[[Any, int], Reply]:
    """Claude clicking the canvas ``n_steps`` times (pixels of the 1440x900 image sent)."""
    rng = random.Random(seed)

    def script(body: Any, index: int) -> Reply:
        if index >= n_steps:
            return Reply.done("All done: every requested point was clicked.")
        x, y = rng.randrange(60, 600), rng.randrange(200, 780)
        text = (
            f"Step {index + 1}: the canvas is visible and nothing is in the way. I will click "
            f"the point at ({x}, {y}) as asked, then look at the screen again to confirm that "
            "the click landed and a marker appeared where expected."
        )
        return Reply.act(Action("left_click", {"coordinate": [x, y]}), text=text)

    return script


@dataclass(frozen=True)
class Provider:
    """One provider to measure: a stand-in serving ``steps`` clicks and a planner using it."""

    name: str
    session: Callable[[int, int], Any]
    """``(steps, seed)`` -> a context manager giving ``(planner, times)``."""


@contextmanager
def gemini(steps: int, seed: int) -> Iterator[tuple[Planner, list[Timing]]]:
    with TimedStandIn(clicker(steps, seed)) as api:
        yield GeminiComputerUse(**FAST), api.times


@contextmanager
def anthropic(steps: int, seed: int) -> Iterator[tuple[Planner, list[Timing]]]:
    with TimedAnthropicStandIn(claude_clicker(steps, seed)) as api:
        planner = AnthropicPlanner(
            "claude-sonnet-5-5", api_key=DUMMY_KEY, base_url=api.base_url, max_retries=0
        )
        yield planner, api.times
        if api.violations:
            raise RuntimeError(f"the stand-in refused requests: {api.violations}")


@contextmanager
def openai(steps: int, seed: int) -> Iterator[tuple[Planner, list[Timing]]]:
    with TimedResponsesStandIn(openai_clicker(steps, seed)) as api:
        planner = OpenAIPlanner("gpt-5.5", api_key=DUMMY_KEY, base_url=api.base_url, max_retries=0)
        yield planner, api.times
        if api.violations:
            raise RuntimeError(f"the stand-in refused requests: {api.violations}")


PROVIDERS: list[Provider] = [
    Provider("gemini", gemini),
    Provider("anthropic (toolset)", anthropic),
    Provider("openai (GA computer)", openai),
]


def run(desk: TestDesktop, runs: Path, provider: Provider, steps: int) -> list[Timing]:
    with provider.session(steps, 1) as (planner, times):
        with VncUseAgent(
            vnc_server=desk.server,
            vnc_password=desk.password,
            runs_dir=runs,
            step_limit=steps + 1,
            planner=planner,
            stall_after=0,  # random clicks on a static canvas: a stall by design, not measured
        ) as agent:
            result = agent.run(task="Click the points I ask for", thread_id=provider.name[:6])
        if result.status != "done":
            raise RuntimeError(f"{provider.name} ended {result.status}: {result.error}")
        return list(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="clicks per run (>= 5)")
    args = parser.parse_args()
    if args.steps < 5:
        parser.error("--steps must be >= 5")
    os.environ["GOOGLE_API_KEY"] = DUMMY_KEY
    for name in (
        "GEMINI_API_KEY",
        "GOOGLE_GENAI_USE_VERTEXAI",
        "ANTHROPIC_BASE_URL",
        "OPENAI_BASE_URL",
    ):
        os.environ.pop(name, None)
    started = time.monotonic()
    print(
        f"vnc-use provider benchmark: {WIDTH}x{HEIGHT} TigerVNC, busy probe, stand-ins answering "
        f"at once, {args.steps} clicks, one run per provider, each its default screenshots kept"
    )
    results: dict[str, list[Timing]] = {}
    with TestDesktop(WIDTH, HEIGHT) as desk, tempfile.TemporaryDirectory() as tmp_name:
        start_probe(desk, Path(tmp_name))
        for provider in PROVIDERS:
            results[provider.name] = run(desk, Path(tmp_name) / "runs", provider, args.steps)
    last = args.steps
    print(
        f"  {'provider':22}{'bytes step 5':>14}{f'bytes step {last}':>15}{'p50 ms':>9}{'p95 ms':>9}"
    )
    for name, times in results.items():
        over = [(times[i + 1][0] - times[i][1]) * 1000 for i in range(len(times) - 1)]
        print(
            f"  {name:22}{times[5][2] / 1e6:11.3f} MB{times[last][2] / 1e6:12.3f} MB"
            f"{statistics.median(over):9.1f}{pct(over, 0.95):9.1f}"
        )
    print(f"(benchmark took {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
