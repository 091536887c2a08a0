"""The LangGraph agent end to end: the Gemini stand-in, a real VNC desktop, the probe app.

Every test drives a real TigerVNC desktop through the real vncdotool and the real google-genai
SDK (talking HTTP to the stand-in), and asserts on what the desktop received, on RunResult,
on the run folder and on the requests that went over the wire. The graph's routing,
approvals, budgets and resume run on the in-memory FakeDesktop in ``test_agent_graph.py``.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vnc_use import VncUseAgent
from vnc_use.agent import AgentSettings
from vnc_use.errors import ConfigError
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.gemini_standin import (
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    require_confirmation,
)

from desktop_fixtures import Probe

pytestmark = pytest.mark.desktop

FAST = {"retry_initial_delay": 0.01, "retry_max_delay": 0.05}


def grid(probe: Probe, x: int, y: int) -> tuple[int, int]:
    """The 0-999 grid point the model would use for pixel (x, y) of the probe's screen."""
    w, h = probe.size
    return round(x * 1000 / w), round(y * 1000 / h)


@pytest.fixture
def make_agent(tmp_path: Path, gemini: GeminiStandIn) -> Iterator[Any]:
    agents: list[VncUseAgent] = []

    def factory(probe: Probe, **kwargs: Any) -> VncUseAgent:
        planner_kwargs = {
            "excluded_actions": kwargs.pop("excluded_actions", None),
            "keep_screenshots": kwargs.get("keep_screenshots", 3),
            **FAST,
        }
        agent = VncUseAgent(
            vnc_server=probe.desktop.server,
            vnc_password=probe.desktop.password,
            runs_dir=kwargs.pop("runs_dir", tmp_path / "runs"),
            planner=GeminiComputerUse(**planner_kwargs),
            **kwargs,
        )
        agents.append(agent)
        return agent

    yield factory
    for agent in agents:
        agent.close()


def presses(probe: Probe) -> list[tuple[int, int]]:
    return [(e["x"], e["y"]) for e in probe.log.events("press")]


# --------------------------------------------------------------------------- the loop


def test_end_to_end_typing_into_the_probe(
    probe: Probe, gemini: GeminiStandIn, make_agent: Any
) -> None:
    """A scripted run types a sentence into the probe's entry and submits it."""
    ex, ey = grid(probe, *probe.entry_center)
    sentence = "The quick brown fox: 42 jumps!"
    gemini.script(
        Reply.calls(FunctionCallSpec("click_at", x=ex, y=ey), text="I'll click the field."),
        Reply.calls(FunctionCallSpec("type_text_at", x=ex, y=ey, text=sentence, press_enter=True)),
        Reply.calls(FunctionCallSpec("hover_at", x=500, y=500)),
        Reply.calls(FunctionCallSpec("key_combination", keys="End")),
        Reply.text("Typed and submitted."),
    )
    agent = make_agent(probe)
    result = agent.run(task="Type a sentence into the text field and press Enter")

    assert result.status == "done", result.error
    assert result.steps == 4
    submit = probe.log.wait_type("submit")
    assert submit["text"] == sentence
    # artifacts: one PNG and one JSON per step, request/response JSON per model call, events
    run_dir = Path(result.run_dir)
    assert sorted(p.name for p in (run_dir / "steps").glob("*.png")) == [
        "0001-click_at.png",
        "0002-type_text_at.png",
        "0003-hover_at.png",
        "0004-key_combination.png",
    ]
    assert len(list((run_dir / "model").glob("*-request.json"))) == 5
    assert len(list((run_dir / "model").glob("*-response.json"))) == 5
    step2 = json.loads((run_dir / "steps" / "0002-type_text_at.json").read_text())
    assert step2["args"]["text"] == sentence
    assert step2["pixels"] == {"x": probe.entry_center[0], "y": probe.entry_center[1]}
    request5 = json.loads((run_dir / "model" / "0005-request.json").read_text())
    blobs = [
        fr_part["inline_data"]
        for c in request5["contents"]
        for part in c["parts"]
        if "function_response" in part
        for fr_part in part["function_response"].get("parts", [])
    ]
    assert blobs and all(set(b) == {"mime_type", "sha256", "bytes"} for b in blobs)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_ended"
    assert kinds.count("action") == 4 and kinds.count("model_response") == 5
    # only the last 3 screenshots go to the model: the 5th request carries 3 images, and the
    # initial screenshot is dropped from it while its text stays
    assert [len(r.image_parts()) for r in gemini.requests] == [1, 2, 3, 3, 3]
    first_turn = gemini.requests[4].contents()[0]
    assert [p.get("text") for p in first_turn["parts"]] == [
        "Type a sentence into the text field and press Enter"
    ]
    assert not gemini.violations and not gemini.exhausted


