"""A person in the loop: the run rules of takeover and handback, and what a hand-back writes
(:mod:`vnc_use.agent.human`, :mod:`vnc_use.runs.rules`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vnc_use.agent.human import NOT_RUN, handed_back
from vnc_use.agent.nodes import handback_text
from vnc_use.errors import ConfigError
from vnc_use.runs import rules
from vnc_use.testing.gemini_standin import GeminiStandIn


@pytest.mark.parametrize(
    ("state", "takeover", "handback", "resume"),
    [
        ("running", "take", None, None),
        ("interrupted", "take", None, "continue"),
        ("awaiting_human", "take", "hand_back", None),
        ("awaiting_approval", None, None, None),
        ("done", None, None, "show"),
        ("stuck", None, None, "reopen"),
    ],
)
def test_the_rules_of_a_person(
    state: str, takeover: str | None, handback: str | None, resume: str | None
) -> None:
    for verb, way in (("takeover", takeover), ("handback", handback), ("resume", resume)):
        if way is None:
            with pytest.raises(ConfigError) as refused:
                rules.check(verb, "r1", state)  # type: ignore[arg-type]
            assert "\n" not in str(refused.value) and "r1" in str(refused.value)
        else:
            assert rules.check(verb, "r1", state) == way  # type: ignore[arg-type]
    if state == "awaiting_human":
        with pytest.raises(ConfigError, match="handback r1 --note"):
            rules.check("resume", "r1", state)


def test_a_handback_answers_the_unrun_calls_and_brings_the_person_turn() -> None:
    values = {
        "status": "awaiting_human",
        "pending_calls": [{"id": "c2", "name": "click_at", "args": {"x": 1, "y": 2}}],
        "responses": [{"name": "click_at", "id": "c1", "screenshot": "ab"}],
        "call_index": 1,
        "human": {"asked_by": "person", "holder": "ann"},
    }
    returned = {"asked_by": "person", "note": "logged in", "seconds": 41.6, "clicks": 2, "keys": 9}
    update = handed_back(values, returned)
    assert update["status"] == "running" and update["done"] is False and update["human"] is None
    answered = update["contents"][0]["responses"]
    assert [r["id"] for r in answered] == ["c1", "c2"] and answered[1]["error"] == NOT_RUN
    assert update["pending_calls"] == [] and update["call_index"] == 2
    text = handback_text(update["handed_back"])
    assert "42 s" in text and "2 clicks, 9 key presses" in text and "logged in" in text
    # a model's question answered: nothing pending, the answer in plain words
    asked = handed_back({"status": "awaiting_human"}, {"asked_by": "model", "note": "Grace"})
    assert "contents" not in asked
    assert handback_text(asked["handed_back"]).startswith("A person answered your request: Grace")


def test_claude_gets_a_person_turn_in_the_user_message_before_it() -> None:
    """Claude's messages alternate: a person's turn right after the results (or the task)
    joins that user message, the results first."""
    import io

    from PIL import Image

    from vnc_use.providers import history
    from vnc_use.providers.anthropic.request import build
    from vnc_use.providers.anthropic.versions import choose

    buf = io.BytesIO()
    Image.new("RGB", (64, 48), "white").save(buf, format="PNG")
    png = buf.getvalue()
    turns = [
        history.task_turn("Log in", None),
        history.person_turn(
            "A person answered your request: use the work account.",
            "s1",
            (64, 48),
            {"asked_by": "model"},
        ),
    ]
    built = build(turns, lambda sha: png, 3, choose("claude-sonnet-4-5"))
    assert [m["role"] for m in built.messages] == ["user"]
    kinds = [block["type"] for block in built.messages[0]["content"]]
    assert kinds == ["text", "text", "image"]
    assert "work account" in built.messages[0]["content"][1]["text"]


def test_a_leg_pauses_for_its_holder_and_a_stale_leg_is_refused(
    tmp_path: Path, gemini: GeminiStandIn
) -> None:
    """The step-boundary check a leg makes (``AgentContext.fence``): a person's hold on its
    desktop for its run pauses it; an epoch moved on without its run refuses its writes."""
    from vnc_use import VncUseAgent
    from vnc_use.store.holds import DesktopMovedOn

    with VncUseAgent(vnc_server="127.0.0.1::1", runs_dir=tmp_path) as agent:
        holds = agent.storage.holds("127.0.0.1::1")
        fence = agent._fence("r1")
        assert fence is not None and fence() is None  # nothing changed
        taken = holds.take("r1", "ann")
        assert fence() == {"holder": "ann", "since": taken.since, "epoch": 1}
        holds.free("r1", "ann")  # handed back to another leg: this one is stale
        with pytest.raises(DesktopMovedOn, match="moved on without run r1"):
            fence()
        late = agent._fence("r1")  # a leg that began after the hand-back goes on
        assert late is not None and late() is None
