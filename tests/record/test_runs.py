"""Run history: ``vnc-use runs`` and ``vnc-use show`` on finished, denied, paused, failed and
budget-stopped runs made by the real agent on the test desktop; each one's report.html.

The runs are made once for the module; the commands run as real subprocesses.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vnc_use import VncUseAgent
from vnc_use.cli import main
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.record.runs import list_runs, summarize
from vnc_use.testing.gemini_standin import (
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    require_confirmation,
)

from desktop_fixtures import Probe
from doc_pages import all_lines
from gemini_fixtures import DUMMY_API_KEY, FAST_RETRY

CLI = [sys.executable, "-m", "vnc_use.cli"]

# thread id -> (status, steps), in the order the runs were started
EXPECTED = {
    "r1-done": ("done", 1),
    "r2-paused": ("awaiting_approval", 0),
    "r3-denied": ("denied", 0),
    "r4-budget": ("step_limit", 1),
    "r5-error": ("error", 1),
    "r6-approved": ("done", 1),
}


def confirm() -> Reply:
    return Reply.calls(
        FunctionCallSpec(
            "click_at", x=600, y=600, safety_decision=require_confirmation("Submits the form.")
        ),
        text="This submits the form.",
    )


@pytest.fixture(scope="module")
def history(session_probe: Probe, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A runs folder with six runs that ended six different ways."""
    runs = tmp_path_factory.mktemp("history") / "runs"
    click = Reply.calls(FunctionCallSpec("click_at", x=100, y=100))
    with pytest.MonkeyPatch.context() as mp, GeminiStandIn() as api:
        mp.setenv("GOOGLE_API_KEY", DUMMY_API_KEY)
        mp.delenv("GEMINI_API_KEY", raising=False)

        def agent(**kwargs: Any) -> VncUseAgent:
            return VncUseAgent(
                vnc_server=session_probe.desktop.server,
                vnc_password=session_probe.desktop.password,
                runs_dir=runs,
                planner=GeminiComputerUse(**FAST_RETRY),
                **kwargs,
            )

        with agent() as a:
            api.script(click, Reply.text("Clicked the corner."))
            assert a.run("Click the corner", thread_id="r1-done").status == "done"
            api.script(confirm())
            assert a.run("Submit the form", thread_id="r2-paused").status == "awaiting_approval"
            api.script(confirm())
            a.run("Submit it anyway", thread_id="r3-denied")
            assert a.deny("r3-denied").status == "denied"
        with agent(step_limit=1) as a:
            api.script(click, click, click)
            assert a.run("Click forever", thread_id="r4-budget").status == "step_limit"
        with agent() as a:
            api.script(click, *[Reply.error(503) for _ in range(5)])
            assert a.run("Click, then lose the API", thread_id="r5-error").status == "error"
            api.script(confirm(), Reply.text("Submitted after approval."))
            a.run("Submit with approval", thread_id="r6-approved")
            assert a.approve("r6-approved").status == "done"
    yield runs


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GOOGLE_API_KEY", "GEMINI_API_KEY")}
    proc = subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=60, cwd=cwd, env=env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.mark.desktop
def test_runs_lists_newest_first_with_status_and_steps(history: Path) -> None:
    out = cli("runs", "--runs-dir", str(history)).stdout.splitlines()
    header = ["THREAD", "STATUS", "STEPS", "STARTED", "DURATION", "COST", "TASK"]
    assert out[0].split() == header
    rows = [line.split() for line in out[1:]]
    assert [r[0] for r in rows] == list(reversed(EXPECTED))
    for row in rows:
        status, steps = EXPECTED[row[0]]
        assert row[1:3] == [status, str(steps)], row
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", row[3]) and re.fullmatch(r"\d\d:\d\d:\d\d", row[4])
        # After the duration ("0.4 s"): the default model is priced, so each run has a cost.
        assert re.fullmatch(r"\$\d+\.\d+", row[7]), row
    assert "Click, then lose the API" in out[2]

    limited = cli("runs", "--limit", "2", "--json", "--runs-dir", str(history)).stdout
    records = [json.loads(line) for line in limited.splitlines()]
    assert [r["thread_id"] for r in records] == ["r6-approved", "r5-error"]
    assert records[0]["final_text"] == "Submitted after approval."
    assert records[1]["error"] and "503" in records[1]["error"]
    assert all(r["duration_s"] >= 0 for r in records)


