"""Benchmark the OpenAI-compatible provider per dialect, next to Gemini in the same run.

Runs the full agent (:class:`vnc_use.VncUseAgent`, real SQLite checkpoints) against a real
1440x900 TigerVNC desktop with the probe app (``--busy`` backdrop), once per model API: the
Gemini stand-in with :class:`~vnc_use.providers.gemini.planner.GeminiComputerUse` (real
google-genai SDK), and the OpenAI-compatible stand-in with
:class:`~vnc_use.providers.openai_compat.OpenAICompatPlanner` (real ``openai`` SDK) in each
dialect: ``tools``, ``qwen3-vl``, ``qwen2.5-vl``, ``ui-tars``. Every scripted model clicks
random points of the canvas in its own coordinates, with a sentence of reasoning, then
finishes; stand-ins answer at once. Every agent keeps the last 2 screenshots
(``keep_screenshots=2``, the provider's default). Printed:

1. **Request bytes per step**: the HTTP body of the request at steps 5 and 20 (the last step
   when ``--steps`` is smaller), and how much of it is images, with the size of the image sent
   (the pixel dialects send the smart-resized screenshot).
2. **vnc-use's own overhead per step** (from the stand-in's answer to the next request it
   receives: settle, screenshot, encode, checkpoint, building and sending the request), p50
   and p95 per dialect, and its ratio to Gemini's p50; the variants run in alternating blocks.

Run: ``python benchmarks/local_models.py`` (30-45 s on 2 cores); ``--steps`` (steps
per run) and ``--blocks`` (runs per variant) change the sizes.
"""

from __future__ import annotations

import argparse
import json
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
from vnc_use.providers.openai_compat import OpenAICompatPlanner
from vnc_use.providers.openai_compat.resize import QWEN25_VL, UI_TARS, PixelLimits, smart_resize
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.openai_standin import OpenAIStandIn, Reply, ToolCall

KEEP_SCREENSHOTS = 2
GEMINI = "gemini"
MODELS = {
    "tools": "local-tools-model",
    "qwen3-vl": "qwen3-vl-8b-instruct",
    "qwen2.5-vl": "qwen2.5-vl-7b-instruct",
    "ui-tars": "ui-tars-1.5-7b",
}
"""dialect -> the model id the stand-in serves."""

Timing = tuple[float, float, int, int]
"""``(received, answered, body bytes, image bytes)`` of one chat-completions request."""


class TimedOpenAIStandIn(OpenAIStandIn):
    """The OpenAI-compatible stand-in, also noting when each chat request arrived and was
    answered, its body size and how much of it is image data URLs (bodies dropped once
    answered)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.times: list[Timing] = []

    def _handle(
        self, method: str, raw_path: str, headers: Mapping[str, str], raw: bytes
    ) -> tuple[int, dict[str, Any], float]:
        received = time.monotonic()
        status, answer, delay = super()._handle(method, raw_path, headers, raw)
        if method == "POST":
            rec = self.requests[-1]
            images = sum(
                len(part["image_url"]["url"])
                for message in rec.messages()
                if isinstance(message.get("content"), list)
                for part in message["content"]
                if isinstance(part, dict) and part.get("type") == "image_url"
            )
            self.times.append((received, time.monotonic(), len(raw), images))
            rec.body = None
        return status, answer, delay


def sent_size(dialect: str) -> tuple[int, int]:
    """The (width, height) of the image the dialect's model is sent for a 1440x900 screen."""
    limits: PixelLimits | None = {"qwen2.5-vl": QWEN25_VL, "ui-tars": UI_TARS}.get(dialect)
    if limits is None:
        return WIDTH, HEIGHT
    height, width = smart_resize(HEIGHT, WIDTH, limits)
    return width, height


def local_clicker(dialect: str, n_steps: int, seed: int) -> Callable[[Any, int], Reply]:
    """A model of ``dialect`` that clicks the probe's canvas ``n_steps`` times, then finishes;
    points in the dialect's own coordinates, the same points and reasoning as Gemini's."""
    rng = random.Random(seed)
    width, height = sent_size(dialect) if dialect in ("qwen2.5-vl", "ui-tars") else (1000, 1000)

    def script(body: Any, index: int) -> Reply:
        done = "All done: every requested point was clicked."
        if index >= n_steps:
            if dialect == "tools":
                return Reply.finish(done)
            if dialect == "ui-tars":
                return Reply.text(f"Thought: {done}\nAction: finished(content='{done}')")
            return Reply.text(f"Thought: {done}\n" + qwen_call(action="terminate"))
        x, y = rng.randrange(60, 600), rng.randrange(200, 780)
        mx, my = round(x * width / WIDTH), round(y * height / HEIGHT)
        text = (
            f"Step {index + 1}: the canvas is visible and nothing is in the way. I will click "
            f"the point at ({mx}, {my}) as asked, then look at the screen again to confirm "
            "that the click landed and a marker appeared where expected."
        )
        if dialect == "tools":
            return Reply.tool_calls(ToolCall("click", {"x": mx, "y": my}), content=text)
        if dialect == "ui-tars":
            return Reply.text(f"Thought: {text}\nAction: click(start_box='({mx},{my})')")
        return Reply.text(f"Thought: {text}\n" + qwen_call("left_click", coordinate=[mx, my]))

    return script


