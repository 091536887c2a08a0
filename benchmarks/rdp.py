"""Benchmark ``--rdp`` against ``--vnc`` on the same screen: the agent's own time per step.

One 1280x800 Xvfb screen with the probe app (its ``--busy`` desktop-like backdrop) is served
twice: by x11vnc (VNC) and by FreeRDP's shadow server (RDP, reached through the FreeRDP
bridge vnc-use starts for ``--rdp``: a local Xvnc with ``xfreerdp`` full screen inside). The
full agent (real SQLite checkpoints, the real google-genai SDK, the Gemini stand-in answering
at once) clicks the probe's canvas, in alternating blocks over VNC and over RDP, and this
prints:

* the step overhead (from the stand-in's answer to the next request: the action, the settled
  screenshot, encoding, checkpoints), p50/p95 over each link, and the ratio RDP / VNC
  (the goal: 1.5 or less);
* how long the bridge takes to start (the certificate check, Xvnc, FreeRDP's connection);
* a click's latency to the probe's log over each link, and typing 40 characters over each.

Run: ``python benchmarks/rdp.py [--steps 20] [--blocks 2]``.
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

from vnc_use import VncUseAgent
from vnc_use.desktops.keyboard import RDP_KEYBOARD
from vnc_use.desktops.rdp import RdpBridge, RdpOptions, RdpTarget, TrustStore
from vnc_use.desktops.vnc import VNCController
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.probe import ProbeLog
from vnc_use.testing.rdp_shadow import RdpShadowServer
from vnc_use.testing.x11vnc import X11vncDesktop

WIDTH, HEIGHT = 1280, 800
DUMMY_KEY = "AIzaStandInDummyKey-0123456789abcdef"
FAST = {"retry_initial_delay": 0.01, "retry_max_delay": 0.05}


class TimedStandIn(GeminiStandIn):
    """The stand-in, noting when each request arrived and was answered."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.times: list[tuple[float, float]] = []

    def _handle(
        self, method: str, raw_path: str, headers: Mapping[str, str], raw: bytes
    ) -> tuple[int, dict[str, Any]]:
        received = time.monotonic()
        status, answer = super()._handle(method, raw_path, headers, raw)
        self.times.append((received, time.monotonic()))
        self.requests[-1].body = None
        return status, answer


def clicker(n_steps: int, seed: int) -> Callable[[Any, int], Reply]:
    """A model that clicks the probe's canvas ``n_steps`` times, then says it is done."""
    rng = random.Random(seed)

    def script(body: Any, index: int) -> Reply:
        if index >= n_steps:
            return Reply.text("All done.")
        x, y = rng.randrange(60, 600), rng.randrange(200, 740)
        gx, gy = round(x * 1000 / WIDTH), round(y * 1000 / HEIGHT)
        return Reply.calls(FunctionCallSpec("click_at", x=gx, y=gy), text=f"Step {index + 1}.")

    return script


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def row(name: str, values: list[float]) -> str:
    """One table row: p50 and p95 (ms)."""
    return f"  {name:40} p50 {statistics.median(values):7.1f} ms   p95 {pct(values, 0.95):7.1f} ms"


def run_steps(
    kwargs: dict[str, Any], runs: Path, thread: str, steps: int, seed: int
) -> list[float]:
    """One run of ``steps`` clicks; the step overheads (ms)."""
    with TimedStandIn(clicker(steps, seed)) as api:
        agent = VncUseAgent(
            **kwargs, runs_dir=runs, step_limit=steps + 1, planner=GeminiComputerUse(**FAST)
        )
        try:
            result = agent.run(task="Click the points I ask for", thread_id=thread)
        finally:
            agent.close()
        if result.status != "done":
            raise RuntimeError(f"run {thread} ended {result.status}: {result.error}")
        times = api.times
    return [(times[i + 1][0] - times[i][1]) * 1000 for i in range(len(times) - 1)][:steps]


def hands(server: str, password: str, log: ProbeLog, keyboard: Any, runs: int) -> list[str]:
    """Click -> probe press latency, and typing 40 characters -> the entry holds them."""
    clicks: list[float] = []
    typing: list[float] = []
    text = "The quick brown fox jumps over 1100 dogs!"[:40]
    with VNCController() as ctl:
        ctl.keyboard = keyboard
        ctl.connect(server, password)
        for i in range(runs):
            log.clear()
            start = time.perf_counter()
            ctl.click(700 + i % 50, 500)
            log.wait_type("press", timeout=10)
            clicks.append((time.perf_counter() - start) * 1000)
        for _ in range(max(3, runs // 4)):
            ctl.type_text("", clear_first=True)
            log.clear()
            start = time.perf_counter()
            ctl.type_text(text)
            log.wait_for(lambda e: e.get("type") == "text" and e.get("text") == text, timeout=20)
            typing.append((time.perf_counter() - start) * 1000)
    return [row("click -> probe sees the press", clicks), row("type 40 chars -> entry", typing)]


def main() -> int:
    """Start the screen and both servers, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="steps per block and link")
    parser.add_argument("--blocks", type=int, default=2, help="alternating blocks per link")
    args = parser.parse_args()
    os.environ["GOOGLE_API_KEY"] = DUMMY_KEY
    for name in ("GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"):
        os.environ.pop(name, None)
    tmp = Path(tempfile.mkdtemp(prefix="vnc-use-bench-rdp-"))
    print(f"rdp vs vnc on one {WIDTH}x{HEIGHT} screen: {args.steps} steps x {args.blocks} blocks")
    with X11vncDesktop(WIDTH, HEIGHT) as desk, RdpShadowServer(desk.display) as shadow:
        out = tmp / "probe.jsonl"
        desk.launch([sys.executable, "-m", "vnc_use.testing.probe", "--out", str(out), "--busy"])
        log = ProbeLog(out)
        log.wait_type("ready", timeout=30)
        target = RdpTarget("127.0.0.1", shadow.port)
        started = time.perf_counter()
        bridge = RdpBridge(
            RdpOptions(target),
            None,
            log_path=tmp / "freerdp.log",
            trust_store=TrustStore(tmp / "rdp-state"),
        )
        with bridge:
            bridge_s = time.perf_counter() - started
            links = {
                "vnc": {"vnc_server": desk.server, "vnc_password": desk.password},
                "rdp": {
                    "vnc_server": bridge.server,
                    "vnc_password": bridge.vnc_password,
                    "keyboard": RDP_KEYBOARD,
                    "rdp": bridge.describe(),
                },
            }
            per: dict[str, list[float]] = {name: [] for name in links}
            for block in range(args.blocks):
                for n, (name, kwargs) in enumerate(links.items()):
                    thread = f"{name}-{block}"
                    per[name] += run_steps(kwargs, tmp / "runs", thread, args.steps, block * 10 + n)
            print("step overhead (answer -> next request):")
            for name, values in per.items():
                print(row(f"--{name}", values))
            ratio = statistics.median(per["rdp"]) / statistics.median(per["vnc"])
            print(f"  ratio rdp / vnc (p50)                    {ratio:.2f}x   (goal <= 1.5x)")
            print(f"bridge start (certificate check, Xvnc, FreeRDP connected): {bridge_s:.2f} s")
            print("hands over VNC (x11vnc):")
            for line in hands(desk.server, desk.password, log, None, 20):
                print(line)
            print("hands over RDP (the bridge):")
            for line in hands(bridge.server, bridge.vnc_password, log, RDP_KEYBOARD, 20):
                print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
