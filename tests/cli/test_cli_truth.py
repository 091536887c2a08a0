"""Issue 38 items 9 and 6: commands that said less than the truth, run as a user in a second
shell would (each command a subprocess; the Gemini and OpenAI-compatible stand-ins in this
process).

- ``approve`` without the model's API key performed the approved click, then failed (exit 1);
- an ``approve`` whose desktop could not be reached marked the still-waiting run ``error``;
- a run ending ``error`` did not say the ``vnc-use resume ID`` that continues it, and its error
  came after a ``WARNING ...planner:`` log line instead of alone;
- a model that ended the task saying it failed (Qwen's ``terminate(status="failure")``,
  OpenCUA's ``computer.terminate("failure")``) ended ``done``, exit 0.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vnc_use.testing.gemini_standin import (
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    require_confirmation,
)
from vnc_use.testing.openai_standin import OpenAIStandIn
from vnc_use.testing.openai_standin import Reply as OpenAIReply

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


# ---------------------------------------------------------------- item 6: the model's own failure

FAILURE_IN = {
    "qwen3-vl": "I cannot find a Save button anywhere.\n<tool_call>\n"
    '{"name": "computer_use", "arguments": {"action": "terminate", "status": "failure"}}'
    "\n</tool_call>",
    "opencua": "## Thought:\nI cannot find a Save button anywhere.\n\n## Code:\n```python\n"
    "computer.terminate(status='failure')\n```",
}
FAILURE_IN["qwen2.5-vl"] = FAILURE_IN["qwen3-vl"]


@pytest.mark.parametrize("dialect", sorted(FAILURE_IN))
def test_a_model_that_says_it_failed_ends_failed_exit_9(
    probe: Probe, tmp_path: Path, dialect: str
) -> None:
    """Issue 38 item 6: ``terminate(status="failure")`` ended ``done``, exit 0."""
    with OpenAIStandIn([OpenAIReply.text(FAILURE_IN[dialect])], models="m") as server:
        proc = run_cli(
            [
                *("run", "--provider", "openai-compatible", "--base-url", server.base_url),
                *("--model", "m", "--dialect", dialect, "--task", "Save the file"),
                *("--vnc", probe.desktop.server, "--thread-id", "f", "--no-video"),
                *("--runs-dir", str(tmp_path)),
            ],
            probe.desktop,
        )
    assert proc.returncode == 9, proc.stdout + proc.stderr
    assert "status: failed" in proc.stdout
    words = "I cannot find a Save button anywhere."
    assert f"reason: the model reported that the task failed: {words}" in proc.stdout
    record = json.loads((tmp_path / "f" / "run.json").read_text())
    assert record["status"] == "failed" and words in record["reason"]
    report = (tmp_path / "f" / "report.html").read_text()
    assert "Failed: the model reported that the task failed" in report and words in report
    listed = run_cli(["runs", "--runs-dir", str(tmp_path)])
    assert re.search(r"^f\s+failed\s", listed.stdout, re.M), listed.stdout


def test_a_success_terminate_still_ends_done(probe: Probe, tmp_path: Path) -> None:
    done = FAILURE_IN["qwen3-vl"].replace('"failure"', '"success"')
    with OpenAIStandIn([OpenAIReply.text(done)], models="m") as server:
        proc = run_cli(
            [
                *("run", "--provider", "openai-compatible", "--base-url", server.base_url),
                *("--model", "m", "--dialect", "qwen3-vl", "--task", "Save the file"),
                *("--vnc", probe.desktop.server, "--no-video", "--runs-dir", str(tmp_path)),
            ],
            probe.desktop,
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "status: done" in proc.stdout


def test_eval_counts_a_run_the_model_says_failed_as_not_passed(
    probe: Probe, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(
            json.dumps({"id": name, "task": "Save the file", "check": check}) + "\n"
            for name, check in (("save", "false"), ("saved-anyway", "true"))
        )
    )
    out = tmp_path / "out"
    with OpenAIStandIn([OpenAIReply.text(FAILURE_IN["qwen3-vl"])] * 2, models="m") as server:
        proc = run_cli(
            [
                *("eval", str(tasks), "--provider", "openai-compatible"),
                *("--base-url", server.base_url, "--model", "m", "--dialect", "qwen3-vl"),
                *("--vnc", probe.desktop.server, "--no-video", "--out", str(out)),
            ],
            probe.desktop,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 2
    for result in results:  # even the one whose check passes: the model said it failed
        assert (result["status"], result["outcome"], result["success"]) == (
            "failed",
            "failed",
            False,
        )
        assert "I cannot find a Save button anywhere." in result["error"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["passed"] == 0 and summary["outcomes"]["failed"] == 2