def test_model_mistakes_are_answered_not_fatal(
    probe: Probe, gemini: GeminiStandIn, make_agent: Any
) -> None:
    """Unknown functions, bad arguments, excluded actions: errors for the model; the run goes on."""
    gemini.script(
        Reply.calls(
            FunctionCallSpec("teleport", x=1, y=2),
            FunctionCallSpec("click_at", x=2000, y=5),
            FunctionCallSpec("drag_and_drop", x=1, y=1, destination_x=5, destination_y=5),
            FunctionCallSpec("key_combination", keys="control+nosuchkey"),
            FunctionCallSpec("click_at", x=500, y=500),
        ),
        Reply.text("recovered"),
    )
    agent = make_agent(probe, excluded_actions=["drag_and_drop"])
    result = agent.run(task="Do things")

    assert result.status == "done", result.error
    assert [t["result"] for t in result.transcript] == ["error"] * 4 + ["ok"]
    responses = gemini.requests[1].function_responses()
    assert [r["name"] for r in responses] == [
        "teleport",
        "click_at",
        "drag_and_drop",
        "key_combination",
        "click_at",
    ]
    errors = [r["response"].get("error", "") for r in responses]
    assert "Unknown function 'teleport'" in errors[0]
    assert "x" in errors[1] and "999" in errors[1]
    assert "not available" in errors[2]
    assert "nosuchkey" in errors[3]
    assert errors[4] == ""
    assert all(len(r["images"]) == 1 for r in responses)  # every call answered with a PNG
    probe.log.wait_type("press")
    assert presses(probe) == [(720, 450)]  # only the valid click reached the desktop


# ----------------------------------------------------------------- safety marks (issue 17)


def test_a_call_marked_blocked_never_reaches_the_desktop_the_gate_or_an_acknowledgement(
    probe: Probe, gemini: GeminiStandIn, make_agent: Any
) -> None:
    """Issue 17 item 2: a ``blocked`` decision waited for approval (and, approved, ran with an
    acknowledgement). Now its turn ends the run ``blocked`` before any call of it runs, the
    unmarked call before it included; the model is never answered."""
    blocked = {"decision": "blocked", "explanation": "Deletes the account."}
    gemini.script(
        Reply.calls(
            FunctionCallSpec("click_at", x=300, y=300),
            FunctionCallSpec("click_at", x=600, y=600, safety_decision=blocked),
        ),
        Reply.text("never asked"),
    )
    agent = make_agent(probe)
    result = agent.run(task="Delete my account", thread_id="blocked")
    assert result.status == "blocked", result
    assert result.error == (
        "the model marked its call click_at blocked: Deletes the account.; "
        "no call of that turn was run or acknowledged"
    )
    assert result.pending_call is None and result.transcript == []
    assert len(gemini.requests) == 1  # no acknowledgement, no answer at all
    kinds = [e["event"] for e in _events(result)]
    assert "blocked" in kinds
    assert not {"approved", "denied", "action", "run_paused"} & set(kinds)
    # nothing reached the desktop: a later run's click arrives alone
    gemini.script(Reply.calls(FunctionCallSpec("click_at", x=500, y=500)), Reply.text("ok"))
    assert agent.run(task="Click the middle", thread_id="after").status == "done"
    probe.log.wait_type("press")
    assert presses(probe) == [(720, 450)]


def test_an_invalid_confirmation_call_is_acknowledged_with_its_error_and_never_run(
    probe: Probe, gemini: GeminiStandIn, make_agent: Any
) -> None:
    """Issue 17 item 3: a confirmation-required call with invalid arguments was answered with
    its error and no acknowledgement, nobody asked. Now a person sees the call and its error;
    approved, the model gets the error and the acknowledgement, and nothing runs."""
    gemini.script(
        Reply.calls(
            FunctionCallSpec(
                "click_at", x=2000, y=5, safety_decision=require_confirmation("Submits it.")
            )
        ),
        Reply.text("understood"),
    )
    agent = make_agent(probe)
    paused = agent.run(task="Submit", thread_id="invalid")
    assert paused.status == "awaiting_approval", paused
    pending = paused.pending_call or {}
    assert (pending["name"], pending["explanation"]) == ("click_at", "Submits it.")
    assert "999" in pending["error"]
    result = agent.approve("invalid")
    assert result.status == "done", result.error
    (step,) = result.transcript
    assert (step["result"], step["approved"]) == ("error", True)
    (response,) = gemini.requests[1].function_responses()
    assert response["response"]["safety_acknowledgement"] == "true"
    assert "999" in response["response"]["error"]
    assert not gemini.violations
    gemini.script(Reply.calls(FunctionCallSpec("click_at", x=500, y=500)), Reply.text("ok"))
    assert agent.run(task="Click the middle", thread_id="after").status == "done"
    probe.log.wait_type("press")
    assert presses(probe) == [(720, 450)]  # the invalid call never reached the desktop


