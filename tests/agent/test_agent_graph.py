"""The agent's graph on the in-memory FakeDesktop: the order of calls, approvals, budgets,
API faults, resume and checkpointers.

These tests exercise routing, the journal and the run record, not the desktop: they run on
``vnc_use.testing.FakeDesktop`` (milliseconds a step) with the real google-genai SDK talking
HTTP to the Gemini stand-in. That real input lands on a real desktop is proven by the
end-to-end tests in ``test_agent.py`` and ``test_reliability.py``.
"""

from __future__ import annotations

import html
import io
import json
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from vnc_use import VncUseAgent
from vnc_use.agent import AgentSettings
from vnc_use.errors import ConfigError
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.record.report import REPORT_NAME
from vnc_use.record.runs import list_runs
from vnc_use.testing import FakeDesktop
from vnc_use.testing.gemini_standin import (
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    require_confirmation,
)

from gemini_fixtures import NotJsonHandler

FAST = {"retry_initial_delay": 0.01, "retry_max_delay": 0.05}
WIDTH, HEIGHT = 1440, 900


@pytest.fixture
def desk() -> FakeDesktop:
    return FakeDesktop(WIDTH, HEIGHT)


@pytest.fixture
def make_agent(tmp_path: Path, desk: FakeDesktop) -> Iterator[Any]:
    agents: list[VncUseAgent] = []

    def factory(**kwargs: Any) -> VncUseAgent:
        planner_kwargs = {
            "excluded_actions": kwargs.pop("excluded_actions", None),
            "keep_screenshots": kwargs.get("keep_screenshots", 3),
            **FAST,
        }
        agent = VncUseAgent(
            desktop=kwargs.pop("desktop", desk),
            runs_dir=kwargs.pop("runs_dir", tmp_path / "runs"),
            planner=GeminiComputerUse(**planner_kwargs),
            **kwargs,
        )
        agents.append(agent)
        return agent

    yield factory
    for agent in agents:
        agent.close()


def clicks(desk: FakeDesktop) -> list[tuple[int, int]]:
    return [(e["x"], e["y"]) for e in desk.events_of("click")]