def qwen_call(action: str, **args: Any) -> str:
    """One ``computer_use`` call as a ``<tool_call>`` block."""
    body = {"name": "computer_use", "arguments": {"action": action, **args}}
    return f"<tool_call>\n{json.dumps(body)}\n</tool_call>"


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


def measure(desk: TestDesktop, runs: Path, variant: str, steps: int, seed: int) -> list[Timing]:
    """One run of ``variant`` (Gemini or a dialect); the timings of its model requests."""
    thread = f"{variant}-{seed}"
    if variant == GEMINI:
        with TimedStandIn(clicker(steps, seed)) as api:
            run_once(desk, runs, thread, steps, GeminiComputerUse(**FAST))
            return [(r, a, size, 0) for r, a, size in api.times]
    model = MODELS[variant]
    script = local_clicker(variant, steps, seed)
    with TimedOpenAIStandIn(script, models=model, max_images=KEEP_SCREENSHOTS) as server:
        planner = OpenAICompatPlanner(server.base_url, model, dialect=variant, max_retries=0)
        run_once(desk, runs, thread, steps, planner)
        if server.violations:
            raise RuntimeError(f"the stand-in refused {variant} requests: {server.violations}")
        return server.times


def overheads(times: list[Timing], steps: int) -> list[float]:
    """Milliseconds from each answer (but the finish) to the next request."""
    return [(times[i + 1][0] - times[i][1]) * 1000 for i in range(min(steps, len(times) - 1))]


def main() -> int:
    """Run every variant and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="clicks per run (>= 5)")
    parser.add_argument("--blocks", type=int, default=2, help="runs per variant, alternating")
    args = parser.parse_args()
    if args.steps < 5 or args.blocks < 1:
        parser.error("--steps must be >= 5 and --blocks >= 1")
    os.environ["GOOGLE_API_KEY"] = DUMMY_KEY
    for name in ("GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "OPENAI_API_KEY"):
        os.environ.pop(name, None)
    variants = [GEMINI, *MODELS]
    started = time.monotonic()
    print(
        f"vnc-use local-model benchmark: {WIDTH}x{HEIGHT} TigerVNC, busy probe, stand-in "
        f"servers answering at once, keep_screenshots={KEEP_SCREENSHOTS}, {args.steps} clicks "
        f"per run, {args.blocks} run(s) per variant"
    )
    per: dict[str, list[float]] = {v: [] for v in variants}
    first: dict[str, list[Timing]] = {}
    with TestDesktop(WIDTH, HEIGHT) as desk, tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        start_probe(desk, tmp)
        for block in range(args.blocks):
            for v, variant in enumerate(variants):
                times = measure(desk, tmp / "runs", variant, args.steps, seed=block * 10 + v)
                first.setdefault(variant, times)
                per[variant] += overheads(times, args.steps)
    late = min(20, args.steps)
    print("1. Request body bytes per step (MB; images are base64 data URLs in the body)")
    print(f"  {'':26}{'image sent':>12}{'step 5':>10}{f'step {late}':>10}   images at {late}")
    for variant in variants:
        times = first[variant]
        size = "x".join(map(str, sent_size(variant))) if variant != GEMINI else f"{WIDTH}x{HEIGHT}"
        label = "gemini (GeminiComputerUse)" if variant == GEMINI else variant
        images = f"{times[late][3] / 1e6:.3f}" if variant != GEMINI else "  -  "
        print(
            f"  {label:26}{size:>12}{times[5][2] / 1e6:10.3f}{times[late][2] / 1e6:10.3f}"
            f"   {images}"
        )
    gemini_p50 = statistics.median(per[GEMINI])
    print(
        f"2. Step overhead: model answer -> next request, {len(per[GEMINI])} steps per variant (ms)"
    )
    for variant in variants:
        values = per[variant]
        p50, p95 = statistics.median(values), pct(values, 0.95)
        label = "gemini (GeminiComputerUse)" if variant == GEMINI else variant
        ratio = "" if variant == GEMINI else f"   {p50 / gemini_p50:5.2f}x Gemini's p50"
        print(f"  {label:26} p50 {p50:7.1f} ms   p95 {p95:7.1f} ms{ratio}")
    print(f"(benchmark took {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
