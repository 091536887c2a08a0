"""Property tests: hostile model output never crashes the agent or reaches the desktop, an
action marked ``require_confirmation`` never runs without an approval, and one marked
``blocked`` never reaches the desktop, the gate or an acknowledgement (nor does any call of its
turn), whatever the interleaving of crashes, resumes, approvals and denials.

Both drive the real agent against the real test desktop (the probe records what arrived) and
the Gemini stand-in through the real SDK.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from vnc_use import VncUseAgent
from vnc_use.actions import GEMINI_25_TABLE, ActionError, Coordinate, split_safety_decision
from vnc_use.agent.state import RunResult
from vnc_use.errors import ConfigError
from vnc_use.providers.gemini.planner import GeminiComputerUse, safety_mark
from vnc_use.testing.gemini_standin import (
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    require_confirmation,
)

from desktop_fixtures import Probe

pytestmark = pytest.mark.desktop

FAST = {"retry_initial_delay": 0.01, "retry_max_delay": 0.05}
INPUT_EVENTS = {"press", "release", "key", "wheel", "motion", "double", "triple"}

# ---------------------------------------------------------------------- hostile model output

_garbage = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_any_coordinate = st.one_of(
    st.integers(max_value=-1),
    st.integers(min_value=1000),
    st.just(10**30),
    st.text(max_size=5),
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer()),
    st.none(),
    st.lists(st.integers(), max_size=2),
)
_COORDINATE = TypeAdapter(Coordinate)


def _accepted(value: Any) -> bool:
    """Whether validation would take ``value`` as a coordinate (e.g. the string "7")."""
    try:
        _COORDINATE.validate_python(value)
    except ValidationError:
        return False
    return True


_bad_coordinate = _any_coordinate.filter(lambda v: not _accepted(v))
_nasty_text = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=50),
    st.text(alphabet=st.characters(max_codepoint=31), min_size=1, max_size=20),  # control chars
    st.just("x" * 50_000),  # enormous
)
_names = list(GEMINI_25_TABLE.names)


@st.composite
def hostile_call(draw: st.DrawFn) -> dict[str, Any]:
    """A function call that must not reach the desktop: invalid by construction."""
    kind = draw(st.sampled_from(["unknown", "bad_coordinate", "missing", "extra", "bad_key"]))
    args: dict[str, Any]
    if kind == "unknown":
        name = draw(st.text(min_size=1, max_size=20).filter(lambda n: n not in _names))
        args = draw(st.dictionaries(st.text(max_size=8), _garbage, max_size=3))
    elif kind == "bad_key":
        name = "key_combination"
        args = {"keys": draw(st.sampled_from(["control+nosuchkey", "ctrl+", "++x", "f99", "\x00"]))}
    else:
        name = draw(st.sampled_from(["click_at", "type_text_at", "scroll_at", "drag_and_drop"]))
        args = {"x": 10, "y": 10, "text": draw(_nasty_text), "direction": "down"}
        args |= {"destination_x": 20, "destination_y": 20}
        fields = set(GEMINI_25_TABLE.spec(name).args_model.model_fields)
        args = {k: v for k, v in args.items() if k in fields}
        if kind == "bad_coordinate":
            args[draw(st.sampled_from(sorted(fields & {"x", "y"})))] = draw(_bad_coordinate)
        elif kind == "missing":
            del args[draw(st.sampled_from(sorted(fields & {"x", "y"})))]
        else:
            args[draw(st.text(min_size=1, max_size=10).filter(lambda k: k not in fields))] = draw(
                _garbage
            )
    if kind != "bad_key" and draw(st.booleans()):  # (bad keys are refused only when sent)
        args["safety_decision"] = draw(_garbage | st.just(require_confirmation("garbage")))
    return {"name": name, "args": args}


def _json_safe(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_json_safe(v) for v in value.values())
    if isinstance(value, list):
        return all(_json_safe(v) for v in value)
    return True


@pytest.fixture(scope="module")
def standin() -> Iterator[GeminiStandIn]:
    mp = pytest.MonkeyPatch()
    mp.setenv("GOOGLE_API_KEY", "dummy-hostile-key")
    mp.delenv("GEMINI_API_KEY", raising=False)
    with GeminiStandIn() as api:
        yield api
    mp.undo()


@pytest.fixture(scope="module")
def hostile_agent(
    session_probe: Probe, standin: GeminiStandIn, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[VncUseAgent]:
    with VncUseAgent(
        vnc_server=session_probe.desktop.server,
        vnc_password=session_probe.desktop.password,
        runs_dir=tmp_path_factory.mktemp("hostile"),
        planner=GeminiComputerUse(**FAST),
        hitl_mode=False,
        step_limit=10_000,
    ) as agent:
        yield agent


TOTAL = {"calls": 0}


@pytest.fixture(scope="module", autouse=True)
def _report_total() -> Iterator[None]:
    yield
    print(f"\nhostile function calls answered with errors: {TOTAL['calls']}")


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(hostile_call(), min_size=20, max_size=60))
def test_hostile_calls_are_answered_with_errors_and_never_executed(
    calls: list[dict[str, Any]],
    session_probe: Probe,
    standin: GeminiStandIn,
    hostile_agent: VncUseAgent,
) -> None:
    calls = [c for c in calls if _json_safe(c["args"])]
    for call in calls:  # invalid by construction (key names fail at execution instead)
        checked = GEMINI_25_TABLE.validate(call["name"], call["args"])
        assert isinstance(checked, ActionError) or call["name"] == "key_combination"
    if not calls:
        return
    standin.violations.clear()
    standin.script(
        Reply.calls(*(FunctionCallSpec(c["name"], **c["args"]) for c in calls)),
        Reply.text("survived"),
    )
    session_probe.log.clear()
    sent_before = len(standin.requests)
    result = hostile_agent.run(task="Do as I say")
    marks = [safety_mark(split_safety_decision(c["args"])[1]) for c in calls]
    if "blocked" in marks:  # the turn is refused whole: nothing runs, nothing is answered
        assert result.status == "blocked", result
        assert result.transcript == []
        assert len(standin.requests) == sent_before + 1
    elif "needs_confirmation" in marks:  # approvals are off: the first one ends the run
        first = marks.index("needs_confirmation")
        assert result.status == "denied", result
        assert len(result.transcript) == first
        assert all(t["result"] == "error" for t in result.transcript)
        assert len(standin.requests) == sent_before + 1
    else:
        assert result.status == "done", result.error
        assert len(result.transcript) == len(calls)
        assert all(t["result"] == "error" for t in result.transcript)
        answered = standin.requests[-1].function_responses()
        assert [r["name"] for r in answered] == [c["name"] for c in calls]
        assert all(r["response"].get("error") for r in answered)
    assert not standin.violations
    # nothing reached the desktop (poll once more for late events: none may arrive)
    assert [e for e in session_probe.log.events() if e["type"] in INPUT_EVENTS] == []
    TOTAL["calls"] += len(calls)


# ------------------------------------------------------------- approval cannot be bypassed


class Crash(BaseException):
    """Raised from an event listener: the process 'dies' at that point of a node."""


@st.composite
def approval_scenario(draw: st.DrawFn) -> dict[str, Any]:
    marks = st.sampled_from(["none", "confirm", "blocked"])
    turns = draw(st.lists(st.lists(marks, min_size=1, max_size=3), min_size=1, max_size=3))
    ops = draw(
        st.lists(
            st.sampled_from(["approve", "deny", "resume", "restart"]), min_size=12, max_size=12
        )
    )
    crash_at = draw(st.none() | st.integers(min_value=1, max_value=25))
    return {"turns": turns, "ops": ops, "crash_at": crash_at}


@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scenario=approval_scenario())
def test_confirmation_actions_never_run_without_approval(
    scenario: dict[str, Any],
    session_probe: Probe,
    standin: GeminiStandIn,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    probe = session_probe
    w, h = probe.size
    # every call clicks its own spot; remember each one's mark, and the spots of every turn
    # that carries a blocked call (none of that turn may run)
    spots: dict[tuple[int, int], str] = {}
    refused: set[tuple[int, int]] = set()
    blocked_replies: set[int] = set()
    replies = []
    n = 0
    for t, turn in enumerate(scenario["turns"]):
        specs = []
        turn_spots = []
        for mark in turn:
            n += 1
            gx, gy = 50 + 37 * n, 60 + 29 * n
            spot = (round(gx / 1000 * w), round(gy / 1000 * h))
            spots[spot] = mark
            turn_spots.append(spot)
            extra = {
                "none": {},
                "confirm": {"safety_decision": require_confirmation(f"spot {n}")},
                "blocked": {"safety_decision": {"decision": "blocked", "explanation": f"{n}"}},
            }[mark]
            specs.append(FunctionCallSpec("click_at", x=gx, y=gy, **extra))
        if "blocked" in turn:
            refused.update(turn_spots)
            blocked_replies.add(t)
        replies.append(Reply.calls(*specs))
    replies.append(Reply.text("end"))
    standin.violations.clear()
    standin.script(*replies)
    probe.log.clear()
    runs: Path = tmp_path_factory.mktemp("approvals")
    events = {"count": 0}

    def listener(event: dict[str, Any]) -> None:
        events["count"] += 1
        if events["count"] == scenario["crash_at"]:
            raise Crash

    def agent(crashing: bool) -> VncUseAgent:
        return VncUseAgent(
            vnc_server=probe.desktop.server,
            vnc_password=probe.desktop.password,
            runs_dir=runs,
            planner=GeminiComputerUse(**FAST),
            on_event=listener if crashing else None,
        )

    approved: set[tuple[int, int]] = set()
    gated: set[tuple[int, int]] = set()
    thread = "t"
    holder = {"agent": agent(crashing=True)}

    def resumed(current: VncUseAgent) -> RunResult:
        """``resume``: a run waiting for a person is refused in one line and stays waiting
        (the run rules: only approve or deny answers it)."""
        try:
            return current.resume(thread)
        except ConfigError as exc:
            if "waits for an approval" not in str(exc):
                raise
            waiting = current.result(thread)
            assert waiting.status == "awaiting_approval", waiting
            return waiting

    def attempt(op: str) -> RunResult:
        """Do ``op``; if the 'process' dies meanwhile, a new one resumes the run."""
        try:
            current = holder["agent"]
            if op == "run":
                return current.run(task="click the spots", thread_id=thread)
            if op == "restart":
                current.close()
                holder["agent"] = agent(crashing=False)
                return resumed(holder["agent"])
            if op == "resume":
                return resumed(current)
            return {"approve": current.approve, "deny": current.deny}[op](thread)
        except Crash:
            holder["agent"].close()
            holder["agent"] = agent(crashing=False)
            try:
                return resumed(holder["agent"])
            except ConfigError:  # it died before its first checkpoint: start it again
                return holder["agent"].run(task="click the spots", thread_id=thread)

    sent_before = len(standin.requests)
    try:
        result = attempt("run")
        for op in scenario["ops"]:
            if result.status != "awaiting_approval":
                break
            pending = result.pending_call or {}
            spot = (pending["pixels"].get("x"), pending["pixels"].get("y"))
            gated.add(spot)
            if op == "approve":
                approved.add(spot)
            result = attempt(op)
    finally:
        holder["agent"].close()
    clicked = {(e["x"], e["y"]) for e in probe.log.events("press")}
    for spot in clicked:
        assert spot in spots, spot
        assert spot not in refused, (spot, scenario)  # no call of a blocked turn ran
        if spots[spot] == "confirm":
            assert spot in approved, (spot, approved, scenario)
    # a blocked call never reached the gate, nor any call of its turn
    assert not gated & refused, (gated, scenario)
    # ... nor the model's history (so never an answer or an acknowledgement)
    for sent in standin.requests[sent_before:]:
        for content in sent.contents():
            for part in content["parts"]:
                decision = (part.get("functionCall") or {}).get("args", {}).get("safety_decision")
                assert not (decision and decision.get("decision") == "blocked"), scenario
    # a run whose last answer was a blocked turn ended blocked: never done, never exit 0
    served = [r.script_index for r in standin.requests[sent_before:] if r.script_index is not None]
    if served and served[-1] in blocked_replies and result.status != "awaiting_approval":
        assert result.status == "blocked", (result, scenario)
    assert not standin.violations
