"""Failing safe with real failures: a VNC server that dies, an agent process killed with
SIGKILL at random points, API faults, Ctrl-C, and bad input at the edges.

Figures the issue note quotes are printed with ``-s`` (trials run, time to error). API
faults that need no desktop (a body that is not JSON, empty answers) run on the FakeDesktop in
``test_agent_graph.py``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from vnc_use import VncUseAgent
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.store.journal import call_key
from vnc_use.store.storage import open_storage
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply

from desktop_fixtures import Probe, start_probe
from gemini_fixtures import NotJsonHandler

pytestmark = pytest.mark.desktop

FAST = {"retry_initial_delay": 0.01, "retry_max_delay": 0.05}
CLI = [sys.executable, "-m", "vnc_use.cli"]


def make_agent(desk: TestDesktop, runs: Path, **kwargs: Any) -> VncUseAgent:
    return VncUseAgent(
        vnc_server=desk.server,
        vnc_password=desk.password,
        runs_dir=runs,
        planner=GeminiComputerUse(**FAST),
        **kwargs,
    )


# ------------------------------------------------------------------ a VNC server that dies


@pytest.fixture
def fragile_desktop() -> Iterator[TestDesktop]:
    """A desktop of its own: these tests kill its server."""
    with TestDesktop(800, 600) as desk:
        yield desk


def test_server_restarting_mid_run_is_reconnected_and_the_run_goes_on(
    fragile_desktop: TestDesktop, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    desk = fragile_desktop
    restarted = threading.Event()

    def script(body: Any, index: int) -> Reply:
        if index == 1:  # the desktop dies while the model thinks, and comes back a bit later
            desk.kill_server()
            threading.Timer(0.7, lambda: (desk.restart_server(), restarted.set())).start()
            return Reply.calls(FunctionCallSpec("click_at", x=500, y=500))
        if index == 0:
            return Reply.calls(FunctionCallSpec("click_at", x=100, y=100))
        return Reply.text("done despite the outage")

    gemini.script(script)
    with make_agent(desk, tmp_path, hitl_mode=True, reconnect_window_s=20) as agent:
        result = agent.run(task="Click twice")
    assert restarted.is_set()
    assert result.status == "done", result.error
    assert [t["name"] for t in result.transcript] == ["click_at", "click_at"]
    assert result.transcript[1]["result"] == "ok"
    lines = Path(result.run_dir, "events.jsonl").read_text().splitlines()
    kinds = [json.loads(line)["event"] for line in lines]
    assert "connection_lost" in kinds and "reconnected" in kinds
    # the lost connection was noticed before anything was sent: nothing is uncertain
    assert "uncertain_action" not in kinds
    assert not gemini.violations


def test_server_staying_down_ends_with_error_then_resumes(
    fragile_desktop: TestDesktop, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    desk = fragile_desktop

    def script(body: Any, index: int) -> Reply:
        if index == 1:
            desk.kill_server()
        return [
            Reply.calls(FunctionCallSpec("hover_at", x=100, y=100)),
            Reply.calls(FunctionCallSpec("hover_at", x=200, y=200)),
            Reply.text("finished later"),
        ][min(index, 2)]

    gemini.script(script)
    with make_agent(desk, tmp_path, reconnect_window_s=2) as agent:
        start = time.monotonic()
        failed = agent.run(task="Hover twice", thread_id="outage")
        elapsed = time.monotonic() - start
        print(f"\ntime to error with the server down (2 s window): {elapsed:.1f} s")
        assert failed.status == "error"
        assert "did not come back within 2 s" in (failed.error or "")
        assert "vnc-use resume outage" in (failed.error or "")
        assert failed.steps == 1

        desk.restart_server()
        result = agent.resume("outage")
    assert result.status == "done", result.error
    assert result.final_text == "finished later"
    assert [t["step"] for t in result.transcript] == [1, 2]


# --------------------------------------------------- SIGKILL at random points, then resume


@pytest.fixture(scope="module")
def crash_desktop() -> Iterator[TestDesktop]:
    with TestDesktop(1000, 700) as desk:
        yield desk


@pytest.fixture(scope="module")
def crash_probe(crash_desktop: TestDesktop, tmp_path_factory: pytest.TempPathFactory) -> Probe:
    return start_probe(crash_desktop, str(tmp_path_factory.mktemp("crash") / "probe.jsonl"))


TURNS = 5
TRIALS = 20


def _grid_points(trial: int) -> list[tuple[int, int]]:
    """The grid points trial ``trial`` clicks: distinct across trials, so presses attribute."""
    return [(60 + 180 * k, 40 + 45 * trial) for k in range(TURNS)]


def test_sigkill_at_random_points_never_loses_or_silently_repeats_an_action(
    crash_probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """20 runs, each killed with SIGKILL at a random moment, each resumed to completion."""
    desk = crash_probe.desktop
    started = {t: threading.Event() for t in range(TRIALS)}

    def script(body: Any, index: int) -> Reply:
        # the answer depends on the trial (named in the task) and on how many calls the
        # history already answered, so a resumed run gets the right next turn
        contents = body.get("contents", [])
        trial = int(contents[0]["parts"][0]["text"].rsplit("#", 1)[1])
        answered = sum(1 for c in contents for p in c.get("parts", []) if _is_fr(p))
        started[trial].set()
        if answered >= TURNS:
            return Reply.text("all clicked")
        x, y = _grid_points(trial)[answered]
        return Reply.calls(FunctionCallSpec("click_at", x=x, y=y))

    gemini.script(script)
    env = {**os.environ, "VNC_PASSWORD": desk.password}

    def run_trial(trial: int) -> Counter[str]:
        rng = random.Random(20261122 + trial)
        outcomes: Counter[str] = Counter()
        runs, thread = tmp_path / f"runs-{trial}", f"crash-{trial}"
        argv = [*CLI, "run", "--vnc", desk.server, "--task", f"Click five times #{trial}"]
        argv += ["--thread-id", thread, "--runs-dir", str(runs), "--quiet"]
        if trial % 2:
            argv.append("--no-hitl")
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        assert started[trial].wait(60), f"trial {trial}: the CLI never asked the model"
        threading.Event().wait(rng.uniform(0.0, 0.6))  # a random point of the run
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        outcomes["finished before the kill" if proc.returncode == 0 else "killed"] += 1
        # resume until the run is finished, answering any uncertain action at random
        for _ in range(10):
            status = _status(runs, thread)
            if status == "done":
                break
            cmd = "resume"
            if status == "awaiting_approval":
                cmd = rng.choice(["approve", "deny"])
                outcomes[f"uncertain action, person chose {cmd}"] += 1
            resumed = subprocess.run(
                [*CLI, cmd, thread, "--runs-dir", str(runs), "--quiet"],
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert resumed.returncode in (0, 3), resumed.stdout + resumed.stderr
        assert _status(runs, thread) == "done", trial
        # no step lost: every call was answered exactly once, in order
        assert [t["step"] for t in _transcript(runs, thread)] == list(range(1, TURNS + 1))
        # nothing executed twice unless the journal recorded a decision to send it again
        journal = open_storage(None, runs).journal(thread)
        w, h = desk.size
        for i, (x, y) in enumerate(_grid_points(trial)):
            target = (round(x / 1000 * w), round(y / 1000 * h))
            sent = journal.dispatch_count(call_key(i + 1, 0))
            pressed = sum(1 for e in crash_probe.log.events("press") if (e["x"], e["y"]) == target)
            assert pressed <= max(sent, 1), (trial, i, pressed, sent)
            if sent > 1:
                outcomes["sent again after a person's decision"] += 1
        return outcomes

    crash_probe.log.clear()
    totals: Counter[str] = Counter()
    with ThreadPoolExecutor(max_workers=4) as pool:
        for outcome in pool.map(run_trial, range(TRIALS)):
            totals.update(outcome)
    print(f"\ncrash-resume trials: {TRIALS}, all completed; outcomes: {dict(totals)}")


def _is_fr(part: dict[str, Any]) -> bool:
    return "functionResponse" in part or "function_response" in part


def _state(runs: Path, thread: str) -> dict[str, Any]:
    with VncUseAgent(vnc_server="127.0.0.1::1", runs_dir=runs) as agent:
        result = agent.result(thread)
    return {"status": result.status, "transcript": result.transcript}


def _status(runs: Path, thread: str) -> str:
    return str(_state(runs, thread)["status"])


def _transcript(runs: Path, thread: str) -> list[dict[str, Any]]:
    return list(_state(runs, thread)["transcript"])


# ---------------------------------------------------- a server that is not the Gemini API


# ------------------------------------------------------------------------------- Ctrl-C


def test_ctrl_c_stops_at_a_step_boundary_and_resumes(
    probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    asked = threading.Event()

    def script(body: Any, index: int) -> Reply:
        if index == 1:
            asked.set()
        if index >= 3:
            return Reply.text("resumed to the end")
        return Reply.calls(FunctionCallSpec("hover_at", x=100 + index, y=100))

    gemini.script(script)
    env = {**os.environ, "VNC_PASSWORD": probe.desktop.password}
    proc = subprocess.Popen(
        [
            *(*CLI, "run", "--vnc", probe.desktop.server, "--task", "Hover"),
            *("--thread-id", "cc", "--runs-dir", str(tmp_path)),
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert asked.wait(30)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, out + err
    assert "status: interrupted" in out
    assert "Traceback" not in err
    resumed = subprocess.run(
        [*CLI, "resume", "cc", "--runs-dir", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resumed to the end" in resumed.stdout


# ------------------------------------------------------------------------ bad input at edges


def _edge(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str, float]:
    start = time.monotonic()
    proc = subprocess.run(
        [*CLI, *argv],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    elapsed = time.monotonic() - start
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("vnc-use:")]
    assert len(lines) == 1, proc.stderr
    return proc.returncode, lines[0], elapsed


def test_bad_input_at_the_edges(
    desktop: TestDesktop, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    # a port that speaks another protocol: an HTTP server
    http = ThreadingHTTPServer(("127.0.0.1", 0), NotJsonHandler)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    # (tests run as root in CI, which writes through permission bits: a file in the way is
    # what makes a runs folder impossible to create for anyone)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "vnc-use.sqlite").write_bytes(b"this is not a database" * 100)
    run = ["run", "--task", "x"]
    cases = {
        "unreachable host": (
            # nothing listens on 127.0.0.2 (test servers bind 127.0.0.1 only)
            [*run, "--vnc", f"127.0.0.2::{closed_port}", "--runs-dir", str(tmp_path / "a")],
            {"VNC_PASSWORD": desktop.password},
            1,
            "127.0.0.2",
        ),
        "wrong password": (
            [*run, "--vnc", desktop.server, "--runs-dir", str(tmp_path / "b")],
            {"VNC_PASSWORD": "nope"},
            1,
            "password",
        ),
        "another protocol": (
            [*run, "--vnc", f"127.0.0.1::{http.server_port}", "--runs-dir", str(tmp_path / "c")],
            {"VNC_PASSWORD": "x"},
            1,
            "VNC",
        ),
        "malformed address": (
            [*run, "--vnc", "nohost:::", "--runs-dir", str(tmp_path / "d")],
            {},
            2,
            "nohost:::",
        ),
        "missing API key": (
            [*run, "--vnc", desktop.server, "--runs-dir", str(tmp_path / "e")],
            {"GOOGLE_API_KEY": "", "GEMINI_API_KEY": "", "VNC_PASSWORD": desktop.password},
            2,
            "GOOGLE_API_KEY",
        ),
        "unwritable runs folder": (
            [*run, "--vnc", desktop.server, "--runs-dir", str(blocker / "runs")],
            {"VNC_PASSWORD": desktop.password},
            2,
            "runs folder",
        ),
        "corrupt checkpoint database": (
            [*run, "--vnc", desktop.server, "--runs-dir", str(corrupt)],
            {"VNC_PASSWORD": desktop.password},
            2,
            "checkpoint database",
        ),
    }
    slowest = 0.0
    try:
        for name, (argv, env, code, needle) in cases.items():
            got, line, elapsed = _edge(argv, env)
            slowest = max(slowest, elapsed)
            assert got == code, (name, line)
            assert needle in line, (name, line)
    finally:
        http.shutdown()
        http.server_close()
    print(f"\nslowest time to a one-line error at the edges: {slowest:.1f} s")


def test_password_on_the_command_line_warns_and_is_never_printed(
    desktop: TestDesktop, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    gemini.script(Reply.text("nothing to do"))
    proc = subprocess.run(
        [
            *(*CLI, "run", "--vnc", desktop.server, "--task", "x"),
            *("--runs-dir", str(tmp_path), "--vnc-password", desktop.password),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    assert "warning: --vnc-password is visible" in proc.stderr
    assert desktop.password not in proc.stdout + proc.stderr


# --------------------------------------------------------------------------- sensitive text


def test_sensitive_text_reaches_the_desktop_and_nothing_else(
    probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    secret = "hunter2-Very$ecret"
    w, h = probe.size
    ex, ey = (round(v * 1000 / s) for v, s in zip(probe.entry_center, (w, h), strict=True))
    gemini.script(
        Reply.calls(FunctionCallSpec("type_text_at", x=ex, y=ey, text="{{pin}}", press_enter=True)),
        Reply.text("typed the pin"),
    )
    runs = tmp_path / "runs"
    proc = subprocess.run(
        [
            *(*CLI, "run", "--vnc", probe.desktop.server, "--task", "Type {{pin}} and submit"),
            *("--sensitive", "pin", "--runs-dir", str(runs)),
        ],
        env={
            **os.environ,
            "VNC_PASSWORD": probe.desktop.password,
            "VNC_USE_SECRET_PIN": secret,
        },
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert probe.log.wait_type("submit")["text"] == secret  # the desktop got the value
    # ... and no byte written anywhere holds it, nor the API key, nor the VNC password
    conn = sqlite3.connect(runs / "vnc-use.sqlite")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    scanned = 0
    needles = [
        secret.encode(),
        probe.desktop.password.encode(),
        os.environ["GOOGLE_API_KEY"].encode(),
    ]
    for path in runs.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            scanned += len(data)
            for needle in needles:
                assert needle not in data, (path, needle)
    for request in gemini.requests:
        assert secret not in json.dumps(request.body)
    assert secret not in proc.stdout + proc.stderr
    print(f"\nsecrets scan: {scanned} bytes checked")
