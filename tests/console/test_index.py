"""The console's runs list over a folder of 10,000 runs (made here): newest first, paged,
filtered by status, a changed run read again, the index kept between starts. How fast it
answers is measured by benchmarks/console.py (no timed assertion here)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from vnc_use.console.index import CACHE, RunIndex
from vnc_use.record.folder import RunFolder
from vnc_use.record.tally import SUMMARY, Tally

STATUSES = ["done", "error", "denied", "interrupted"]


def make_runs(root: Path, count: int, *, summaries: bool = False) -> None:
    """``count`` finished runs, as an older version left them (no ``summary.json``) or with the
    one the run folder keeps as it writes its events."""
    for i in range(count):
        folder = root / f"r{i:05d}"
        folder.mkdir(parents=True)
        record = {
            "kind": "local",
            "thread_id": folder.name,
            "task": f"task {i}",
            "started": 1_700_000_000 + i,
            "provider": "gemini",
            "model": "m",
            "vnc_server": "127.0.0.1::5901",
        }
        (folder / "run.json").write_text(json.dumps(record))
        end = {
            "ts": 1_700_000_000 + i + 5,
            "event": "run_ended",
            "status": STATUSES[i % 4],
            "steps": i % 7,
        }
        (folder / "events.jsonl").write_text(json.dumps(end) + "\n")
        if summaries:
            Tally.of_file(folder).write(folder)


def test_ten_thousand_runs_list_newest_first_paged_and_filtered(tmp_path: Path) -> None:
    make_runs(tmp_path, 10_000)
    (tmp_path / "not-a-run").mkdir()
    index = RunIndex(tmp_path, fresh_for=0)
    page = index.page(limit=50)
    assert page.total == 10_000 and len(page.runs) == 50
    assert [s.thread_id for s in page.runs[:2]] == ["r09999", "r09998"]
    assert page.counts == {"done": 2500, "error": 2500, "denied": 2500, "interrupted": 2500}
    deep = index.page(status="denied", offset=2490, limit=50)
    assert deep.total == 2500 and len(deep.runs) == 10
    assert all(s.status == "denied" for s in deep.runs)
    assert deep.runs[-1].thread_id == "r00002"
    first = page.runs[0]
    assert (first.provider, first.model, first.desktop) == ("gemini", "m", "127.0.0.1::5901")


def test_a_run_that_changed_is_read_again_and_the_index_is_kept(tmp_path: Path) -> None:
    make_runs(tmp_path, 30)
    index = RunIndex(tmp_path, fresh_for=0)
    assert index.page().counts["done"] == 8
    events = tmp_path / "r00001" / "events.jsonl"  # an error run, resumed and done
    with events.open("a") as fh:
        fh.write(json.dumps({"ts": 1_800_000_000, "event": "resumed"}) + "\n")
        fh.write(json.dumps({"ts": 1_800_000_001, "event": "run_ended", "status": "done"}) + "\n")
    assert index.page().counts["done"] == 9
    assert (tmp_path / CACHE).is_file()
    # a second index (the console started again) starts from the kept one: a run it did not
    # read again still lists, with what the kept index says of it
    kept = json.loads((tmp_path / CACHE).read_text())
    assert len(kept["runs"]) == 30
    os.utime(tmp_path / "r00002" / "run.json", ns=(1, 1))  # a stamp that no longer matches
    again = RunIndex(tmp_path, fresh_for=0)
    again.warm().join(30)
    assert again.page().counts["done"] == 9 and again.page().total == 30


def test_a_never_indexed_folder_lists_whole_and_right_from_the_summaries(tmp_path: Path) -> None:
    """The cold path: no ``.console/index.json``; each run's ``summary.json`` is read instead of
    its events, except where it no longer covers them (then the events are read)."""
    make_runs(tmp_path, 10_000, summaries=True)
    # runs an older version went on with after this one summarised them: the summary is stale
    for name in ("r09999", "r00004"):
        with (tmp_path / name / "events.jsonl").open("a") as fh:
            fh.write(json.dumps({"ts": 1_800_000_000, "event": "resumed"}) + "\n")
    # a run written as runs are written now, still going
    live = RunFolder(tmp_path, "live")
    live.write_json("run.json", {"thread_id": "live", "task": "now", "started": 1_900_000_000})
    live.event("run_started", task="now")
    live.event("action", step=1, name="click_at")
    assert (live.path / SUMMARY).is_file() and not (tmp_path / CACHE).exists()
    index = RunIndex(tmp_path, fresh_for=0)
    index.warm().join(60)
    page = index.page(limit=50)
    assert page.total == 10_001
    assert [(s.thread_id, s.status, s.steps) for s in page.runs[:3]] == [
        ("live", "unfinished", 1),
        ("r09999", "unfinished", 9999 % 7),
        ("r09998", "denied", 9998 % 7),
    ]
    assert page.counts == {
        "done": 2499,
        "error": 2500,
        "denied": 2500,
        "interrupted": 2499,
        "unfinished": 3,
    }
    deep = index.page(status="done", offset=2450, limit=100)
    assert deep.total == 2499 and len(deep.runs) == 49
    assert all(s.status == "done" for s in deep.runs) and deep.runs[-1].thread_id == "r00000"
    # the run goes on: the list follows it
    live.event("run_ended", status="done", steps=1)
    assert index.page().counts["done"] == 2500
