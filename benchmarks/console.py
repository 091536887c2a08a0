"""Benchmark the web console (``vnc-use console``): the runs list over many run folders, and how
long an event takes from its line in ``events.jsonl`` to the open page.

``--runs`` run folders (default 10,000; each a ``run.json``, an ``events.jsonl`` of eight
events and the ``summary.json`` the run folder keeps as it writes them, as a short finished
run leaves) are written to a temporary folder; ``vnc-use console`` is started over it as a
person starts it, and ``GET /api/runs`` is timed: the first answer after the first start (the
console reads every folder's ``run.json`` and ``summary.json`` once, in the background from its
start), the first answer after a second start (the index kept from the first), the first
answer over as many runs written by an older version (no ``summary.json``: every event file is
read), then answers after the
index's half second of freshness ran out (two ``stat`` calls per run), a filtered page deep in
the list, and the HTML front page.
Then a run's page is opened in headless Chromium and ``--events`` events are appended to its
``events.jsonl`` one at a time; each one's latency is the time the page showed it
(``window.vncUseSeen``, taken in the page) minus the time written in the event. Every figure
is measured, one request or one event each; the issue's bars: the list under 1 s, an event
under 500 ms.

Run: ``python benchmarks/console.py`` (about a minute); ``--runs 1000 --events 5`` for a quick
check.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "helpers"))
from vnc_use.record.tally import Tally

from chromium import Browser

TOKEN = "benchmark-console-token"
STATUSES = ["done", "done", "done", "error", "denied", "step_limit", "interrupted", "stuck"]


def make_runs(root: Path, count: int, *, summaries: bool = True) -> None:
    """``count`` small finished runs, one folder each (with the ``summary.json`` the run folder
    keeps, or as an older version left them: without)."""
    start = time.time() - count * 60
    for i in range(count):
        folder = root / f"run{i:05d}"
        folder.mkdir(parents=True)
        ts = start + i * 60
        status = STATUSES[i % len(STATUSES)]
        record = {
            "kind": "local",
            "thread_id": folder.name,
            "task": f"Task number {i}: open the terminal and show the disk usage",
            "started": ts,
            "provider": "gemini",
            "model": "gemini-2.5-computer-use-preview-10-2025",
            "vnc_server": "127.0.0.1::5901",
        }
        (folder / "run.json").write_text(json.dumps(record))
        events = [
            {"ts": ts, "event": "run_started", "task": record["task"]},
            {"ts": ts + 1, "event": "observe", "width": 1440, "height": 900},
            {"ts": ts + 2, "event": "model_request", "n": 1},
            {"ts": ts + 3, "event": "model_response", "n": 1, "run_cost_usd": 0.002},
            {"ts": ts + 4, "event": "action", "step": 1, "name": "click_at"},
            {"ts": ts + 5, "event": "model_request", "n": 2},
            {"ts": ts + 6, "event": "model_response", "n": 2, "run_cost_usd": 0.004},
            {"ts": ts + 7, "event": "run_ended", "status": status, "steps": 1},
        ]
        (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
        if summaries:  # what the run folder leaves as it writes the events
            Tally.of_file(folder).write(folder)


@contextlib.contextmanager
def serving(runs: Path) -> Iterator[str]:
    """``vnc-use console`` over ``runs``; its base URL."""
    env = {**os.environ, "VNC_USE_CONSOLE_TOKEN": TOKEN}
    cmd = [sys.executable, "-m", "vnc_use.cli", "console", "--port", "0"]
    console = subprocess.Popen(
        [*cmd, "--runs-dir", str(runs)], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert console.stdout is not None
        url = console.stdout.readline().split(": ", 1)[1].strip()
        yield url.split("/?")[0]
    finally:
        console.terminate()
        console.wait(20)


def client(base: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)


def timed_get(http: httpx.Client, path: str, **params: object) -> tuple[float, httpx.Response]:
    began = time.perf_counter()
    answer = http.get(path, params=params)
    answer.raise_for_status()
    return time.perf_counter() - began, answer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vnc-use-console-bench-") as tmp:
        root = Path(tmp)
        runs = root / "runs"
        began = time.perf_counter()
        make_runs(runs, args.runs)
        print(f"made {args.runs} run folders in {time.perf_counter() - began:.1f} s")
        older = root / "older"
        make_runs(older, args.runs, summaries=False)
        starts = [
            ("first start over the folder", runs),
            ("second start (the kept index)", runs),
            ("first start, runs of an older version (no summary.json)", older),
        ]
        for start, folder in starts:
            began = time.perf_counter()
            with serving(folder) as base, client(base) as http:
                first, answer = timed_get(http, "/api/runs")
                took = time.perf_counter() - began
                total = answer.json()["total"]
                print(
                    f"{start}: first runs list answer {first:.3f} s after the URL "
                    f"({took:.3f} s from the command; {total} runs)"
                )
        with serving(runs) as base, client(base) as http:
            timed_get(http, "/api/runs")
            warm = []
            for _ in range(5):
                time.sleep(0.6)  # past the index's freshness: every folder stat'ed again
                warm.append(timed_get(http, "/api/runs")[0])
            print(
                f"runs list, page 1 of 50 (every folder checked): median "
                f"{statistics.median(warm):.3f} s, max {max(warm):.3f} s"
            )
            time.sleep(0.6)
            deep, answer = timed_get(
                http, "/api/runs", status="done", offset=args.runs // 4, limit=50
            )
            shown = len(answer.json()["runs"])
            print(f"runs list, status=done, offset {args.runs // 4}: {deep:.3f} s ({shown})")
            time.sleep(0.6)
            page, _ = timed_get(http, "/")
            print(f"front page (HTML, form and list): {page:.3f} s")
            latencies = event_latencies(base, runs, args.events)
        print(
            f"event to page over {len(latencies)} events: median "
            f"{statistics.median(latencies) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms"
        )
    return 0


def event_latencies(base: str, runs: Path, count: int) -> list[float]:
    """Append ``count`` events to a run's file; how long each took to show in the page."""
    live = runs / "live"
    live.mkdir()
    now = time.time()
    record = {"kind": "local", "thread_id": "live", "task": "a live run", "started": now}
    (live / "run.json").write_text(json.dumps(record))
    path = live / "events.jsonl"
    path.write_text(json.dumps({"ts": now, "event": "run_started", "task": "a live run"}) + "\n")
    lines = 1
    profile = Path(tempfile.mkdtemp(prefix="vnc-use-console-chromium-")) / "profile"
    browser = Browser(profile)
    out = []
    try:
        page = browser.new_page()
        page.open(f"{base}/runs/live/?token={TOKEN}")
        wait(lambda: page.evaluate("window.vncUseSeen && window.vncUseSeen[1]"))
        for step in range(1, count + 1):
            time.sleep(0.3)
            ts = time.time()
            event = {"ts": round(ts, 3), "event": "action", "step": step, "name": "click_at"}
            with path.open("a") as fh:
                fh.write(json.dumps(event) + "\n")
            lines += 1
            seen = wait(lambda n=lines: page.evaluate(f"window.vncUseSeen[{n}]"))
            out.append(seen / 1000 - event["ts"])
    finally:
        browser.close()
    return out


def wait(check: object, timeout: float = 30) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()  # type: ignore[operator]
        if value:
            return float(value)
        time.sleep(0.01)
    raise TimeoutError("the page did not show the event")


if __name__ == "__main__":
    sys.exit(main())
