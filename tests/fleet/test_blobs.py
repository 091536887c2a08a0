"""A fleet run's folder in PostgreSQL (issue 39): each screenshot stored once however many
runs name it, a folder on another host fetches what it lacks, prune keeps what can go on."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from vnc_use.fleet.blobs import BLOBS, EVENTS, FILES, VIDEO_PARTS, RunStore
from vnc_use.fleet.db import FleetDb
from vnc_use.record.folder import RunFolder
from vnc_use.testing.postgres import PostgresServer


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


def _png(colour: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), colour).save(out, "PNG")
    return out.getvalue()


def _count(store: RunStore, table: str, where: str = "", params: tuple[object, ...] = ()) -> int:
    rows = store._all(f"SELECT count(*) AS n FROM {table} {where}", params)
    return int(rows[0]["n"])


def test_a_folder_on_another_host_fetches_what_it_lacks(pg: PostgresServer, tmp_path: Path) -> None:
    host_a, host_b = tmp_path / "a" / "runs", tmp_path / "b" / "runs"
    red, blue = _png((200, 0, 0)), _png((0, 0, 200))
    with RunStore(pg.url) as store:
        first = RunFolder(host_a, "t1", store=store)
        first.write_json("run.json", {"thread_id": "t1", "task": "click"})
        first.write_json("model/0001-request.json", {"contents": []})  # a host's own
        shas = [first.put_screenshot(png) for png in (red, blue, red)]
        first.event("run_started", thread_id="t1", task="click")
        first.event("step", step=1, screenshot=shas[0])
        second = RunFolder(host_a, "t2", store=store)  # another run names the same screen
        second.put_screenshot(red)
        assert _count(store, BLOBS, "WHERE sha256 = %s", (shas[0],)) == 1
        assert _count(store, FILES, "WHERE sha256 = %s", (shas[0],)) == 2  # t1's and t2's

        # host B: nothing of t1 on its disk
        later = RunFolder(host_b, "t1", store=store)
        assert later.load_screenshot(shas[1]) == blue  # fetched on first use
        stats = store.fetch_run(host_b, "t1")
        assert stats.events == 2
        folder_a, folder_b = host_a / "t1", host_b / "t1"
        for name in ("events.jsonl", "run.json", f"screenshots/{shas[0]}.png"):
            assert (folder_b / name).read_bytes() == (folder_a / name).read_bytes(), name
        assert not (folder_b / "model" / "0001-request.json").exists()
        assert store.fetch_run(host_b, "t1").files == 0  # a cache: nothing twice
        # B goes on: its events follow A's, in the database and in a third folder
        later.event("resumed", thread_id="t1")
        store.fetch_run(tmp_path / "c", "t1")
        lines = (tmp_path / "c" / "t1" / "events.jsonl").read_text().splitlines()
        assert [json.loads(x)["event"] for x in lines] == ["run_started", "step", "resumed"]


def test_prune_deletes_a_finished_runs_content_and_keeps_a_waiting_ones(
    pg: PostgresServer, tmp_path: Path
) -> None:
    db = FleetDb(pg.url)
    try:
        for tid, status in (("p-done", "done"), ("p-wait", "awaiting_approval")):
            db.create_run(tid, "default", "t", {})
            db.finish_leg(tid, status, {"status": status}, None)
    finally:
        db.close()
    with RunStore(pg.url) as store:
        shared = _png((1, 2, 3))
        for n, tid in enumerate(("p-done", "p-wait")):
            folder = RunFolder(tmp_path, tid, store=store)
            folder.put_screenshot(shared)
            folder.put_screenshot(_png((n, 9, 9)))
            folder.event("run_started", thread_id=tid)
        stats = store.prune(0)
        assert stats.runs == ["p-done"]
        assert (stats.files, stats.events, stats.blobs) == (2, 1, 1)  # the shared one stays
        assert stats.freed > 0 and stats.size_before > 0 and stats.size_after > 0
        for table in (FILES, EVENTS):
            assert _count(store, table, "WHERE thread_id = 'p-done'") == 0
            assert _count(store, table, "WHERE thread_id = 'p-wait'") > 0
        assert store.pruned("p-done") and not store.pruned("p-wait")
        again = RunFolder(tmp_path / "other", "p-wait", store=store)
        assert again.load_screenshot(again.put_screenshot(shared)) == shared
        assert (
            RunFolder(tmp_path / "third", "p-wait", store=store).load_screenshot(
                hashlib.sha256(shared).hexdigest()
            )
            == shared
        )


def test_a_video_segment_reaches_the_database_as_it_grows(
    pg: PostgresServer, tmp_path: Path
) -> None:
    """A leg's segment is sent as it grows (a host that dies leaves it up to then), and whole
    at the leg's end; a folder elsewhere gets it either way."""
    run_dir = tmp_path / "a" / "v1"
    run_dir.mkdir(parents=True)
    segment, index = run_dir / "video.mp4", run_dir / "video.json"
    index.write_text('{"segments": [{"file": "video.mp4", "started": 1.0}]}')
    with RunStore(pg.url) as store:
        segment.write_bytes(b"moov" * 100)
        assert store.stream_video(run_dir, "v1") == 400 + index.stat().st_size
        with segment.open("ab") as fh:
            fh.write(b"moof" * 50)
        assert store.stream_video(run_dir, "v1") == 200
        assert store.stream_video(run_dir, "v1") == 0  # nothing new
        with RunStore(pg.url) as elsewhere:  # e.g. the host died here: its parts so far
            elsewhere.fetch_run(tmp_path / "b", "v1")
        assert (tmp_path / "b" / "v1" / "video.mp4").read_bytes() == segment.read_bytes()
        assert (tmp_path / "b" / "v1" / "video.json").read_bytes() == index.read_bytes()
        with segment.open("ab") as fh:
            fh.write(b"end!")
        store.upload_video(run_dir, "v1")
        assert _count(store, VIDEO_PARTS, "WHERE thread_id = 'v1'") == 0
        store.fetch_run(tmp_path / "c", "v1")
        assert (tmp_path / "c" / "v1" / "video.mp4").read_bytes() == segment.read_bytes()
