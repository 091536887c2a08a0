"""Live progress of ``vnc-use run``: a terminal (a real pty), a pipe, ``--quiet`` and ``--json``.

The CLI runs as a subprocess against the probe desktop and the Gemini stand-in; the line
format itself is checked on events of the shapes the agent writes.
"""

from __future__ import annotations

import json
import os
import pty
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from vnc_use.cli.progress import LineFormatter, Progress, choose_mode, plain
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply

from desktop_fixtures import Probe
from doc_pages import all_lines

CLI = [sys.executable, "-m", "vnc_use.cli"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
STEP = re.compile(
    r"^step (\d+): (\w+)\((.*)\)( -> px \(\d+, \d+\)( to \(\d+, \d+\))?)?"
    r"  \[[\d.]+ m?s; model [\d.]+ m?s(; \$[\d.]+ so far)?\]"
)


def script(gemini: GeminiStandIn, *, short: bool = False) -> None:
    if short:
        gemini.script(Reply.calls(FunctionCallSpec("click_at", x=100, y=100)), Reply.text("Ok."))
        return
    gemini.script(
        Reply.calls(
            FunctionCallSpec("click_at", x=100, y=100),
            FunctionCallSpec("drag_and_drop", x=200, y=600, destination_x=700, destination_y=850),
            text="Clicking, then dragging.",
        ),
        Reply.calls(FunctionCallSpec("key_combination", keys="control+a")),
        Reply.text("Finished."),
    )


def env_for(probe: Probe) -> dict[str, str]:
    return {**os.environ, "VNC_PASSWORD": probe.desktop.password}


def run_args(probe: Probe, runs: Path, *extra: str) -> list[str]:
    return [
        *CLI,
        *("run", "--vnc", probe.desktop.server, "--task", "Click and drag"),
        *("--runs-dir", str(runs), "--thread-id", "progress", *extra),
    ]


@pytest.mark.desktop
def test_plain_lines_in_a_pipe(probe: Probe, gemini: GeminiStandIn, tmp_path: Path) -> None:
    script(gemini)
    proc = subprocess.run(
        run_args(probe, tmp_path),
        env=env_for(probe),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert not ANSI.search(out), "no terminal codes in a pipe"
    lines = out.splitlines()
    assert lines[0] == (
        f"run progress on {probe.desktop.server} (VncAuth, not encrypted): Click and drag"
    )
    assert lines[1].startswith("  model: Clicking, then dragging.  [model ")
    steps = [m for line in lines if (m := STEP.match(line))]
    assert [(m[1], m[2]) for m in steps] == [
        ("1", "click_at"),
        ("2", "drag_and_drop"),
        ("3", "key_combination"),
    ]
    assert "step 1: click_at(x=100, y=100) -> px (144, 90)  [" in out
    assert "-> px (288, 540) to (1008, 765)  [" in out
    assert "  model: Finished. (no more actions)" in out
    assert "status: done (thread progress, 3 steps)" in out


@pytest.mark.desktop
def test_live_progress_on_a_terminal(probe: Probe, gemini: GeminiStandIn, tmp_path: Path) -> None:
    script(gemini, short=True)
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        run_args(probe, tmp_path),
        env={**env_for(probe), "TERM": "xterm-256color", "COLUMNS": "200"},
        stdout=slave,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the terminal closed: the process has exited
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.wait(60) == 0
    assert proc.stderr is not None
    proc.stderr.close()
    raw = b"".join(chunks).decode("utf-8", "replace")
    assert ANSI.search(raw), "a terminal gets colours"
    assert "waiting for the model (call #1)" in raw  # the spinner's line
    text = ANSI.sub("", raw).replace("\r", "")
    assert "step 1: click_at(x=100, y=100) -> px (144, 90)" in text
    assert "  model: Ok. (no more actions)" in text
    assert "status: done" in text


@pytest.mark.desktop
def test_quiet_prints_only_the_result(probe: Probe, gemini: GeminiStandIn, tmp_path: Path) -> None:
    script(gemini, short=True)
    proc = subprocess.run(
        run_args(probe, tmp_path, "--quiet"),
        env=env_for(probe),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [line.split(":")[0] for line in proc.stdout.splitlines()] == [
        "status",
        "cost",
        "answer",
        "run folder",
    ]


@pytest.mark.desktop
def test_json_lines_are_the_events_and_the_readme_command(
    probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """The docs' ``--json`` command, pointed at the test desktop: one event per line."""
    (command,) = [
        line for line in all_lines() if line.startswith("vnc-use run ") and "--json" in line
    ]
    argv = shlex.split(command.replace("localhost::5901", probe.desktop.server))[1:]
    script(gemini)
    proc = subprocess.run(
        [*CLI, *argv, "--runs-dir", str(tmp_path), "--thread-id", "as-json"],
        env=env_for(probe),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    printed = [json.loads(line) for line in proc.stdout.splitlines()]  # every line is JSON
    on_disk = [
        json.loads(x) for x in (tmp_path / "as-json" / "events.jsonl").read_text().split("\n") if x
    ]
    assert printed == on_disk
    assert printed[-1]["event"] == "run_ended" and printed[-1]["status"] == "done"
    assert [e["name"] for e in printed if e["event"] == "action"] == [
        "click_at",
        "drag_and_drop",
        "key_combination",
    ]
    assert probe.desktop.password not in proc.stdout


# -------------------------------------------------------------------------- the line format


def action(**fields: Any) -> dict[str, Any]:
    return {
        "event": "action",
        "step": 4,
        "name": "type_text_at",
        "args": {"x": 500, "y": 500, "text": "hello"},
        "pixels": {"x": 720, "y": 450},
        "duration_ms": 12.0,
        "error": None,
        "approved": False,
        **fields,
    }


def line(*events: dict[str, Any]) -> str | None:
    fmt = LineFormatter()
    out = None
    for e in events:
        segments = fmt(e)
        out = plain(segments) if segments is not None else None
    return out


def test_step_line_shows_grid_pixels_timings_and_the_model_latency() -> None:
    model = {"event": "model_response", "latency_ms": 1234.0, "text": "", "calls": [{}]}
    assert line(model, action()) == (
        "step 4: type_text_at(x=500, y=500, text='hello') -> px (720, 450)  [12 ms; model 1.2 s]"
    )


def test_sensitive_text_is_hidden_and_intent_is_shown() -> None:
    hidden = line(action(sensitive=True))
    assert hidden is not None and "hello" not in hidden and "text='[REDACTED]'" in hidden
    with_intent = line(
        action(name="click", args={"y": 500, "x": 500, "intent": "open the menu"}, approved=True)
    )
    assert with_intent is not None
    assert with_intent.startswith('step 4: click(y=500, x=500) -> px (720, 450) - "open the menu"')
    assert with_intent.endswith("(approved)")


def test_errors_notes_and_bookkeeping_events() -> None:
    failed = line(action(error="Invalid arguments", pixels={}))
    assert failed is not None and failed.endswith("ERROR: Invalid arguments")
    assert "->" not in failed
    assert line(action(note="performed before the agent restarted; not repeated")) is not None
    assert line({"event": "screenshot", "settled": True, "waited_ms": 40}) is None
    unsettled = line({"event": "screenshot", "settled": False, "waited_ms": 1000})
    assert unsettled == "  the screen was still changing after 1.0 s"
    assert line({"event": "connection_lost", "message": "gone"}) == "  connection_lost: gone"
    assert line({"event": "denied", "name": "click_at", "by": "policy", "reason": "no"}) == (
        "  denied by policy: click_at - no"
    )


def test_modes_follow_the_output(tmp_path: Path) -> None:
    with (tmp_path / "out.txt").open("w") as stream:
        assert choose_mode(quiet=False, json_lines=False, stream=stream) == "plain"
        assert choose_mode(quiet=True, json_lines=False, stream=stream) == "quiet"
        assert choose_mode(quiet=True, json_lines=True, stream=stream) == "json"
        progress = Progress("json", stream)
        progress({"event": "run_ended", "status": "done", "text": "é"})
    assert json.loads((tmp_path / "out.txt").read_text("utf-8")) == {
        "event": "run_ended",
        "status": "done",
        "text": "é",
    }
