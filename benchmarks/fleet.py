"""The fleet's cost: the built-in suite over two workers of two desktops each against
``eval --desktops 4`` on one host, the queue's added latency per leg, and the time from a
worker's death to its leg running elsewhere.

    python benchmarks/fleet.py                                   # the whole suite
    python benchmarks/fleet.py --only term-note web-button --latency-legs 3   # a quick look

Everything runs on this machine: a throw-away PostgreSQL, the Gemini stand-in playing the
oracle of ``tests/eval_oracle.py``, two ``vnc-use worker --desktops 2`` processes. Figures
are printed, never asserted:

- wall time of ``eval --suite builtin --desktops 4`` and of ``eval --suite builtin --fleet``
  (workers already started), and their ratio (the goal: within 1.1x);
- queue latency: legs submitted one at a time to an idle fleet, from enqueue to a worker
  taking it (DBOS's ``created_at`` to ``dequeued_at``);
- death to recovery: a third worker is SIGKILLed while it runs a leg; the time until another
  worker has taken that leg;
- a run's history in the database (``--history-only`` runs just this): a 10-step run on a
  worker's local desktop; the bytes it stored per step (screenshots, other files, events,
  checkpoints and journal), and the time a leg on a fresh host takes to fetch it (median of 5).

    python benchmarks/fleet.py --history-only
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "helpers"))

from vnc_use.desktops.local import LocalDesktop
from vnc_use.evaluation.tasks import load_tasks, suite_path
from vnc_use.fleet.queue import LEG_WORKFLOW, Enqueuer
from vnc_use.testing.gemini_standin import GeminiStandIn
from vnc_use.testing.postgres import PostgresServer

from eval_oracle import oracle

DUMMY_KEY = "AIzaStandInDummyKey-0123456789abcdef"
CLI = [sys.executable, "-m", "vnc_use.cli"]


def eval_argv(out: Path, only: list[str] | None, *extra: str) -> list[str]:
    argv = [*CLI, "eval", "--suite", "builtin", "--out", str(out), "--quiet", *extra]
    return argv + (["--only", *only] if only else [])


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{argv[3:5]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return time.monotonic() - started


def start_worker(
    name: str, url: str, runs: Path, env: dict[str, str], desktops: int = 2
) -> subprocess.Popen[str]:
    argv = [*CLI, "worker", "--worker-id", name, "--runs-dir", str(runs)]
    argv += ["--desktops", str(desktops)]
    proc = subprocess.Popen(
        argv,
        env={**env, "VNC_USE_DATABASE_URL": url},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:  # ready: it prints its desktops
        if line.startswith(f"worker {name}: labels"):
            return proc
    raise SystemExit(f"worker {name} did not start")


def legs(url: str, prefix: str) -> list[Any]:
    client = Enqueuer(url)
    try:
        return list(client._client.list_workflows(name=LEG_WORKFLOW, workflow_id_prefix=prefix))
    finally:
        client.destroy()


def death_to_recovery(url: str, runs: Path, env: dict[str, str], only: str) -> tuple[float, float]:
    """Kill a worker that runs a leg; seconds until its leg was back on the queue, and until
    another worker took it (when one had a free desktop)."""
    victim = start_worker("victim", url, runs, env)
    # six legs for seven desktops: the victim gets some; watch for one PENDING on it
    out = runs.parent / "death"
    submitter = subprocess.Popen(
        eval_argv(out, [only], "--fleet", url, "--repeat", "6"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        taken = None
        while taken is None and time.monotonic() < deadline:
            for w in legs(url, "eval-"):
                if w.status == "PENDING" and w.executor_id == "victim":
                    taken = w.workflow_id
            time.sleep(0.05)
        if taken is None:
            raise SystemExit("the victim never took a leg")
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        killed = time.monotonic()
        requeued = None
        while time.monotonic() < deadline:
            found = [w for w in legs(url, taken) if w.workflow_id == taken]
            if found and requeued is None and found[0].status != "PENDING":
                requeued = time.monotonic() - killed
            retaken = found and found[0].status in ("PENDING", "SUCCESS")
            if retaken and found[0].executor_id != "victim":
                back = requeued if requeued is not None else time.monotonic() - killed
                return back, time.monotonic() - killed
            time.sleep(0.05)
        raise SystemExit("the victim's leg was never taken again")
    finally:
        submitter.wait(600)
        for folder in (runs / ".fleet-desktops" / "victim").glob("desktop-*"):
            LocalDesktop(folder).down()


HISTORY_STEPS = 10
CHECKPOINT_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


def table_bytes(url: str, thread_id: str) -> dict[str, int]:
    """Bytes the run's rows take in each of LangGraph's and the journal's tables."""
    from vnc_use.store import postgres

    conn = postgres.connect(url)
    found = {}
    try:
        with conn.cursor() as cur:
            for table in (
                "checkpoints",
                "checkpoint_blobs",
                "checkpoint_writes",
                "vnc_use_journal",
            ):
                cur.execute(
                    f"SELECT COALESCE(SUM(pg_column_size(t.*)), 0) AS n FROM {table} t "
                    "WHERE thread_id = %s",
                    (thread_id,),
                )
                row = cur.fetchone()
                found[table] = int(row["n"]) if row else 0
    finally:
        conn.close()
    return found


