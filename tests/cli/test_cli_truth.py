"""Issue 38 item 9: commands that said less than the truth, run as a user in a second shell
would (each command a subprocess; the Gemini stand-in in this process).

- ``approve`` without the model's API key performed the approved click, then failed (exit 1);
- an ``approve`` whose desktop could not be reached marked the still-waiting run ``error``;
- a run ending ``error`` did not say the ``vnc-use resume ID`` that continues it, and its error
  came after a ``WARNING ...planner:`` log line instead of alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vnc_use.testing.gemini_standin import (
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    require_confirmation,
)

from cli_tools import run_cli
from desktop_fixtures import Probe

pytestmark = pytest.mark.desktop


def _confirm_reply() -> Reply:
    return Reply.calls(
        FunctionCallSpec(
            "click_at", x=600, y=600, safety_decision=require_confirmation("Submits the form.")
        )
    )


def _status(runs: Path, thread_id: str) -> str:
    return str(json.loads((runs / thread_id / "run.json").read_text())["status"])


def _stderr_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_approve_without_the_key_or_the_desktop_leaves_the_run_waiting(
    probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    gemini.script(_confirm_reply(), Reply.text("done after approval"))
    base = ["--runs-dir", str(tmp_path)]
    proc = run_cli(
        ["run", "--vnc", probe.desktop.server, "--task", "Submit", "--thread-id", "k", *base],
        probe.desktop,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr

    # no API key: refused before the desktop is touched, exit 2 (bad configuration)
    no_key = {"GOOGLE_API_KEY": "", "GEMINI_API_KEY": ""}
    proc = run_cli(["approve", "k", *base], probe.desktop, env=no_key)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = _stderr_lines(proc.stderr)
    assert line.startswith("vnc-use: ") and "GOOGLE_API_KEY" in line
    assert probe.log.events("press") == []
    assert _status(tmp_path, "k") == "awaiting_approval"

    # the desktop refuses the password: nothing done, the run still waits, and says so
    proc = run_cli(["approve", "k", *base], env={"VNC_PASSWORD": "wrong-pw"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (line,) = _stderr_lines(proc.stderr)
    assert "password" in line.lower() and "still waiting for approval" in line
    assert "wrong-pw" not in proc.stdout + proc.stderr
    assert _status(tmp_path, "k") == "awaiting_approval"
    assert probe.log.events("press") == []
    assert len(gemini.requests) == 1

    # with both, the approval goes through once
    proc = run_cli(["approve", "k", *base], probe.desktop)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "status: done" in proc.stdout
    probe.log.wait_type("press")
    assert len(probe.log.events("press")) == 1


def test_a_run_ending_in_error_says_how_to_resume_in_one_line(
    probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    gemini.script(Reply.error(400, "Request contains an invalid argument."))
    runs = str(tmp_path / "my-runs")
    proc = run_cli(
        [
            "run",
            "--vnc",
            probe.desktop.server,
            "--task",
            "x",
            "--thread-id",
            "e1",
            "--runs-dir",
            runs,
        ],
        probe.desktop,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "status: error" in proc.stdout
    (line,) = _stderr_lines(proc.stderr)  # no WARNING log line before it
    assert line.startswith("vnc-use: ") and "invalid argument" in line
    assert line.endswith(f"(continue it with: vnc-use resume e1 --runs-dir {runs})"), line

    gemini.script(Reply.text("Finished."))
    proc = run_cli(["resume", "e1", "--runs-dir", runs], probe.desktop)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "answer: Finished." in proc.stdout
