"""The command line in real subprocesses: runs, approvals, exit codes, crashes and resumes.

The Gemini stand-in runs in this test process; the CLI subprocesses reach it through
``GOOGLE_GEMINI_BASE_URL`` (set by the ``gemini`` fixture) like they would reach Google.
"""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.gemini_standin import (
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    require_confirmation,
)

from cli_tools import CLI, run_cli
from desktop_fixtures import Probe
from doc_pages import blocks, page


def confirm_reply() -> Reply:
    return Reply.calls(
        FunctionCallSpec(
            "click_at", x=600, y=600, safety_decision=require_confirmation("Submits the form.")
        )
    )


def test_help_of_both_console_scripts() -> None:
    bindir = Path(sys.executable).parent
    for name in ("vnc-use", "cua-vnc"):
        proc = subprocess.run(
            [str(bindir / name), "--help"], capture_output=True, text=True, timeout=30
        )
        assert proc.returncode == 0, proc.stderr
        assert "run" in proc.stdout and "approve" in proc.stdout and "Exit codes" in proc.stdout
        # the four providers a newcomer can choose (issue 38)
        said = " ".join(proc.stdout.split())
        assert "Gemini, Claude, OpenAI, or an open model behind an OpenAI-compatible" in said


@pytest.mark.desktop
def test_run_types_into_the_probe(probe: Probe, gemini: GeminiStandIn, tmp_path: Path) -> None:
    w, h = probe.size
    ex, ey = (round(v * 1000 / s) for v, s in zip(probe.entry_center, (w, h), strict=True))
    gemini.script(
        Reply.calls(
            FunctionCallSpec("type_text_at", x=ex, y=ey, text="from the CLI", press_enter=True)
        ),
        Reply.text("Submitted."),
    )
    proc = run_cli(
        ["run", "--vnc", probe.desktop.server, "--task", "Type it", "--runs-dir", str(tmp_path)],
        probe.desktop,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "status: done" in proc.stdout and "answer: Submitted." in proc.stdout
    assert re.search(r"step 1: type_text_at\(.*\) -> px \(\d+, \d+\)", proc.stdout)
    assert probe.log.wait_type("submit")["text"] == "from the CLI"
    assert probe.desktop.password not in proc.stdout + proc.stderr


@pytest.mark.desktop
def test_approval_from_the_shell(probe: Probe, gemini: GeminiStandIn, tmp_path: Path) -> None:
    gemini.script(confirm_reply(), Reply.text("done after approval"))
    base = ["--runs-dir", str(tmp_path)]
    proc = run_cli(
        ["run", "--vnc", probe.desktop.server, "--task", "Submit", "--thread-id", "t1", *base],
        probe.desktop,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr  # stdin is not a terminal
    assert "vnc-use approve t1" in proc.stdout and "Submits the form." in proc.stdout
    assert probe.log.events("press") == []

    proc = run_cli(["approve", "t1", *base], probe.desktop)  # the address comes from the run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "status: done" in proc.stdout
    # this process never saw the model answer, yet its step line shows how long it took
    assert re.search(r"step 1: click_at\(.*\[\d+ ms; model \d+ ms\]", proc.stdout), proc.stdout
    assert probe.log.wait_type("press")["x"] == 864
    (response,) = gemini.requests[1].function_responses()
    assert response["response"]["safety_acknowledgement"] == "true"


@pytest.mark.desktop
def test_approve_sends_the_same_tools_as_the_run(
    probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """Issue 17 item 9: ``--keep-browser-actions`` was not kept with the run, so ``approve``
    rebuilt the planner without it and sent the model another tool set mid-run."""
    gemini.script(confirm_reply(), Reply.text("done after approval"))
    base = ["--runs-dir", str(tmp_path)]
    args = ["--task", "Submit", "--thread-id", "kb", "--environment", "desktop"]
    proc = run_cli(
        ["run", "--vnc", probe.desktop.server, *args, "--keep-browser-actions", *base],
        probe.desktop,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert json.loads((tmp_path / "kb" / "run.json").read_text())["keep_browser_actions"] is True
    proc = run_cli(["approve", "kb", *base], probe.desktop)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first, second = gemini.requests
    assert first.computer_use_tool() == second.computer_use_tool()
    assert not (first.computer_use_tool() or {}).get("excludedPredefinedFunctions")


@pytest.mark.desktop
def test_denial_from_the_shell(probe: Probe, gemini: GeminiStandIn, tmp_path: Path) -> None:
    gemini.script(confirm_reply(), Reply.text("never"))
    base = ["--runs-dir", str(tmp_path)]
    proc = run_cli(
        ["run", "--vnc", probe.desktop.server, "--task", "Submit", "--thread-id", "t2", *base],
        probe.desktop,
    )
    assert proc.returncode == 3
    proc = run_cli(["deny", "t2", *base], probe.desktop)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "status: denied" in proc.stdout
    assert probe.log.events("press") == []
    assert len(gemini.requests) == 1


@pytest.mark.desktop
def test_interactive_approval_on_a_terminal(
    probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    gemini.script(confirm_reply(), Reply.text("approved at the prompt"))
    master, slave = pty.openpty()
    try:
        os.write(master, b"y\n")  # the terminal line discipline holds it until input() reads
        proc = run_cli(
            ["run", "--vnc", probe.desktop.server, "--task", "Submit", "--runs-dir", str(tmp_path)],
            probe.desktop,
            stdin=slave,
        )
    finally:
        os.close(slave)
        os.close(master)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Allow it? [y/n]" in proc.stdout and "Submits the form." in proc.stdout
    assert probe.log.wait_type("press")["y"] == 540


@pytest.mark.desktop
def test_budget_exit_code(probe: Probe, gemini: GeminiStandIn, tmp_path: Path) -> None:
    gemini.script(*[Reply.calls(FunctionCallSpec("hover_at", x=i, y=i)) for i in range(5)])
    proc = run_cli(
        [
            *("run", "--vnc", probe.desktop.server, "--task", "Hover"),
            *("--step-limit", "1", "--runs-dir", str(tmp_path)),
        ],
        probe.desktop,
    )
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "status: step_limit" in proc.stdout


@pytest.mark.desktop
def test_a_refused_turn_exits_6_never_0(
    probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """Issue 17 item 1: a blocked prompt exited 0 with status done and an empty answer."""
    gemini.script(Reply.no_candidates("SAFETY"))
    base = ["--runs-dir", str(tmp_path)]
    proc = run_cli(
        ["run", "--vnc", probe.desktop.server, "--task", "x", "--thread-id", "r", *base],
        probe.desktop,
    )
    assert proc.returncode == 6, proc.stdout + proc.stderr
    assert "status: blocked" in proc.stdout
    assert "(no text) (blocked: PROMPT_BLOCKED:SAFETY)" in proc.stdout  # not "no more actions"
    assert proc.stderr.strip().splitlines()[-1] == "vnc-use: the API blocked the request: SAFETY"
    listed = run_cli(["runs", *base])
    assert re.search(r"^r\s+blocked\s", listed.stdout, re.M), listed.stdout
    shown = run_cli(["show", "r", *base])
    assert "status: blocked" in shown.stdout
    assert "error: the API blocked the request: SAFETY" in shown.stdout

    gemini.script(Reply.no_content("PROHIBITED_CONTENT"))
    proc = run_cli(
        ["run", "--vnc", probe.desktop.server, "--task", "x", "--json", *base], probe.desktop
    )
    assert proc.returncode == 6, proc.stdout + proc.stderr
    final = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (final["event"], final["status"], final["error"]) == (
        "run_ended",
        "blocked",
        "the API blocked the model's answer: PROHIBITED_CONTENT",
    )


@pytest.mark.desktop
def test_a_call_marked_blocked_exits_6_and_never_runs(
    probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """Issue 17 item 2: a ``blocked`` decision paused for approval (exit 3)."""
    blocked = {"decision": "blocked", "explanation": "Transfers money."}
    gemini.script(
        Reply.calls(FunctionCallSpec("click_at", x=600, y=600, safety_decision=blocked)),
        Reply.text("never"),
    )
    proc = run_cli(
        ["run", "--vnc", probe.desktop.server, "--task", "Pay", "--runs-dir", str(tmp_path)],
        probe.desktop,
    )
    assert proc.returncode == 6, proc.stdout + proc.stderr
    assert "click_at blocked: Transfers money." in proc.stderr
    assert "approve" not in proc.stdout
    assert len(gemini.requests) == 1
    assert probe.log.events("press") == []


@pytest.mark.desktop
def test_an_empty_answer_exits_1_then_resumes(
    probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """Issue 17 item 1: an answer without candidates exited 0 (done); now it is asked again,
    then the run fails resumably."""
    gemini.script(*[Reply.no_candidates()] * 4)
    base = ["--runs-dir", str(tmp_path)]
    proc = run_cli(
        ["run", "--vnc", probe.desktop.server, "--task", "x", "--thread-id", "e", *base],
        probe.desktop,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "NO_CANDIDATES 4 times in a row" in proc.stderr
    assert len(gemini.requests) == 4
    gemini.script(Reply.text("Finished."))
    proc = run_cli(["resume", "e", *base], probe.desktop)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "answer: Finished." in proc.stdout


@pytest.mark.desktop
def test_kill_9_mid_run_then_resume_from_a_new_process(
    probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """SIGKILL while the model is thinking; a new process resumes and nothing is lost or redone."""
    replies = {
        0: Reply.calls(FunctionCallSpec("click_at", x=100, y=100)),
        2: Reply.calls(FunctionCallSpec("click_at", x=200, y=200)),
        3: Reply.text("finished after the crash"),
    }
    reached, release = threading.Event(), threading.Event()

    def script(body: Any, index: int) -> Reply:
        if index == 1:  # the second model call: the process is killed while it waits
            reached.set()
            release.wait(30)
            return Reply.text("too late: the asker is dead")
        return replies[index]

    gemini.script(script)
    base = ["--runs-dir", str(tmp_path)]
    env = {**os.environ, "VNC_PASSWORD": probe.desktop.password}
    proc = subprocess.Popen(
        [
            *(*CLI, "run", "--vnc", probe.desktop.server, "--task", "Click twice"),
            *("--thread-id", "crashy", *base),
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        assert reached.wait(30), "the CLI never asked the model a second time"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        release.set()
        if proc.poll() is None:
            proc.kill()
        assert proc.stdout is not None
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL

    resumed = run_cli(["resume", "crashy", *base], probe.desktop)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "finished after the crash" in resumed.stdout
    probe.log.wait_type("press", x=288, y=180)
    assert [(e["x"], e["y"]) for e in probe.log.events("press")] == [(144, 90), (288, 180)]


# ------------------------------------------------------------------ API version (issue 17 item 6)


@pytest.mark.desktop
def test_requests_go_to_v1beta_unless_the_user_chooses(
    desktop: TestDesktop, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """google-genai 3 sends /v1/; Google's Computer Use examples all use v1beta. The default is
    v1beta; ``GEMINI_API_VERSION`` and ``--api-version`` choose another; run.json keeps it."""
    gemini.api_versions = ("v1", "v1beta")
    gemini.script(Reply.text("one"), Reply.text("two"), Reply.text("three"))
    base = ["--vnc", desktop.server, "--task", "Look", "--runs-dir", str(tmp_path)]
    runs = {
        "default": ([], {}),
        "by-env": ([], {"GEMINI_API_VERSION": "v1"}),
        "by-flag": (["--api-version", "v1"], {"GEMINI_API_VERSION": "v1beta"}),  # flag wins
    }
    for thread, (flags, env) in runs.items():
        proc = run_cli(["run", *base, "--thread-id", thread, *flags], desktop, env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [r.path.split("/")[1] for r in gemini.requests] == ["v1beta", "v1", "v1"]
    kept = {t: json.loads((tmp_path / t / "run.json").read_text())["api_version"] for t in runs}
    assert kept == {"default": "v1beta", "by-env": "v1", "by-flag": "v1"}


@pytest.mark.desktop
def test_resume_goes_to_the_runs_api_version(
    desktop: TestDesktop, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    gemini.api_versions = ("v1", "v1beta")
    gemini.script(Reply.error(400, "a bad request, once"), Reply.text("resumed"))
    base = ["--runs-dir", str(tmp_path)]
    args = ["--vnc", desktop.server, "--task", "Look", "--thread-id", "v1run"]
    proc = run_cli(["run", *args, "--api-version", "v1", *base], desktop)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert json.loads((tmp_path / "v1run" / "run.json").read_text())["api_version"] == "v1"
    proc = run_cli(["resume", "v1run", *base], desktop)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "answer: resumed" in proc.stdout
    assert [r.api_version for r in gemini.requests] == ["v1", "v1"]


@pytest.mark.desktop
def test_a_version_the_api_does_not_serve_ends_the_run_with_the_fix(
    desktop: TestDesktop, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    gemini.script(Reply.text("never sent"))  # the stand-in serves v1beta only
    args = ["--vnc", desktop.server, "--task", "Look", "--thread-id", "nov1"]
    proc = run_cli(["run", *args, "--api-version", "v1", "--runs-dir", str(tmp_path)], desktop)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "status: error" in proc.stdout
    line = _one_line_error(proc)
    assert "404" in line and "API version v1" in line
    assert "--api-version v1beta" in line and "GEMINI_API_VERSION" in line
    assert [r.api_version for r in gemini.requests] == ["v1"] and gemini.remaining == 1


# ------------------------------------------------------------------ bad input, one line each


def _one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("vnc-use:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_missing_api_key(desktop: TestDesktop, tmp_path: Path) -> None:
    env = {"GOOGLE_API_KEY": "", "GEMINI_API_KEY": ""}
    proc = run_cli(
        ["run", "--vnc", desktop.server, "--task", "x", "--runs-dir", str(tmp_path)],
        desktop,
        env=env,
    )
    assert proc.returncode == 2
    assert "GOOGLE_API_KEY" in _one_line_error(proc)


def test_wrong_vnc_password(desktop: TestDesktop, gemini: GeminiStandIn, tmp_path: Path) -> None:
    proc = run_cli(
        ["run", "--vnc", desktop.server, "--task", "x", "--runs-dir", str(tmp_path)],
        env={"VNC_PASSWORD": "wrong-pw"},
    )
    assert proc.returncode == 1
    assert "password" in _one_line_error(proc).lower()
    assert "wrong-pw" not in proc.stdout + proc.stderr
    assert gemini.requests == []


def test_malformed_address(gemini: GeminiStandIn, tmp_path: Path) -> None:
    proc = run_cli(["run", "--vnc", "host::notaport", "--task", "x", "--runs-dir", str(tmp_path)])
    assert proc.returncode == 2
    assert "host::notaport" in _one_line_error(proc)


def test_unknown_run(tmp_path: Path) -> None:
    proc = run_cli(["approve", "nosuchrun", "--runs-dir", str(tmp_path)])
    assert proc.returncode == 2
    assert "nosuchrun" in _one_line_error(proc)


def test_bad_usage_is_exit_2() -> None:
    proc = run_cli(["run", "--vnc", "127.0.0.1::5900"])  # no --task (--vnc may be left out)
    assert proc.returncode == 2
    assert "--task" in proc.stderr


@pytest.mark.desktop
def test_readme_offline_flow_with_the_stand_in_command(probe: Probe, tmp_path: Path) -> None:
    """docs/testing-offline.md's recipe: the stand-in as a command, `vnc-use run` pointed at it
    (the page's script.json, as its ``echo`` line writes it)."""
    (recipe,) = blocks(page("testing-offline.md"), "bash")
    echoed = re.search(r"^echo '(.*)' > script\.json$", recipe, re.M)
    assert echoed is not None, recipe
    assert "gemini_standin --script script.json" in recipe and '--task "Click the middle"' in recipe
    script = tmp_path / "script.json"
    script.write_text(echoed.group(1))
    assert json.loads(script.read_text()) == [
        {"calls": [{"name": "click_at", "args": {"x": 500, "y": 500}}]},
        {"text": "done"},
    ]
    standin = subprocess.Popen(
        [sys.executable, "-m", "vnc_use.testing.gemini_standin", "--script", str(script)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert standin.stdout is not None
        base_url = standin.stdout.readline().strip()
        proc = subprocess.run(
            [
                *(str(Path(sys.executable).parent / "vnc-use"), "run"),
                *("--vnc", probe.desktop.server, "--task", "Click the middle"),
                *("--runs-dir", str(tmp_path / "runs")),
            ],
            env={
                **os.environ,
                "GOOGLE_GEMINI_BASE_URL": base_url,
                "GOOGLE_API_KEY": "dummy",
                "VNC_PASSWORD": probe.desktop.password,
            },
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    finally:
        standin.terminate()
        standin.wait(timeout=10)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    press = probe.log.wait_type("press")
    assert (press["x"], press["y"]) == (720, 450)
