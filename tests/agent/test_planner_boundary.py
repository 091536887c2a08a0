"""The model boundary: the graph's ``propose`` node and routes with a planner of our own.

:class:`ScriptedPlanner` implements :class:`~vnc_use.providers.base.Planner` without any model
SDK; the node must take its neutral proposal as it is (calls, safety marks, the opaque turn
record, the request/response JSON) and keep state JSON- and msgpack-able.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END
from langgraph.runtime import Runtime

from vnc_use.actions import GEMINI_35_DESKTOP_TABLE, ActionError, ValidatedAction
from vnc_use.agent.context import AgentContext, AgentSettings
from vnc_use.agent.graph import route_next
from vnc_use.agent.nodes import propose
from vnc_use.agent.state import CUAState
from vnc_use.providers import history
from vnc_use.providers.base import HistoryRecord, LoadPng, Planner, Proposal, ProposedCall
from vnc_use.record.folder import RunFolder
from vnc_use.store.journal import Journal, SqliteJournalStore
from vnc_use.testing import FakeDesktop


class ScriptedPlanner:
    """A planner that answers from a list of proposals and keeps the histories it was given."""

    model = "scripted-test-model"

    def __init__(self, *proposals: Proposal) -> None:
        self.proposals = list(proposals)
        self.seen: list[tuple[list[dict[str, Any]], int]] = []

    def propose(
        self, history: Sequence[HistoryRecord], load_png: LoadPng, keep_screenshots: int
    ) -> Proposal:
        self.seen.append((json.loads(json.dumps(list(history))), keep_screenshots))
        return self.proposals.pop(0)

    def validate(self, name: str, args: Mapping[str, Any]) -> ValidatedAction | ActionError:
        return GEMINI_35_DESKTOP_TABLE.validate(name, args)

    def is_custom(self, name: str) -> bool:
        return False

    def run_custom_function(self, call: ProposedCall) -> dict[str, Any]:
        raise AssertionError("no custom functions here")

    def check_ready(self) -> None:
        return None

    def run_settings(self) -> dict[str, Any]:
        return {"model": self.model, "script": "scripted"}


def _call(name: str, safety: str = "none", **args: Any) -> ProposedCall:
    return {
        "id": None,
        "name": name,
        "args": args,
        "safety": safety,  # type: ignore[typeddict-item]
        "safety_explanation": "the model's reason" if safety != "none" else None,
        "intent": args.get("intent"),
    }


def _proposal(*calls: ProposedCall, turn: dict[str, Any] | None) -> Proposal:
    return Proposal(
        calls=list(calls),
        text="thinking aloud",
        stop="calls" if calls else "finished",
        reason="WHATEVER_THE_PROVIDER_SAYS",
        usage={"total_token_count": 7},
        turn=turn,
        request_json={"sent": ["the", "request"]},
        response_json={"got": "the response"},
    )


def _context(tmp_path: Path, planner: Planner) -> AgentContext:
    folder = RunFolder(tmp_path, "boundary")
    return AgentContext(
        desktop=FakeDesktop(1021, 767),  # propose never touches it
        planner=planner,
        run=folder,
        settings=AgentSettings(keep_screenshots=2),
        journal=Journal(SqliteJournalStore(tmp_path / "vnc-use.sqlite"), "boundary"),
    )


def test_propose_keeps_the_neutral_proposal(tmp_path: Path) -> None:
    turn = {"opaque": ["only", "the", "planner", "reads", "this"], "bytes_b64": "AAE="}
    planner = ScriptedPlanner(
        _proposal(
            _call("click", x=500, y=500, intent="open it"),
            _call("click", "needs_confirmation", x=1, y=1, intent="accept"),
            _call("teleport"),
            turn=turn,
        )
    )
    ctx = _context(tmp_path, planner)
    state: CUAState = {"task": "do it", "contents": [history.task_turn("do it", None)]}
    update = propose(state, Runtime(context=ctx))

    assert planner.seen == [([history.task_turn("do it", None)], 2)]
    assert update["contents"] == [{"turn": "model", "content": turn}]
    calls = update["pending_calls"]
    assert [(c["name"], c["safety"], c.get("error")) for c in calls] == [
        ("click", "none", None),
        ("click", "needs_confirmation", None),
        ("teleport", "none", calls[2]["error"]),
    ]
    assert "Unknown function 'teleport'" in calls[2]["error"]
    assert calls[0]["intent"] == "open it"
    assert update["safety"] == {"mark": "needs_confirmation", "explanation": "the model's reason"}
    # the run folder keeps the exchange as the planner reported it
    model_dir = ctx.run.path / "model"
    assert json.loads((model_dir / "0001-request.json").read_text()) == {"sent": ["the", "request"]}
    assert json.loads((model_dir / "0001-response.json").read_text()) == {"got": "the response"}
    (event,) = [e for e in ctx.run.events() if e["event"] == "model_response"]
    assert (event["stop"], event["finish_reason"]) == ("calls", "WHATEVER_THE_PROVIDER_SAYS")
    # state stays checkpointable
    assert JsonPlusSerializer().dumps_typed(update)[0] == "msgpack"
    json.dumps(update)

    # routes read the neutral mark: a call marked for confirmation waits for a person
    after: CUAState = {**state, **update}  # type: ignore[typeddict-item]
    assert route_next(after) == "act"
    assert route_next({**after, "call_index": 1, "pending_calls": calls[1:]}) == "hitl_gate"
    approved = {**after, "call_index": 1, "approved_call": 1, "pending_calls": calls[1:]}
    assert route_next(approved) == "act"  # type: ignore[arg-type]
    # an invalid call is answered with its error; one marked for confirmation goes to a
    # person first all the same (issue 17 item 3), unmarked it needs nobody
    invalid_marked = [{**calls[2], "safety": "needs_confirmation"}]
    assert route_next({**after, "pending_calls": invalid_marked}) == "hitl_gate"  # type: ignore[typeddict-item]
    assert route_next({**after, "pending_calls": calls[2:]}) == "act"  # type: ignore[typeddict-item]


def test_a_turn_with_a_blocked_call_ends_the_run_before_any_of_its_calls(tmp_path: Path) -> None:
    """Issue 17 item 2: a call marked ``blocked`` never goes to a person or the desktop; the
    whole turn is refused, the calls before it included, and the turn is not kept."""
    planner = ScriptedPlanner(
        _proposal(
            _call("click", x=500, y=500),
            _call("click", "blocked", x=1, y=1),
            _call("click", "needs_confirmation", x=2, y=2),
            turn={"n": 1},
        )
    )
    ctx = _context(tmp_path, planner)
    state: CUAState = {"task": "do it", "contents": [history.task_turn("do it", None)]}
    update = propose(state, Runtime(context=ctx))
    reason = (
        "the model marked its call click blocked: the model's reason; "
        "no call of that turn was run or acknowledged"
    )
    assert (update["status"], update["done"], update["error"]) == ("blocked", True, reason)
    assert update["pending_calls"] == [] and "contents" not in update
    assert route_next({**state, **update}) == END  # type: ignore[typeddict-item]
    (event,) = [e for e in ctx.run.events() if e["event"] == "blocked"]
    assert event["reason"] == reason


def test_a_refused_turn_ends_blocked_and_an_unexpected_one_is_an_error(tmp_path: Path) -> None:
    """Issue 17 item 1, at the boundary: a planner's ``blocked`` stop ends the run ``blocked``
    with its message (it ended ``done``); an ``error`` stop fails the step (resumable)."""
    from vnc_use import VncUseAgent

    refused = Proposal(
        [], "", "blocked", "ANY", None, None, {}, {}, stop_message="the API blocked it: ANY"
    )
    empty = Proposal([], "", "error", "ODD", None, None, {}, {}, stop_message="an odd answer")
    planner = ScriptedPlanner(refused, empty, _proposal(turn=None))
    desk = FakeDesktop(1021, 767)
    with VncUseAgent(desktop=desk, planner=planner, runs_dir=tmp_path) as agent:
        result = agent.run(task="t", thread_id="refused")
        assert (result.status, result.error) == ("blocked", "the API blocked it: ANY")
        assert not result.ok
        result = agent.run(task="t", thread_id="odd")
        assert (result.status, result.error) == ("error", "an odd answer")
        assert agent.resume("odd").status == "done"


def test_no_calls_ends_the_run_with_the_model_text(tmp_path: Path) -> None:
    planner = ScriptedPlanner(_proposal(turn=None))
    ctx = _context(tmp_path, planner)
    update = propose({"task": "t"}, Runtime(context=ctx))
    # without an initial screenshot the task turn is added first; no model turn to keep
    assert update["contents"] == [history.task_turn("t", None)]
    assert (update["status"], update["done"], update["final_text"]) == (
        "done",
        True,
        "thinking aloud",
    )
    assert route_next({**update}) == END  # type: ignore[arg-type]


def test_a_planner_of_our_own_runs_the_whole_agent_on_the_fake_desktop(tmp_path: Path) -> None:
    """Nothing of Gemini is needed: a scripted planner drives VncUseAgent end to end, its
    grid click lands on the desktop's pixels, and the model sees the result of each call."""
    from vnc_use import VncUseAgent

    desk = FakeDesktop(1021, 767)
    planner = ScriptedPlanner(
        _proposal(_call("click", x=500, y=500, intent="the middle"), turn={"n": 1}),
        _proposal(turn=None),
    )
    with VncUseAgent(desktop=desk, planner=planner, runs_dir=tmp_path) as agent:
        result = agent.run(task="Click the middle", thread_id="own-planner")
    assert result.status == "done", result.error
    assert desk.events_of("click") == [{"kind": "click", "x": 510, "y": 384, "button": 1}]
    last = planner.seen[1][0][-1]
    assert [r["name"] for r in last["responses"]] == ["click"]
    assert last["responses"][0].get("error") is None and last["responses"][0]["screenshot"]
    run = json.loads((tmp_path / "own-planner" / "run.json").read_text())
    assert (run["model"], run["script"], run["desktop"]) == (
        "scripted-test-model",
        "scripted",
        "FakeDesktop",
    )