def _events(result: Any) -> list[dict[str, Any]]:
    lines = Path(result.run_dir, "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


# ---------------------------------------------------------------------------- secrets


def test_secrets_never_reach_artifacts_or_checkpoints(
    probe: Probe, gemini: GeminiStandIn, make_agent: Any, tmp_path: Path
) -> None:
    from gemini_fixtures import DUMMY_API_KEY

    gemini.script(Reply.calls(FunctionCallSpec("click_at", x=10, y=10)), Reply.text("ok"))
    runs = tmp_path / "secret-runs"
    result = make_agent(probe, runs_dir=runs).run(task="Click")
    assert result.status == "done"
    assert gemini.requests[0].api_key == DUMMY_API_KEY  # the key did go to the API...
    password = probe.desktop.password.encode()
    db = runs / "vnc-use.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    for path in runs.rglob("*"):
        if path.is_file() and path.suffix != ".png":
            data = path.read_bytes()
            assert DUMMY_API_KEY.encode() not in data, path  # ...and nowhere else
            assert password not in data, path


# ----------------------------------------------------------------------- a real terminal


@pytest.fixture(scope="module")
def xterm_desktop() -> Iterator[TestDesktop]:
    """A desktop of its own (no probe covering it) with one xterm at the top left."""
    with TestDesktop(1280, 800) as desk:
        desk.launch(["xterm", "-geometry", "100x30+0+0", "-fa", "DejaVu Sans Mono", "-fs", "11"])
        deadline = time.monotonic() + 20
        while (
            subprocess.run(
                ["xwininfo", "-name", "xterm"], env=desk.env, capture_output=True
            ).returncode
            != 0
        ):
            assert time.monotonic() < deadline, "xterm did not map its window"
            time.sleep(0.05)
        yield desk


def test_end_to_end_shell_command_in_xterm(
    xterm_desktop: TestDesktop, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """The model clicks into a terminal and types a command; the file it writes is checked."""
    out = tmp_path / "written-by-the-agent.txt"
    command = f"printf 'hello from %s\\n' vnc-use > {out}"
    gemini.script(
        Reply.calls(
            FunctionCallSpec("type_text_at", x=200, y=200, text=command, press_enter=True),
            text="I'll type the command into the terminal.",
        ),
        Reply.text("The file is written."),
    )
    with VncUseAgent(
        vnc_server=xterm_desktop.server,
        vnc_password=xterm_desktop.password,
        runs_dir=tmp_path / "runs",
        planner=GeminiComputerUse(**FAST),
    ) as agent:
        result = agent.run(task="Write a greeting into a file from the terminal")
    assert result.status == "done", result.error
    assert result.transcript[0]["pixels"] == {"x": 256, "y": 160}
    deadline = time.monotonic() + 10
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert out.read_text() == "hello from vnc-use\n"
    assert not gemini.violations


def test_settings_passed_in_are_honoured_and_never_mutated(tmp_path: Path) -> None:
    """Issue 17 item 8: the constructor's defaults replaced the caller's settings, in place."""
    mine = AgentSettings(step_limit=5, seconds_timeout=42.0, hitl_mode=False, keep_screenshots=1)
    agent = VncUseAgent(settings=mine, runs_dir=tmp_path)
    try:
        got = agent.settings
        assert (got.step_limit, got.seconds_timeout, got.hitl_mode, got.keep_screenshots) == (
            5,
            42.0,
            False,
            1,
        )
        assert got is not mine
        # an argument given to the constructor wins over the settings object, in the copy only
        other = VncUseAgent(settings=mine, step_limit=9, runs_dir=tmp_path)
        assert other.settings.step_limit == 9 and other.settings.hitl_mode is False
        other.close()
        assert mine == AgentSettings(
            step_limit=5, seconds_timeout=42.0, hitl_mode=False, keep_screenshots=1
        )
    finally:
        agent.close()
    with pytest.raises(ConfigError, match="step_limit must be at least 1, got 0"):
        VncUseAgent(settings=AgentSettings(step_limit=0), runs_dir=tmp_path)