def history(url: str, root: Path, env: dict[str, str], api: GeminiStandIn) -> None:
    """A 10-step run on a worker's local desktop: bytes stored per step; the time a leg on a
    fresh host takes to fetch that history."""
    from vnc_use.fleet.blobs import RunStore
    from vnc_use.testing.gemini_replies import FunctionCallSpec, Reply

    def script(body: dict[str, Any], index: int) -> Reply:
        parts = [p for c in body.get("contents", []) for p in c.get("parts", [])]
        done = sum(1 for p in parts if "functionResponse" in p or "function_response" in p)
        if done >= HISTORY_STEPS:
            return Reply.text("clicked ten times")
        return Reply.calls(FunctionCallSpec("click_at", x=100 + done * 80, y=500))

    api.script(script)
    host = root / "host-h"
    worker = start_worker("H", url, host / "runs", env, desktops=1)
    try:
        argv = [*CLI, "run", "--fleet", url, "--task", "Click ten times", "--no-hitl"]
        timed([*argv, "--thread-id", "hist10", "--quiet"], env)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(120)
    with RunStore(url) as store:
        usage = store.usage("hist10")
        shots = len(list((host / "runs" / "hist10" / "screenshots").glob("*.png")))
        times, fetched = [], None
        for n in range(5):
            started = time.perf_counter()
            fetched = RunStore(url).fetch_run(root / f"fresh-{n}", "hist10")
            times.append(time.perf_counter() - started)
    rows = table_bytes(url, "hist10")
    stored = sum(usage.values())
    print(
        f"a {HISTORY_STEPS}-step run ({shots} distinct screenshots): "
        f"{stored / HISTORY_STEPS / 1024:.1f} KB per step in the run folders' tables "
        f"(screenshots {usage['screenshots'] / HISTORY_STEPS / 1024:.1f} KB, video and other "
        f"files {usage['files'] / HISTORY_STEPS / 1024:.1f} KB, events "
        f"{usage['events'] / HISTORY_STEPS / 1024:.1f} KB); checkpoints and journal "
        f"{sum(rows.values()) / HISTORY_STEPS / 1024:.1f} KB per step"
    )
    assert fetched is not None
    print(
        f"a leg on a fresh host fetches that history ({fetched.files} files, "
        f"{fetched.bytes / 1024:.0f} KB, {fetched.events} events): median "
        f"{statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", default=None, metavar="ID")
    parser.add_argument("--latency-legs", type=int, default=5, metavar="N")
    parser.add_argument(
        "--history-only", action="store_true", help="only the run history's bytes and fetch"
    )
    args = parser.parse_args()
    tasks = load_tasks(suite_path("builtin"), only=args.only).tasks
    print(f"built-in suite: {len(tasks)} tasks; {os.cpu_count()} CPUs")
    with (
        tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp,
        PostgresServer() as db,
        GeminiStandIn(oracle(tasks)) as api,
    ):
        root = Path(tmp)
        env = dict(os.environ, GOOGLE_API_KEY=DUMMY_KEY, GOOGLE_GEMINI_BASE_URL=api.base_url)
        env.pop("VNC_USE_DATABASE_URL", None)
        env["VNC_PASSWORD"] = "fleetbnc"
        if args.history_only:
            history(db.url, root, env, api)
            return
        one_host = timed(eval_argv(root / "one-host", args.only, "--desktops", "4"), env)
        print(f"eval --desktops 4 (one host): {one_host:.1f} s")
        runs = root / "fleet-runs"
        workers = [start_worker(n, db.url, runs, env) for n in ("A", "B")]
        try:
            fleet = timed(eval_argv(root / "fleet", args.only, "--fleet", db.url), env)
            print(f"eval --fleet (2 workers x 2 desktops): {fleet:.1f} s ({fleet / one_host:.2f}x)")
            waits = []
            first = args.only[0] if args.only else tasks[0].id
            for n in range(args.latency_legs):
                out = root / f"latency-{n}"
                timed(eval_argv(out, [first], "--fleet", db.url), env)
            for w in legs(db.url, "eval-"):
                if w.dequeued_at and w.created_at and w.workflow_id.endswith(f"{first}-0"):
                    waits.append((w.dequeued_at - w.created_at) / 1000)
            waits = sorted(waits)[: args.latency_legs]  # the idle-fleet legs are the quickest
            print(
                f"queue latency per leg (idle fleet, {len(waits)} legs): median "
                f"{statistics.median(waits) * 1000:.0f} ms, max {max(waits) * 1000:.0f} ms"
            )
            requeued, taken = death_to_recovery(db.url, runs, env, first)
            print(
                f"worker SIGKILLed: its leg back on the queue after {requeued:.2f} s, taken by "
                f"another worker after {taken:.2f} s (the others were busy until a desktop freed)"
            )
            history(db.url, root, env, api)
        finally:
            for proc in workers:
                proc.send_signal(signal.SIGTERM)
            for proc in workers:
                try:
                    proc.wait(120)
                except subprocess.TimeoutExpired:
                    proc.kill()


if __name__ == "__main__":
    main()
