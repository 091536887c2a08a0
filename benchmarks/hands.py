"""Benchmark the "hands" of vnc-use: screenshots, clicks and typing on a real desktop.

Starts a 1440x900 TigerVNC test desktop with the probe app (with its desktop-like ``--busy``
backdrop: text, panels and a noisy photo, so PNG encoding costs what it costs on a real
desktop) and prints p50/p95 (ms) of:

* ``screenshot_png()`` (VNCController's fast path),
* vncdotool's plain ``captureScreen(path)`` to a PNG file over a second, plain connection
  (the naive path),
* the raw full framebuffer refresh alone,
* click -> the probe sees the press,
* typing 40 characters -> the probe's entry holds them,

and the ratio naive / ``screenshot_png``. Run: ``python benchmarks/hands.py [--runs 40]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from vncdotool import api

from vnc_use.desktops.vnc import VNCController
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.probe import ProbeLog


def measure(fn: Callable[[int], object], runs: int, warmup: int = 3) -> list[float]:
    """Milliseconds of ``fn(i)`` over ``runs`` runs after ``warmup`` unmeasured ones."""
    for i in range(warmup):
        fn(-1 - i)
    times = []
    for i in range(runs):
        start = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - start) * 1000)
    return times


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    """Run every measurement and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="measured runs per row (>= 30)")
    args = parser.parse_args()
    runs = max(30, args.runs)
    rows: dict[str, list[float]] = {}
    with TestDesktop(1440, 900) as desk, tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "probe.jsonl"
        desk.launch([sys.executable, "-m", "vnc_use.testing.probe", "--out", str(out), "--busy"])
        log = ProbeLog(out)
        log.wait_type("ready", timeout=20)
        vnc = VNCController().connect(desk.server, desk.password)
        naive = api.connect(desk.server, desk.password, timeout=10)

        rows["screenshot_png()"] = measure(lambda i: vnc.screenshot_png(), runs)
        png_path = str(Path(tmp) / "naive.png")
        rows["naive captureScreen(file)"] = measure(lambda i: naive.captureScreen(png_path), runs)
        rows["raw full refresh (screenshot())"] = measure(lambda i: vnc.screenshot(), runs)

        # Input latencies run from the call to the probe's own timestamp of the event (same
        # machine clock), so the polling of the probe's log file does not count.
        def click(i: int) -> None:
            x, y = 100 + (i * 37) % 1200, 300 + (i * 53) % 500
            log.clear()
            sent = time.time()
            vnc.click(x, y)
            event = log.wait_type("press", x=x, y=y)
            if i >= 0:
                clicked.append((event["t"] - sent) * 1000)

        clicked: list[float] = []
        measure(click, runs)
        rows["click -> probe press"] = clicked

        def type40(i: int) -> None:
            text = f"Run {i:03d} The quick brown fox jumps OK!"[:40].ljust(40, ".")
            log.clear()
            vnc.type_text("", clear_first=True)
            log.wait_type("keyup", keysym="BackSpace")  # the entry is empty now
            log.clear()
            sent = time.time()
            vnc.type_text(text)
            event = log.wait_type("text", text=text)
            if i >= 0:
                typed.append((event["t"] - sent) * 1000)

        typed: list[float] = []
        measure(type40, runs)
        rows["type 40 chars -> entry text"] = typed
        naive.disconnect()
        vnc.disconnect()

    print(f"vnc-use hands benchmark: 1440x900 TigerVNC Xvnc, {runs} runs per row (ms)")
    print(f"{'what':36} {'p50':>8} {'p95':>8}")
    for name, values in rows.items():
        print(f"{name:36} {statistics.median(values):8.1f} {pct(values, 0.95):8.1f}")
    ratio = statistics.median(rows["naive captureScreen(file)"]) / statistics.median(
        rows["screenshot_png()"]
    )
    print(f"naive / screenshot_png (p50): {ratio:.2f}x (target >= 1.8x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