@pytest.mark.desktop
def test_show_prints_each_kind_of_run(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def show(thread: str) -> str:  # in this process: the same code as the command, faster
        capsys.readouterr()
        assert main(["show", thread, "--runs-dir", str(history)]) == 0
        return capsys.readouterr().out

    done = show("r1-done")
    assert re.search(r"^step 1: click_at\(x=100, y=100\) -> px \(144, 90\)", done, re.M)
    assert "status: done (1 step," in done and "answer: Clicked the corner." in done
    assert f"report: {history / 'r1-done' / 'report.html'}" in done

    paused = show("r2-paused")
    assert "status: awaiting_approval" in paused
    assert "waiting for approval of click_at: Submits the form." in paused
    assert "vnc-use approve r2-paused" in paused and "step 1:" not in paused

    denied = show("r3-denied")
    assert "denied by person: click_at - Submits the form." in denied
    assert "status: denied" in denied and "A person denied click_at" in denied

    budget = show("r4-budget")
    assert "status: step_limit (1 step," in budget

    error = show("r5-error")
    assert "error:" in error and "503" in error

    approved = show("r6-approved")
    lines = approved.splitlines()
    approval = next(i for i, line in enumerate(lines) if "approved by person: click_at" in line)
    assert lines[approval + 1].startswith("step 1: click_at(x=600, y=600) -> px (864, 540)")
    assert "(approved)" in lines[approval + 1]

    events = cli("show", "r6-approved", "--json", "--runs-dir", str(history)).stdout
    on_disk = (history / "r6-approved" / "events.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in events.splitlines()] == [json.loads(x) for x in on_disk]


@pytest.mark.desktop
def test_every_ending_writes_its_report(history: Path) -> None:
    for thread, (status, _) in EXPECTED.items():
        html = (history / thread / "report.html").read_text("utf-8")
        assert f'data-status="{status}"' in html, thread
        assert DUMMY_API_KEY not in html
    paused = (history / "r2-paused" / "report.html").read_text("utf-8")
    assert 'data-kind="pending"' in paused and "vnc-use approve r2-paused" in paused
    denied = (history / "r3-denied" / "report.html").read_text("utf-8")
    assert 'data-kind="denied"' in denied and "Denied by a person at" in denied


@pytest.mark.desktop
def test_history_never_reads_the_checkpoint_database(history: Path, tmp_path: Path) -> None:
    """Listing and showing read the run folders only: a garbage database changes nothing."""
    copy = tmp_path / "runs"
    shutil.copytree(history, copy)
    db = copy / "vnc-use.sqlite"
    assert db.exists()
    db.write_bytes(b"this is not a database" * 100)
    for extra in ("-wal", "-shm"):
        (copy / f"vnc-use.sqlite{extra}").unlink(missing_ok=True)
    out = cli("runs", "--runs-dir", str(copy)).stdout
    assert len(out.splitlines()) == 1 + len(EXPECTED)
    assert "status: denied" in cli("show", "r3-denied", "--runs-dir", str(copy)).stdout
    assert [s.thread_id for s in list_runs(copy)] == list(reversed(EXPECTED))


@pytest.mark.desktop
def test_readme_history_commands(history: Path, tmp_path: Path) -> None:
    """Every ``vnc-use runs|show|report`` line of the docs runs, as written, on real runs
    (those with ``--server`` run against a server in ``tests/agent/test_server.py``, those
    with ``--fleet`` against a fleet's database in ``tests/e2e/test_fleet.py``)."""
    shutil.copytree(history, tmp_path / "runs")
    commands = [
        line.split("#")[0].strip()
        for line in all_lines()
        if re.match(r"vnc-use (runs|show|report)\b", line)
        and "--server" not in line
        and "--fleet" not in line
    ]
    assert len(commands) >= 4, commands
    for command in commands:
        argv = shlex.split(command.replace("3f2a9c1d0b7e", "r6-approved"))[1:]
        proc = cli(*argv, cwd=tmp_path)
        assert proc.stdout.strip(), command
    assert (tmp_path / "runs" / "r6-approved" / "report.gif").exists()


def test_a_run_cut_short_by_a_crash_is_unfinished(tmp_path: Path) -> None:
    run = tmp_path / "crashed"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"thread_id": "crashed", "task": "t", "started": 5}))
    (run / "events.jsonl").write_text(
        '{"ts": 6, "event": "run_started", "task": "t"}\n'
        '{"ts": 7, "event": "action", "step": 1, "name": "click_at"}\n'
        '{"ts": 8, "event": "model_req'  # the process died mid-line
    )
    (tmp_path / "not-a-run").mkdir()
    (summary,) = list_runs(tmp_path)
    assert (summary.thread_id, summary.status, summary.steps) == ("crashed", "unfinished", 1)
    assert summary.duration_s == 2
    assert summarize(tmp_path / "not-a-run") is None


def test_unknown_run_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "nope", "--runs-dir", str(tmp_path)]) == 2
    assert "no run 'nope'" in capsys.readouterr().err
    assert main(["report", "../escape", "--runs-dir", str(tmp_path)]) == 2
    assert "invalid thread id" in capsys.readouterr().err
    assert main(["runs", "--runs-dir", str(tmp_path / "none")]) == 0
    assert "no runs in" in capsys.readouterr().out
