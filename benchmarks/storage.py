"""Benchmark where runs keep their durable state: the journal and the desktop lease, in the
SQLite default and in PostgreSQL (a throw-away local cluster, 127.0.0.1, fsync on).

Prints p50/p95 (ms) of:

* one journal record (``Journal.dispatched``: committed, and in SQLite fsynced, before an
  action goes out) and reading a call's outcome back (``Journal.outcome``);
* taking and giving back a free desktop lease (a lock file, a Postgres advisory lock on its own
  connection, connection included);
* the handover: from the holder giving the lease back to a waiting run holding it.

Run: ``python benchmarks/storage.py [--runs 100]``. Figures are printed, not asserted.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from vnc_use.store.lease import Lease
from vnc_use.store.storage import Storage, open_storage
from vnc_use.testing.postgres import PostgresServer


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(fn: object, runs: int) -> list[float]:
    """Milliseconds of ``fn(i)`` over ``runs`` runs."""
    assert callable(fn)
    out = []
    for i in range(runs):
        start = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - start) * 1000)
    return out


def handover(storage: Storage, runs: int) -> list[float]:
    """Milliseconds from ``release()`` by the holder to ``acquire()`` returning in a waiter."""
    out = []
    for i in range(runs):
        holder = storage.lease("127.0.0.1::5999", f"holder-{i}")
        holder.acquire(timeout=5)
        waiter = storage.lease("127.0.0.1::5999", f"waiter-{i}")
        released_at: list[float] = []

        def wait(waiter: Lease = waiter, released_at: list[float] = released_at) -> None:
            waiter.acquire(timeout=30)
            out.append((time.perf_counter() - released_at[0]) * 1000)

        thread = threading.Thread(target=wait)
        thread.start()
        time.sleep(0.3 + random.random() * 0.1)  # the waiter found it taken and is polling
        released_at.append(time.perf_counter())
        holder.release()
        thread.join(30)
        waiter.release()
    return out


def rows_for(name: str, storage: Storage, runs: int) -> dict[str, list[float]]:
    journal = storage.journal(f"bench-{name}")
    rows = {
        f"{name}: journal record": timed(lambda i: journal.dispatched(f"{i}:0", "click", i), runs),
        f"{name}: journal outcome": timed(lambda i: journal.outcome(f"{i}:0"), runs),
    }

    def take_and_give_back(i: int) -> None:
        with storage.lease("127.0.0.1::5998", f"bench-{i}").hold(timeout=5):
            pass

    rows[f"{name}: lease take + give back"] = timed(take_and_give_back, runs)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100, help="measured runs per row")
    parser.add_argument("--handovers", type=int, default=10, help="lease handovers measured")
    args = parser.parse_args()
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp, PostgresServer(fsync=True) as pg:
        for name, location in (("sqlite", None), ("postgres", pg.url)):
            Path(tmp, name).mkdir()
            storage = open_storage(location, Path(tmp) / name)
            _ = storage.checkpointer  # as in a run: the checkpointer's tables (SQLite: WAL mode)
            rows.update(rows_for(name, storage, args.runs))
            storage.close()
        # two lease objects are as independent as two processes' (own file descriptor, own
        # connection)
        for name, location in (("sqlite", None), ("postgres", pg.url)):
            storage = open_storage(location, Path(tmp) / name)
            rows[f"{name}: lease handover to a waiting run"] = handover(storage, args.handovers)
            storage.close()
    print(f"{'measure':48} {'p50 ms':>8} {'p95 ms':>8} {'mean':>8}  n")
    for label, values in rows.items():
        print(
            f"{label:48} {pct(values, 0.5):8.2f} {pct(values, 0.95):8.2f} "
            f"{statistics.fmean(values):8.2f}  {len(values)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