def events(result: Any) -> list[dict[str, Any]]:
    lines = Path(result.run_dir, "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


# --------------------------------------------------------------------------- the loop


def test_sequential_function_calls(
    desk: FakeDesktop, gemini: GeminiStandIn, make_agent: Any
) -> None:
    """One answer with three calls: executed one by one, in order, answered together."""
    points = [(100, 700), (900, 120), (500, 500)]
    gemini.script(
        Reply.calls(*(FunctionCallSpec("click_at", x=gx, y=gy) for gx, gy in points)),
        Reply.text("clicked three times"),
    )
    result = make_agent().run(task="Click three places")

    assert result.status == "done", result.error
    assert result.final_text == "clicked three times"
    assert [t["name"] for t in result.transcript] == ["click_at"] * 3
    expected = [(round(gx / 1000 * WIDTH), round(gy / 1000 * HEIGHT)) for gx, gy in points]
    assert [(t["pixels"]["x"], t["pixels"]["y"]) for t in result.transcript] == expected
    assert clicks(desk) == expected
    # the second request answers all three calls in one user turn, in order, each with a PNG
    second = gemini.requests[1]
    turn = second.contents()[-1]
    frs = [p["functionResponse"] for p in turn["parts"]]
    assert [fr["name"] for fr in frs] == ["click_at"] * 3
    for fr in frs:
        assert fr["response"] == {"url": ""}
        (img,) = [p["inlineData"]["bytes"] for p in fr["parts"]]
        assert Image.open(io.BytesIO(img)).size == (WIDTH, HEIGHT)
    # each answer shows the screen after its own click: the three screenshots differ
    shots = [fr["parts"][0]["inlineData"]["bytes"] for fr in frs]
    assert len(set(shots)) == 3
    assert not gemini.violations and not gemini.exhausted
    run = json.loads(Path(result.run_dir, "run.json").read_text())
    assert run["desktop"] == "FakeDesktop" and run["vnc_server"] is None  # every key, null
    started = events(result)[0]
    assert started["event"] == "run_started" and started["desktop"] == "FakeDesktop"


# ------------------------------------------------------------------------- approvals


def _confirm_script() -> list[Reply]:
    return [
        Reply.calls(
            FunctionCallSpec(
                "click_at",
                x=250,
                y=250,
                safety_decision=require_confirmation("Clicking accepts the terms."),
            ),
            text="I need to accept the terms.",
        ),
        Reply.text("accepted"),
    ]


def test_hitl_block_then_approve(desk: FakeDesktop, gemini: GeminiStandIn, make_agent: Any) -> None:
    gemini.script(*_confirm_script())
    agent = make_agent()
    paused = agent.run(task="Accept the terms", thread_id="approve-me")

    assert paused.status == "awaiting_approval"
    assert paused.pending_call is not None
    assert paused.pending_call["name"] == "click_at"
    assert paused.pending_call["explanation"] == "Clicking accepts the terms."
    assert paused.pending_call["pixels"] == {"x": 360, "y": 225}
    assert desk.events == []  # nothing executed while waiting
    assert len(gemini.requests) == 1

    # a fresh agent (as another process would) approves from the checkpoint
    agent.close()
    result = make_agent().approve("approve-me")
    assert result.status == "done", result.error
    assert result.transcript[0]["approved"] is True
    assert clicks(desk) == [(360, 225)]
    (response,) = gemini.requests[1].function_responses()
    assert response["response"] == {"url": "", "safety_acknowledgement": "true"}
    assert not gemini.violations


def test_hitl_block_then_deny(desk: FakeDesktop, gemini: GeminiStandIn, make_agent: Any) -> None:
    gemini.script(*_confirm_script())
    agent = make_agent()
    paused = agent.run(task="Accept the terms", thread_id="deny-me")
    assert paused.status == "awaiting_approval"

    result = agent.deny("deny-me")
    assert result.status == "denied"
    assert "Clicking accepts the terms." in (result.error or "")
    assert [(t["name"], t["result"]) for t in result.transcript] == [("click_at", "denied")]
    assert desk.events == []
    assert len(gemini.requests) == 1  # the model is not asked again
    # a denied run is final: resuming does nothing
    assert agent.resume("deny-me").status == "denied"
    assert desk.events == []


def test_no_hitl_never_runs_a_confirmation_action(
    desk: FakeDesktop, gemini: GeminiStandIn, make_agent: Any
) -> None:
    gemini.script(*_confirm_script())
    result = make_agent(hitl_mode=False).run(task="Accept the terms")
    assert result.status == "denied"
    assert "hitl_mode is off" in (result.error or "")
    assert desk.events == []


def _invalid_confirm_script() -> list[Reply]:
    call = FunctionCallSpec(
        "click_at", x=5000, y=10, safety_decision=require_confirmation("Submits the form.")
    )
    return [Reply.calls(call), Reply.text("never")]


def test_an_invalid_confirmation_call_waits_for_a_person_then_a_denial_ends_the_run(
    desk: FakeDesktop, gemini: GeminiStandIn, make_agent: Any
) -> None:
    """Issue 17 item 3: it was answered with its error and no acknowledgement, nobody asked."""
    gemini.script(*_invalid_confirm_script())
    agent = make_agent()
    paused = agent.run(task="Submit", thread_id="invalid-deny")
    assert paused.status == "awaiting_approval", paused
    pending = paused.pending_call or {}
    assert pending["explanation"] == "Submits the form." and "999" in pending["error"]
    result = agent.deny("invalid-deny")
    assert result.status == "denied"
    assert [(t["name"], t["result"]) for t in result.transcript] == [("click_at", "denied")]
    assert len(gemini.requests) == 1 and desk.events == []


def test_no_hitl_denies_an_invalid_confirmation_call_like_any_other(
    desk: FakeDesktop, gemini: GeminiStandIn, make_agent: Any
) -> None:
    """Issue 17 item 3: with approvals off it was answered (no acknowledgement) and went on."""
    gemini.script(*_invalid_confirm_script())
    result = make_agent(hitl_mode=False).run(task="Submit")
    assert result.status == "denied"
    assert "hitl_mode is off" in (result.error or "")
    assert len(gemini.requests) == 1 and desk.events == []


def test_any_langgraph_checkpointer_can_hold_the_runs(
    desk: FakeDesktop, gemini: GeminiStandIn, make_agent: Any
) -> None:
    """A shared saver (Postgres in production; LangGraph's in-memory saver here) carries a
    run paused on one agent to another that approves it."""
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    gemini.script(*_confirm_script())
    paused = make_agent(checkpointer=saver).run(task="Accept", thread_id="shared")
    assert paused.status == "awaiting_approval"
    result = make_agent(checkpointer=saver).approve("shared")
    assert result.status == "done", result.error
    assert clicks(desk) == [(360, 225)]


# ---------------------------------------------------------------------------- guards


def test_step_limit(desk: FakeDesktop, gemini: GeminiStandIn, make_agent: Any) -> None:
    gemini.script(
        *[Reply.calls(FunctionCallSpec("click_at", x=100 * i, y=500)) for i in range(1, 6)]
    )
    result = make_agent(step_limit=2).run(task="Click forever")
    assert result.status == "step_limit"
    assert result.steps == 2
    assert len(result.transcript) == 2
    assert len(gemini.requests) == 2
    assert len(clicks(desk)) == 2


def test_seconds_timeout(gemini: GeminiStandIn, make_agent: Any) -> None:
    gemini.script(*[Reply.calls(FunctionCallSpec("wait_5_seconds")) for _ in range(5)])
    agent = make_agent(seconds_timeout=0.3, settings=AgentSettings(wait_seconds=0.4))
    result = agent.run(task="Wait")
    assert result.status == "timeout"
    assert [t["name"] for t in result.transcript] == ["wait_5_seconds"]
    assert len(gemini.requests) == 1


def test_api_failure_ends_with_error_and_resumes(
    desk: FakeDesktop, gemini: GeminiStandIn, make_agent: Any
) -> None:
    """An API that stays down ends the run with a clear error; resume continues it later."""
    gemini.script(
        Reply.calls(FunctionCallSpec("click_at", x=100, y=100)),
        *[Reply.error(503) for _ in range(5)],
        Reply.text("finally"),
    )
    agent = make_agent()
    failed = agent.run(task="Click once", thread_id="flaky")
    assert failed.status == "error"
    assert failed.error is not None and "503" in failed.error
    assert failed.steps == 1
    result = agent.resume("flaky")
    assert result.status == "done", result.error
    assert result.final_text == "finally"
    assert clicks(desk) == [(144, 90)]  # the click was not repeated


def test_bad_task_and_unknown_thread(make_agent: Any) -> None:
    agent = make_agent()
    with pytest.raises(ConfigError, match="task is empty"):
        agent.run(task="  ")
    with pytest.raises(ConfigError, match="no run with thread id"):
        agent.approve("nope")
    with pytest.raises(ValueError, match="invalid thread id"):
        agent.run(task="x", thread_id="../escape")


def test_a_lost_desktop_ends_the_run_and_resume_goes_on(
    desk: FakeDesktop, gemini: GeminiStandIn, make_agent: Any
) -> None:
    """A given desktop that drops out is not reconnected: the run ends with an error naming
    resume, and nothing is left uncertain (the loss was seen before anything was sent)."""

    def script(body: Any, index: int) -> Reply:
        if index == 1:
            desk.disconnect()
        return [
            Reply.calls(FunctionCallSpec("click_at", x=100, y=100)),
            Reply.calls(FunctionCallSpec("click_at", x=200, y=200)),
            Reply.text("finished later"),
        ][min(index, 2)]

    gemini.script(script)
    agent = make_agent()
    failed = agent.run(task="Click twice", thread_id="lost")
    assert failed.status == "error"
    assert "resume('lost')" in (failed.error or "")
    assert failed.steps == 1
    kinds = [e["event"] for e in events(failed)]
    assert "connection_lost" in kinds and "reconnected" not in kinds
    desk.reconnect()
    result = agent.resume("lost")
    assert result.status == "done", result.error
    assert clicks(desk) == [(144, 90), (288, 180)]
    assert "uncertain_action" not in [e["event"] for e in events(result)]


# ------------------------------------------------------------------------------ API faults


def test_a_body_that_is_not_json_ends_the_run_with_a_clear_error(
    desk: FakeDesktop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), NotJsonHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", f"http://127.0.0.1:{server.server_port}")
        monkeypatch.setenv("GOOGLE_API_KEY", "dummy-key")
        with VncUseAgent(
            desktop=desk, runs_dir=tmp_path, planner=GeminiComputerUse(**FAST)
        ) as agent:
            result = agent.run(task="anything")
    finally:
        server.shutdown()
        server.server_close()
    assert result.status == "error"
    assert "not JSON" in (result.error or "")


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply.no_candidates("SAFETY"), "the API blocked the request: SAFETY"),
        (Reply.no_candidates("BLOCKLIST"), "the API blocked the request: BLOCKLIST"),
        (Reply.no_content("SAFETY"), "the API blocked the model's answer: SAFETY"),
        (Reply.no_content("RECITATION"), "the API blocked the model's answer: RECITATION"),
    ],
)
def test_a_refused_turn_ends_the_run_blocked_not_done(
    gemini: GeminiStandIn, make_agent: Any, reply: Reply, reason: str
) -> None:
    """Issue 17 item 1: a blocked prompt or refused answer ended the run ``done`` with an
    empty answer; now ``blocked``, naming the reason in the result, the events, the list of
    runs and the report."""
    gemini.script(reply)
    result = make_agent().run(task="anything", thread_id="refused")
    assert (result.status, result.error, result.ok) == ("blocked", reason, False)
    assert len(gemini.requests) == 1  # a refusal is not asked again
    ended = events(result)[-1]
    assert (ended["event"], ended["status"], ended["error"]) == ("run_ended", "blocked", reason)
    (summary,) = list_runs(Path(result.run_dir).parent)
    assert (summary.status, summary.error) == ("blocked", reason)
    run = json.loads(Path(result.run_dir, "run.json").read_text())
    assert (run["status"], run["reason"], run["task"]) == ("blocked", reason, "anything")
    report = Path(result.run_dir, REPORT_NAME).read_text()
    assert "Blocked for safety" in report and html.escape(reason) in report


@pytest.mark.parametrize(
    "reply",
    [
        Reply.no_candidates(),
        Reply.no_content("MAX_TOKENS"),
        Reply.text("cut", finish_reason="MAX_TOKENS"),
        Reply.no_content("OTHER"),
    ],
)
def test_an_empty_or_cut_short_answer_is_asked_again_then_fails_resumably(
    gemini: GeminiStandIn, make_agent: Any, reply: Reply
) -> None:
    """Issue 17 item 1: an empty or truncated answer ended the run ``done``; now it is asked
    again (4 times in all by default), then the run ends ``error`` and resumes."""
    gemini.script(reply, reply, reply, reply)
    agent = make_agent()
    result = agent.run(task="anything", thread_id="empty")
    assert result.status == "error", result
    assert "4 times in a row without calls" in (result.error or "")
    assert len(gemini.requests) == 4
    gemini.script(reply, Reply.text("Finished."))
    resumed = agent.resume("empty")
    assert (resumed.status, resumed.final_text) == ("done", "Finished.")
