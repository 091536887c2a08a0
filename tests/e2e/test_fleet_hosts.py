"""A fleet whose hosts share nothing but PostgreSQL (issue 39).

Two workers, each a host of its own (HOME, working folder, runs folder, TMPDIR), two desktops
each, the Gemini stand-in: worker B is SIGKILLed while it waits for the model's answer in the
middle of a four-click run; the run goes on on worker A, whose next request carries the same
screenshot history byte for byte; every click lands once. The report is built in a third
folder from the database alone, with both legs' screenshots and the video. ``fleet prune``
deletes the finished run's content and keeps a waiting run's. A run submitted for a label no
worker serves says so at once, in one line, and runs when a worker of the label starts.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.postgres import PostgresServer

from cli_tools import CLI
from desktop_fixtures import Probe
from fleet_tools import Host, WorkerProcess, answered, presses, probe_desktops

pytestmark = pytest.mark.desktop

POINTS = [(150, 300), (350, 500), (600, 300), (850, 500)]


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="module")
def probes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Probe]]:
    from fleet_tools import PASSWORD

    with probe_desktops(tmp_path_factory, 4, PASSWORD) as found:
        yield found


def _images(obj: Any) -> list[str]:
    """The inline images of a request, in order (base64, as sent)."""
    found: list[str] = []
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in ("inline_data", "inlineData") and isinstance(value, dict):
                found.append(str(value.get("data")))
            else:
                found += _images(value)
    elif isinstance(obj, list):
        for value in obj:
            found += _images(value)
    return found


def _client_env(host: Host) -> dict[str, str]:
    """A machine with nothing but the database URL: no model key, no VNC password."""
    env = host.env()
    for name in ("VNC_PASSWORD", "GOOGLE_API_KEY", "GEMINI_API_KEY", "VNC_USE_DATABASE_URL"):
        env.pop(name, None)
    return env


def _run_in(host: Host, argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *argv],
        env=_client_env(host),
        cwd=host.work,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _pinned_worker(url: str, thread_id: str) -> str | None:
    from vnc_use.fleet.db import FleetDb

    db = FleetDb(url, application_name="fleet test")
    try:
        row = db.run(thread_id)
    finally:
        db.close()
    return row.worker_id if row is not None else None


@pytest.mark.timeout(600)
def test_a_run_goes_on_on_another_host_with_its_whole_history(
    pg: PostgresServer, probes: list[Probe], gemini: GeminiStandIn, tmp_path: Path
) -> None:
    asked, killed = threading.Event(), threading.Event()
    held: dict[str, Any] = {}

    def script(body: dict[str, Any], index: int) -> Reply:
        done = answered(body)
        if done == 2 and not killed.is_set():  # B's third request: B dies waiting for it
            held["b"] = body
            asked.set()
            assert killed.wait(120)
        elif done == 2:
            held.setdefault("a", body)
        if done >= len(POINTS):
            return Reply.text("clicked four times")
        return Reply.calls(FunctionCallSpec("click_at", x=POINTS[done][0], y=POINTS[done][1]))

    gemini.script(script)
    hosts = tmp_path / "hosts"
    b = WorkerProcess("B", probes[2:], pg.url, hosts)
    a: WorkerProcess | None = None
    submit = Host.named(hosts, "submitter")
    submitter: subprocess.Popen[str] | None = None
    try:
        assert b.ready.wait(90), b.output
        argv = [*CLI, "run", "--fleet", pg.url, "--task", "Click four times", "--no-hitl"]
        submitter = subprocess.Popen(
            [*argv, "--thread-id", "h4"],
            env=_client_env(submit),
            cwd=submit.work,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert asked.wait(120), ("B never reached its third request", b.output)
        assert _pinned_worker(pg.url, "h4") == "B"
        assert [presses(probes, p) for p in POINTS] == [1, 1, 0, 0]
        a = WorkerProcess("A", probes[:2], pg.url, hosts)
        assert a.ready.wait(90), a.output
        b.kill()  # B dies while it waits for the model's answer
        killed.set()
        out, err = submitter.communicate(timeout=180)
        assert submitter.returncode == 0, (out, err, a.output)
        assert "answer: clicked four times" in out and "on worker A" in out, out
        assert "worker B is dead" in a.output
        # A's next request carries the history B had: the same images, byte for byte
        assert "a" in held, "A never asked the model"
        b_images, a_images = _images(held["b"]), _images(held["a"])
        assert len(b_images) == 3 and a_images == b_images
        assert held["a"]["contents"] == held["b"]["contents"]
        assert [presses(probes, p) for p in POINTS] == [1, 1, 1, 1]
        assert sum(len(p.log.events("press")) for p in probes) == 4
        # nothing went through a folder: A's run folder got B's screenshots from the database
        shots_b = {p.name for p in (b.host.runs / "h4" / "screenshots").iterdir()}
        shots_a = {p.name for p in (a.host.runs / "h4" / "screenshots").iterdir()}
        assert shots_b and shots_b <= shots_a
        assert not (a.host.runs / "h4" / "model" / "0001-request.json").exists()  # B's own

        # the report, on a third machine with nothing but the URL
        third = Host.named(hosts, "third")
        report = _run_in(third, ["report", "--fleet", pg.url, "h4", "--video"])
        assert report.returncode == 0, report.stdout + report.stderr
        folder = third.work / "runs" / "h4"
        assert f"report: {Path('runs') / 'h4' / 'report.html'}" in report.stdout
        page = (folder / "report.html").read_text()
        shots = set(re.findall(r'src="screenshots/([0-9a-f]{64})\.png"', page))
        assert shots_a <= {f"{s}.png" for s in shots}  # every screenshot of both legs
        assert all((folder / "screenshots" / f"{s}.png").is_file() for s in shots)
        # the video: A's leg whole; of B's, what B's encoder had written when B's last send
        # went out (every 2 s while a leg runs; a short leg's may be nothing yet)
        segments = json.loads((folder / "video.json").read_text())["segments"]
        assert segments, (segments, b.output)
        for segment in segments:
            assert f"video: {Path('runs') / 'h4' / segment['file']}" in report.stdout
            got = (folder / segment["file"]).read_bytes()
            on_a = a.host.runs / "h4" / segment["file"]
            on_b = b.host.runs / "h4" / segment["file"]
            if segment.get("ended"):  # A's: sent whole at its leg's end
                assert got == on_a.read_bytes()
            else:  # B's: sent as it grew
                assert got and on_b.read_bytes().startswith(got)
        # one file with everything inside
        single = _run_in(third, ["report", "--fleet", pg.url, "h4", "--out", "h4.html"])
        assert single.returncode == 0, single.stdout + single.stderr
        inside = (third.work / "h4.html").read_text()
        assert 'src="screenshots/' not in inside
        assert inside.count('"src": "data:video/mp4;base64,') == len(segments)
        assert len(set(re.findall(r'src="(data:image/png;base64,[^"]+)"', inside))) >= len(shots)
        # the transcript too
        shown = _run_in(third, ["show", "--fleet", pg.url, "h4"])
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.count("click_at") >= 4 and "status: done" in shown.stdout
        assert pg.password not in report.stdout + single.stdout + shown.stdout
        assert not gemini.violations
    finally:
        killed.set()
        if submitter is not None and submitter.poll() is None:
            submitter.kill()
            submitter.wait(10)
        b.kill()
        if a is not None:
            a.stop()


@pytest.mark.timeout(300)
def test_prune_deletes_a_finished_runs_content_and_keeps_a_waiting_ones(
    pg: PostgresServer, probes: list[Probe], gemini: GeminiStandIn, tmp_path: Path
) -> None:
    def script(body: dict[str, Any], index: int) -> Reply:
        if answered(body) == 0:
            return Reply.calls(FunctionCallSpec("click_at", x=500, y=500))
        return Reply.text("clicked")

    gemini.script(script)
    hosts = tmp_path / "hosts"
    worker = WorkerProcess("P", probes[:1], pg.url, hosts)
    client = Host.named(hosts, "client")
    try:
        assert worker.ready.wait(90), worker.output
        done = _run_in(client, ["run", "--fleet", pg.url, "--task", "t #p1", "--thread-id", "p1"])
        assert done.returncode == 0, done.stdout + done.stderr
        waiting = _run_in(
            client,
            [
                "run",
                "--fleet",
                pg.url,
                "--task",
                "t #p2",
                "--thread-id",
                "p2",
                "--confirm",
                "click_at",
            ],
        )
        assert waiting.returncode == 3, waiting.stdout + waiting.stderr
        pruned = _run_in(client, ["fleet", "prune", "--fleet", pg.url, "--older-than", "0"])
        assert pruned.returncode == 0, pruned.stdout + pruned.stderr
        lines = pruned.stdout.splitlines()
        assert re.match(r"pruned \d+ finished runs? \(.*p1.*\): \d+ files", lines[0]), lines
        assert "p2" not in lines[0]
        assert re.match(r"database size: [\d.]+ [KMG]?B before, [\d.]+ [KMG]?B after", lines[1])
        gone = _run_in(client, ["report", "--fleet", pg.url, "p1"])
        assert gone.returncode == 2 and "was pruned" in gone.stderr, gone.stderr
        assert len(gone.stderr.strip().splitlines()) <= 2  # the URL's warning and the line
        # a run folder of this machine under the same id is never overwritten
        mine = client.work / "runs" / "p2"
        mine.mkdir(parents=True)
        (mine / "events.jsonl").write_text('{"event": "run_started", "thread_id": "p2"}\n')
        refused = _run_in(client, ["report", "--fleet", pg.url, "p2"])
        assert refused.returncode == 2 and "holds a run of this machine" in refused.stderr
        assert (mine / "events.jsonl").read_text().count("\n") == 1
        kept = _run_in(client, ["report", "--fleet", pg.url, "p2", "--runs-dir", "fleet-runs"])
        assert kept.returncode == 0, kept.stderr
        assert (client.work / "fleet-runs" / "p2" / "report.html").is_file()
        approved = _run_in(client, ["approve", "--fleet", pg.url, "p2"])
        assert approved.returncode == 0 and "answer: clicked" in approved.stdout, approved
        # a bad duration: one line
        bad = _run_in(client, ["fleet", "prune", "--fleet", pg.url, "--older-than", "soon"])
        assert bad.returncode == 2 and "'soon' is not a duration" in bad.stderr
    finally:
        worker.stop()


@pytest.mark.timeout(300)
def test_a_run_for_a_label_no_worker_serves_says_so_at_once_and_runs_when_one_starts(
    pg: PostgresServer, probes: list[Probe], gemini: GeminiStandIn, tmp_path: Path
) -> None:
    def script(body: dict[str, Any], index: int) -> Reply:
        if answered(body) == 0:
            return Reply.calls(FunctionCallSpec("click_at", x=500, y=200))
        return Reply.text("clicked for the lonely label")

    gemini.script(script)
    hosts = tmp_path / "hosts"
    client = Host.named(hosts, "client")
    # a worker of another label, so the fleet has queues; none serves "lonely"
    other = WorkerProcess("O", probes[1:2], pg.url, hosts)
    worker: WorkerProcess | None = None
    proc: subprocess.Popen[str] | None = None
    lines: list[str] = []
    try:
        assert other.ready.wait(90), other.output
        argv = [*CLI, "run", "--fleet", pg.url, "--task", "t", "--label", "lonely", "--no-hitl"]
        proc = subprocess.Popen(
            [*argv, "--thread-id", "lonely1"],
            env=_client_env(client),
            cwd=client.work,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
        reader.start()
        deadline = time.monotonic() + 60
        while not lines:
            assert time.monotonic() < deadline and proc.poll() is None, "nothing said"
            time.sleep(0.05)
        assert lines[0].strip() == (
            "queued: no worker is alive for label lonely (0 runs ahead of it); it starts when "
            "one is (vnc-use worker --label lonely)"
        )
        worker = WorkerProcess("L", probes[:1], pg.url, hosts, ("--label", "lonely"))
        assert worker.ready.wait(90), worker.output
        assert proc.wait(120) == 0, "".join(lines) + (proc.stderr.read() if proc.stderr else "")
        reader.join(10)
        out = "".join(lines)
        assert "run lonely1 on" in out  # the progress lines, from the worker's events
        assert re.search(r"^\s*step 1 .*click_at", out, re.M) or "click_at" in out, out
        assert "answer: clicked for the lonely label" in out and "on worker L" in out
        assert presses(probes, (500, 200)) == 1
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for w in (worker, other):
            if w is not None:
                w.stop()


def test_the_hosts_share_nothing_but_the_database(tmp_path: Path) -> None:
    """The fleet tests' hosts: their own HOME, working folder, runs folder and TMPDIR."""
    one, two = Host.named(tmp_path, "one"), Host.named(tmp_path, "two")
    folders = [one.home, one.work, one.runs, one.tmp, two.home, two.work, two.runs, two.tmp]
    assert len(set(folders)) == 8 and all(f.is_dir() for f in folders)
    env = one.env({"HOME": "/root", "TMPDIR": "/tmp", "XDG_CACHE_HOME": "/x", "PATH": "/bin"})
    assert env == {"HOME": str(one.home), "TMPDIR": str(one.tmp), "PATH": "/bin"}
    assert os.path.commonpath([one.root, two.root]) == str(tmp_path)
