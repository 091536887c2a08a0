"""A custom function across a crash: the journal answers it on resume (issue 17 item 10).

The agent runs in a child process on a FakeDesktop and is killed with SIGKILL right after the
journal recorded the custom function as done, before the step's checkpoint was written: the
moment where, before the fix, the resumed run answered the call with "Unknown function".
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from google.genai import types

from vnc_use import VncUseAgent
from vnc_use.providers.gemini.planner import CustomFunction, GeminiComputerUse
from vnc_use.store.journal import call_key
from vnc_use.store.storage import open_storage
from vnc_use.testing import FakeDesktop
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply

FAST = {"retry_initial_delay": 0.01, "retry_max_delay": 0.05}

# The child: one run with the custom function `lookup`, killed by SIGKILL as soon as the
# journal says `lookup` is done (the checkpoint of that step is never written), or, with the
# argument "running", while `lookup` runs (after it did its work, before it returned).
CHILD = """
import os, signal, sys
from pathlib import Path

from google.genai import types

from vnc_use import VncUseAgent
from vnc_use.store import journal
from vnc_use.providers.gemini.planner import CustomFunction, GeminiComputerUse
from vnc_use.testing import FakeDesktop

runs, calls, crash_at = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
record_done = journal.Journal.done


def done_then_die(self, *args, **kwargs):
    record_done(self, *args, **kwargs)
    if args[1] == "lookup" and crash_at == "done":
        os.kill(os.getpid(), signal.SIGKILL)


journal.Journal.done = done_then_die


def lookup(item):
    with calls.open("a") as fh:
        fh.write(item + "\\n")
    if crash_at == "running":
        os.kill(os.getpid(), signal.SIGKILL)
    return {"item": item, "price": 42}


declaration = types.FunctionDeclaration(
    name="lookup",
    description="The price of an item.",
    parameters=types.Schema(
        type=types.Type.OBJECT,
        properties={"item": types.Schema(type=types.Type.STRING)},
        required=["item"],
    ),
)
planner = GeminiComputerUse(
    custom_functions=[CustomFunction("lookup", declaration, lookup)],
    retry_initial_delay=0.01,
    retry_max_delay=0.05,
)
with VncUseAgent(desktop=FakeDesktop(1440, 900), runs_dir=runs, planner=planner) as agent:
    agent.run(task="Price of tea, then click", thread_id="cf")
print("the run was not killed")
"""


def _declaration() -> types.FunctionDeclaration:
    return types.FunctionDeclaration(
        name="lookup",
        description="The price of an item.",
        parameters=types.Schema(
            type=types.Type.OBJECT,
            properties={"item": types.Schema(type=types.Type.STRING)},
            required=["item"],
        ),
    )


def _crash_then_resume(
    gemini: GeminiStandIn, tmp_path: Path, crash_at: str, **settings: Any
) -> tuple[Any, FakeDesktop, list[Any]]:
    """Run the child until it is killed at ``crash_at``, then resume it in this process with a
    ``lookup`` that records any call; returns the result, the desktop and those calls."""
    gemini.script(
        Reply.calls(
            FunctionCallSpec("lookup", item="tea"), FunctionCallSpec("click_at", x=500, y=500)
        ),
        Reply.text("tea costs 42"),
    )
    runs, calls = tmp_path / "runs", tmp_path / "calls.txt"
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    proc = subprocess.run(
        [sys.executable, str(child), str(runs), str(calls), crash_at],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    assert calls.read_text().splitlines() == ["tea"]

    ran_again: list[Any] = []
    planner = GeminiComputerUse(
        custom_functions=[
            CustomFunction("lookup", _declaration(), lambda item: ran_again.append(item) or {})
        ],
        **FAST,
    )
    desk = FakeDesktop(1440, 900)
    with VncUseAgent(desktop=desk, runs_dir=runs, planner=planner, **settings) as agent:
        result = agent.resume("cf")
    assert calls.read_text().splitlines() == ["tea"]
    return result, desk, ran_again


def test_a_custom_function_done_before_a_crash_is_answered_from_the_journal(
    gemini: GeminiStandIn, tmp_path: Path
) -> None:
    result, desk, ran_again = _crash_then_resume(gemini, tmp_path, "done")
    journal = open_storage(None, tmp_path / "runs").journal("cf")
    assert [r["state"] for r in journal.records(call_key(1, 0))] == ["dispatched", "done"]

    assert result.status == "done", result.error
    assert result.final_text == "tea costs 42"
    assert ran_again == []  # not run twice
    # the call after it still runs, once
    assert [(e["x"], e["y"]) for e in desk.events_of("click")] == [(720, 450)]
    # the model hears the recorded result, with a note that it ran before the restart
    first, second = gemini.function_responses(gemini.requests[1])
    assert first["name"] == "lookup"
    response = first["response"]
    assert "error" not in response, response  # before the fix: "Unknown function lookup"
    assert {k: response[k] for k in ("item", "price")} == {"item": "tea", "price": 42}
    assert "before vnc-use restarted" in response["vnc_use_note"]  # act.RESTART_NOTE_KEY
    assert "Unknown function" not in json.dumps(response)
    assert second["name"] == "click_at" and "error" not in second["response"]
    (step,) = [t for t in result.transcript if t["name"] == "lookup"]
    assert step["result"] == "ok" and "not repeated" in step["note"]
    assert not gemini.violations and not gemini.exhausted
    # the result is journaled with the call (what was sent back after the restart)
    assert journal.output(call_key(1, 0)) == {"item": "tea", "price": 42}


def test_a_custom_function_cut_off_by_a_crash_is_not_run_again_without_a_person(
    gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """Killed while it ran: with approvals off it is not run again, and the model is told the
    outcome is unknown (never "Unknown function")."""
    result, desk, ran_again = _crash_then_resume(gemini, tmp_path, "running", hitl_mode=False)
    assert result.status == "done", result.error
    assert ran_again == []
    first, second = gemini.function_responses(gemini.requests[1])
    assert first["name"] == "lookup"
    assert first["response"] == {
        "error": "The outcome of this function is unknown: vnc-use stopped while running it "
        "and did not run it again."
    }
    assert second["name"] == "click_at" and "error" not in second["response"]
    assert [(e["x"], e["y"]) for e in desk.events_of("click")] == [(720, 450)]
    assert not gemini.violations and not gemini.exhausted
