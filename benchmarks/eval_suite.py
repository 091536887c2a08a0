"""How long the built-in eval suite takes, how much memory a desktop needs, and what the two
stand-in models score.

    python benchmarks/eval_suite.py                      # --desktops 1 2 4, the whole suite
    python benchmarks/eval_suite.py --desktops 2 --only term-note web-button   # a quick look

For each ``--desktops`` count it runs ``vnc-use eval --suite builtin`` with the Gemini stand-in
playing the oracle of ``tests/helpers/eval_oracle.py`` (it solves every task) and prints the
wall time.
Meanwhile it samples, every 0.2 s, the resident memory of every process of each desktop (Xvnc,
openbox, xterm, the Chromium a task starts: they all carry the desktop's id in their
environment) and prints the peak per desktop. Then it runs the anti-oracle once and prints the
success rate each stand-in model got. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "helpers"))

from vnc_use.desktops.local import marked_processes
from vnc_use.evaluation.tasks import load_tasks, suite_path
from vnc_use.testing.gemini_standin import GeminiStandIn

from eval_oracle import anti_oracle, oracle

DUMMY_KEY = "AIzaStandInDummyKey-0123456789abcdef"


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class MemorySampler(threading.Thread):
    """Peak resident memory of each desktop under ``out/desktops`` (MiB)."""

    def __init__(self, out: Path) -> None:
        super().__init__(daemon=True)
        self.out = out
        self.peaks: dict[str, float] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            for state in (self.out / "desktops").glob("desktop-*/state.json"):
                try:
                    desktop_id = json.loads(state.read_text())["desktop_id"]
                except (OSError, ValueError, KeyError):
                    continue
                total = sum(rss_kib(pid) for pid in marked_processes(desktop_id)) / 1024
                name = state.parent.name
                self.peaks[name] = max(self.peaks.get(name, 0.0), total)


def run_eval(script: Any, desktops: int, only: list[str] | None, out: Path) -> dict[str, Any]:
    argv = ["eval", "--suite", "builtin", "--desktops", str(desktops), "--out", str(out)]
    if only:
        argv += ["--only", *only]
    with GeminiStandIn(script) as api:
        env = dict(os.environ, GOOGLE_API_KEY=DUMMY_KEY, GOOGLE_GEMINI_BASE_URL=api.base_url)
        sampler = MemorySampler(out)
        sampler.start()
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "vnc_use.cli", *argv, "--quiet"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.monotonic() - started
        sampler.done.set()
        sampler.join()
    if done.returncode != 0:
        raise SystemExit(f"vnc-use eval failed ({done.returncode}): {done.stderr[-2000:]}")
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    summary["wall_s"] = wall
    summary["peak_mib"] = sampler.peaks
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--desktops", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--only", nargs="+", default=None, metavar="ID")
    args = parser.parse_args()
    tasks = load_tasks(suite_path("builtin"), only=args.only).tasks
    print(f"built-in suite: {len(tasks)} tasks; {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="eval-bench-") as tmp:
        rates = {}
        for n in args.desktops:
            s = run_eval(oracle(tasks), n, args.only, Path(tmp) / f"oracle-{n}")
            peaks = s["peak_mib"].values()
            peak = f"{max(peaks):.0f} MiB" if peaks else "n/a"
            print(
                f"--desktops {n}: wall {s['wall_s']:.1f} s, "
                f"median task {s['median_seconds']:.1f} s, "
                f"peak memory per desktop {peak} (passed {s['passed']}/{s['runs']})"
            )
            rates["oracle"] = s["success_rate"]
        anti = run_eval(anti_oracle(tasks), max(args.desktops), args.only, Path(tmp) / "anti")
        rates["anti-oracle"] = anti["success_rate"]
        for model, rate in rates.items():
            print(f"success rate of the {model} stand-in: {rate:.0%}")


if __name__ == "__main__":
    main()
