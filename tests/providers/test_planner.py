"""GeminiComputerUse through the real google-genai SDK, over HTTP, against the stand-in.

Requests are built from vnc-use's own history records by the code the agent runs
(:mod:`vnc_use.providers.gemini.request`).
"""

from __future__ import annotations

import base64
import io
import json
import socket
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

import pytest
from google.genai import types
from PIL import Image

from vnc_use.agent import approval
from vnc_use.errors import ApiError, ConfigError, PlannerError
from vnc_use.providers import history
from vnc_use.providers.base import CallResult, Proposal
from vnc_use.providers.gemini import request
from vnc_use.providers.gemini.planner import (
    DEFAULT_MODEL,
    CustomFunction,
    GeminiComputerUse,
    safety_mark,
)
from vnc_use.testing.gemini_standin import (
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    make_png,
    require_confirmation,
)

from gemini_fixtures import DUMMY_API_KEY, FAST_RETRY, PngStore, ask, make_jpeg

Factory = Callable[..., GeminiComputerUse]
ACK = request.ACKNOWLEDGEMENT


def _decode_b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text.replace("+", "-").replace("/", "_") + "==")


def _result(name: str, screenshot: str | None = None, **extra: Any) -> CallResult:
    """A neutral call result, as ``act`` records it."""
    return cast(CallResult, {"name": name, "id": None, "screenshot": screenshot, **extra})


def _answered(
    turns: list[dict[str, Any]], proposal: Proposal, *results: CallResult
) -> list[dict[str, Any]]:
    """The history after ``proposal``'s calls were answered with ``results``."""
    assert proposal.turn is not None
    return [*turns, history.model_turn(proposal.turn), history.responses_turn(results)]


# ------------------------------------------------------------------ request shape


def test_request_carries_tool_task_png_and_key(
    gemini: GeminiStandIn, make_planner: Factory, png: bytes
) -> None:
    gemini.script(Reply.text("All done."))
    planner = make_planner(excluded_actions=["drag_and_drop", "search"], api_version="v1beta")
    proposal = ask(planner, "Open the settings", png)

    req = gemini.last_request
    assert req.path == f"/v1beta/models/{DEFAULT_MODEL}:generateContent"
    assert req.api_key == DUMMY_API_KEY
    assert req.computer_use_tool() == {
        "environment": "ENVIRONMENT_BROWSER",
        "excludedPredefinedFunctions": ["drag_and_drop", "search"],
    }
    # SDK 3.4.0 sends it as generationConfig.thinkingConfig.include_thoughts (snake_case)
    thinking = req.generation_config()["thinkingConfig"]
    assert thinking.get("includeThoughts", thinking.get("include_thoughts")) is False
    contents = req.contents()
    assert len(contents) == 1
    assert contents[0]["role"] == "user"
    assert contents[0]["parts"][0]["text"] == "Open the settings"
    assert req.image_parts() == [png]
    assert contents[0]["parts"][1]["inlineData"]["mimeType"] == "image/png"

    assert proposal.calls == []
    assert proposal.text == "All done."
    assert (proposal.stop, proposal.reason) == ("finished", "STOP")
    assert proposal.usage is not None and proposal.usage["total_token_count"] == 1020
    assert proposal.response_json["candidates"][0]["finish_reason"] == "STOP"
    # the request as the run folder keeps it
    sent = proposal.request_json
    assert sent["model"] == DEFAULT_MODEL
    assert sent["contents"][0]["parts"][0]["text"] == "Open the settings"
    assert sent["config"] == planner.config.model_dump(mode="json", exclude_none=True)
    assert proposal.turn is not None and json.loads(json.dumps(proposal.turn)) == proposal.turn
    assert not gemini.violations and not gemini.exhausted


@pytest.mark.parametrize(
    ("api_version", "env", "prefix"),
    [
        (None, {}, "/v1beta/"),  # not the SDK's own default, v1
        ("v1beta", {}, "/v1beta/"),
        ("v1", {}, "/v1/"),
        (None, {"GEMINI_API_VERSION": "v1"}, "/v1/"),
        (None, {"GOOGLE_GENAI_API_VERSION": "v1"}, "/v1/"),  # the SDK's variable still counts
        (None, {"GEMINI_API_VERSION": "v1beta", "GOOGLE_GENAI_API_VERSION": "v1"}, "/v1beta/"),
        ("v1beta", {"GEMINI_API_VERSION": "v1"}, "/v1beta/"),  # the setting wins
    ],
)
def test_path_follows_api_version_and_model(
    gemini: GeminiStandIn,
    make_planner: Factory,
    monkeypatch: pytest.MonkeyPatch,
    api_version: str | None,
    env: dict[str, str],
    prefix: str,
) -> None:
    gemini.api_versions = ("v1", "v1beta")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    gemini.script(Reply.text("ok"))
    planner = make_planner(api_version=api_version, model="gemini-3-flash-preview")
    assert planner.run_settings()["api_version"] == prefix.strip("/")
    ask(planner, "hi")
    assert gemini.last_request.path == f"{prefix}models/gemini-3-flash-preview:generateContent"
    assert gemini.last_request.image_parts() == []  # no initial screenshot given


@pytest.mark.parametrize("bad", ["1beta", "beta", "v1/models", "latest"])
def test_a_malformed_api_version_is_refused_before_any_request(
    gemini: GeminiStandIn, make_planner: Factory, bad: str
) -> None:
    with pytest.raises(ConfigError, match="not a Gemini API version"):
        make_planner(api_version=bad)
    assert gemini.requests == []


def test_a_version_that_does_not_serve_the_model_names_the_version_and_the_fix(
    gemini: GeminiStandIn, make_planner: Factory
) -> None:
    gemini.script(Reply.text("never sent"))
    with pytest.raises(ApiError) as caught:
        ask(make_planner(api_version="v1"))
    message = str(caught.value)
    assert caught.value.status_code == 404 and "\n" not in message
    assert "is not found for API version v1" in message
    assert "--api-version v1beta" in message and "GEMINI_API_VERSION" in message
    assert gemini.remaining == 1


def test_explicit_base_url_and_key_win_over_env(gemini: GeminiStandIn) -> None:
    other = GeminiStandIn([Reply.text("other")]).start()  # started, but not in the env
    try:
        planner = GeminiComputerUse(base_url=other.base_url, api_key="explicit-key", **FAST_RETRY)
        assert ask(planner).text == "other"
        assert other.last_request.api_key == "explicit-key"
        assert gemini.requests == []
    finally:
        other.stop()


def test_include_thoughts_goes_on_the_wire_and_thoughts_stay_out_of_text(
    gemini: GeminiStandIn, make_planner: Factory
) -> None:
    gemini.script(Reply.calls(FunctionCallSpec("wait_5_seconds"), text="Waiting.", thought="Hmm."))
    planner = make_planner(include_thoughts=True)
    proposal = ask(planner)
    thinking = gemini.last_request.generation_config()["thinkingConfig"]
    assert thinking.get("includeThoughts", thinking.get("include_thoughts")) is True
    assert proposal.text == "Waiting."
    assert proposal.thoughts == "Hmm."


# ------------------------------------------------------------------ parsing


def test_parallel_calls_and_safety_marks_are_extracted_in_order(
    gemini: GeminiStandIn, make_planner: Factory
) -> None:
    decision = require_confirmation("Clicking a cookie consent banner.")
    gemini.script(
        Reply.calls(
            FunctionCallSpec("click_at", x=500, y=300, safety_decision=decision),
            FunctionCallSpec("type_text_at", x=371, y=470, text="hello", press_enter=True),
            FunctionCallSpec("key_combination", keys="control+a", call_id="c3"),
            text="I will click the search box.",
        )
    )
    planner = make_planner()
    proposal = ask(planner, "Search for pricing.")
    plain = {"safety": "none", "safety_explanation": None, "intent": None}
    assert proposal.calls == [
        {
            "id": None,
            "name": "click_at",
            "args": {"x": 500, "y": 300},
            "safety": "needs_confirmation",
            "safety_explanation": "Clicking a cookie consent banner.",
            "intent": None,
        },
        {
            "id": None,
            "name": "type_text_at",
            "args": {"x": 371, "y": 470, "text": "hello", "press_enter": True},
            **plain,
        },
        {"id": "c3", "name": "key_combination", "args": {"keys": "control+a"}, **plain},
    ]
    assert proposal.text == "I will click the search box."
    assert (proposal.stop, proposal.reason) == ("calls", "STOP")
    # The model turn kept for history still carries the safety decision verbatim.
    assert proposal.turn is not None
    parts = request.model_turn_content(proposal.turn).parts or []
    assert parts[1].function_call is not None
    assert parts[1].function_call.args == {"x": 500, "y": 300, "safety_decision": decision}


@pytest.mark.parametrize(
    ("reply", "finish", "message"),
    [
        (
            Reply.no_candidates("SAFETY"),
            "PROMPT_BLOCKED:SAFETY",
            "the API blocked the request: SAFETY",
        ),
        (
            Reply.no_candidates("PROHIBITED_CONTENT"),
            "PROMPT_BLOCKED:PROHIBITED_CONTENT",
            "the API blocked the request: PROHIBITED_CONTENT",
        ),
        (Reply.no_content("SAFETY"), "SAFETY", "the API blocked the model's answer: SAFETY"),
        *(
            (Reply.no_content(r), r, f"the API blocked the model's answer: {r}")
            for r in ("PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "RECITATION", "IMAGE_SAFETY")
        ),
        (
            Reply.text("I won't.", finish_reason="SAFETY"),
            "SAFETY",
            "the API blocked the model's answer: SAFETY",
        ),
    ],
)
def test_refusals_are_blocked_stops_not_asked_again(
    gemini: GeminiStandIn, make_planner: Factory, reply: Reply, finish: str, message: str
) -> None:
    """Issue 17 item 1: a blocked prompt or a refused answer is a ``blocked`` stop naming the
    reason (it was "no calls", so the run ended ``done``); asking again would not change it."""
    gemini.script(reply, Reply.text("never asked"))
    proposal = ask(make_planner())
    assert proposal.calls == []
    assert (proposal.reason, proposal.stop, proposal.stop_message) == (finish, "blocked", message)
    assert len(gemini.requests) == 1


@pytest.mark.parametrize(
    ("reply", "finish"),
    [
        (Reply.no_candidates(), "NO_CANDIDATES"),
        (Reply.text("cut short", finish_reason="MAX_TOKENS"), "MAX_TOKENS"),
        (Reply.no_content("MAX_TOKENS"), "MAX_TOKENS"),
        (Reply.text("odd", finish_reason="OTHER"), "OTHER"),
        (Reply.no_content("UNEXPECTED_TOOL_CALL"), "UNEXPECTED_TOOL_CALL"),
        (
            Reply.raw({"candidates": [{"content": {"role": "model", "parts": [{"text": "x"}]}}]}),
            None,
        ),
    ],
)
def test_empty_or_cut_short_answers_are_asked_again_then_fail(
    gemini: GeminiStandIn, make_planner: Factory, reply: Reply, finish: str | None
) -> None:
    """Issue 17 item 1: an empty, truncated or unexpected answer without calls is retried like
    ``MALFORMED_FUNCTION_CALL`` (it was "no calls", so the run ended ``done``), then fails."""
    gemini.script(reply, Reply.calls(FunctionCallSpec("go_back")))
    proposal = ask(make_planner())
    assert [c["name"] for c in proposal.calls] == ["go_back"]
    assert len(gemini.requests) == 2
    assert gemini.requests[0].body == gemini.requests[1].body  # asked again, same history

    gemini.requests.clear()
    gemini.script(reply, reply, reply)
    with pytest.raises(PlannerError) as info:
        ask(make_planner(max_malformed_retries=2))
    assert f"answered {finish or 'without a finish reason'} 3 times in a row" in str(info.value)
    assert len(gemini.requests) == 3


@pytest.mark.parametrize(
    ("decision", "mark"),
    [
        (None, "none"),
        ({"decision": "regular"}, "none"),
        ({"decision": "ALLOWED"}, "none"),
        ({"decision": "allow"}, "none"),
        (require_confirmation("why"), "needs_confirmation"),
        ({"decision": "something new"}, "blocked"),
        ({"explanation": "no decision at all"}, "blocked"),
        ({"decision": "blocked"}, "blocked"),
        ({"decision": "BLOCKED", "explanation": "too risky"}, "blocked"),
    ],
)
def test_safety_decisions_map_to_marks_that_fail_safe(
    decision: dict[str, Any] | None, mark: str
) -> None:
    """Issue 17 item 2: only ``require_confirmation`` goes to a person; anything else that is
    not benign is ``blocked`` (it was shown for approval)."""
    assert safety_mark(decision) == mark
    call = {"name": "click_at", "args": {}, "id": None, "safety": mark}
    assert approval.needs_confirmation(call) is (mark == "needs_confirmation")  # type: ignore[arg-type]


def test_thought_signature_survives_into_the_next_request(
    gemini: GeminiStandIn, make_planner: Factory, png: bytes
) -> None:
    signature = bytes(range(250, 256)) + b"\x00opaque-signature\xfb\xff"
    gemini.script(
        Reply.calls(FunctionCallSpec("click_at", x=1, y=2, thought_signature=signature)),
        Reply.text("done"),
    )
    planner = make_planner()
    store = PngStore()
    turns = [history.task_turn("x", None)]
    proposal = planner.propose(turns, store.load, 3)
    assert proposal.turn is not None
    assert (request.model_turn_content(proposal.turn).parts or [])[0].thought_signature == signature
    # the turn record survives the checkpoint (JSON) and goes back unchanged
    proposal = replace(proposal, turn=json.loads(json.dumps(proposal.turn)))
    planner.propose(_answered(turns, proposal, _result("click_at", store.put(png))), store.load, 3)
    echoed = gemini.last_request.contents()[1]["parts"][0]["thoughtSignature"]
    # The SDK re-encodes bytes as URL-safe base64; the bytes are unchanged.
    assert _decode_b64(echoed) == signature
    assert not gemini.violations


# ------------------------------------------------------------------ function responses


def test_function_response_shape(gemini: GeminiStandIn, make_planner: Factory, png: bytes) -> None:
    store = PngStore()
    sha = store.put(png)
    fr = request.function_response(_result("click_at", sha, error="nothing there"), store.load)
    assert fr.name == "click_at"
    assert fr.response == {"url": "", "error": "nothing there"}
    assert fr.parts is not None and len(fr.parts) == 1
    blob = fr.parts[0].inline_data
    assert blob is not None and blob.mime_type == "image/png" and blob.data is not None
    with Image.open(io.BytesIO(blob.data)) as img:
        assert img.format == "PNG"
        assert img.size == (16, 10)
    bare = request.function_response(_result("wait_5_seconds"), store.load)
    assert bare.response == {"url": ""}
    assert bare.parts is None
    not_inline = request.function_response(_result("click_at", sha), None)
    assert not_inline.parts is None

    # Sent back through the SDK, the stand-in accepts it.
    gemini.script(
        Reply.calls(
            FunctionCallSpec("click_at", x=1, y=2, safety_decision=require_confirmation()),
            FunctionCallSpec("hover_at", x=3, y=4),
        ),
        Reply.text("done"),
    )
    planner = make_planner()
    turns = [history.task_turn("x", sha)]
    proposal = planner.propose(turns, store.load, 3)
    answered = _answered(
        turns, proposal, _result("click_at", sha, approved=True), _result("hover_at", sha)
    )
    assert planner.propose(answered, store.load, 3).text == "done"
    assert gemini.violations == []
    sent = gemini.function_responses()
    assert [r["name"] for r in sent] == ["click_at", "hover_at"]
    assert sent[0]["response"] == {"url": "", "safety_acknowledgement": "true"}
    assert sent[0]["images"] == [png]
    assert sent[1]["images"] == [png]


@pytest.mark.parametrize(
    ("result", "payload"),
    [
        ({}, {"url": ""}),
        ({"error": "bad"}, {"url": "", "error": "bad"}),
        (
            {"error": "bad", "approved": True},
            {"url": "", "error": "bad", **request.ACKNOWLEDGEMENT},
        ),
        ({"approved": False}, {"url": ""}),
        ({"output": {"opened": "x"}}, {"opened": "x"}),
        ({"output": {"error": "E"}, "approved": True}, {"error": "E", **ACK}),
        # records written before the neutral results are sent as they are
        ({"response": {"url": "", "error": "old"}}, {"url": "", "error": "old"}),
    ],
)
def test_response_payload_from_the_neutral_result(
    result: dict[str, Any], payload: dict[str, Any]
) -> None:
    got = request.response_payload({"name": "click_at", "id": None, "screenshot": None, **result})
    assert got == payload
    assert list(got) == list(payload)  # key order is what goes on the wire


def test_a_screenshot_that_is_not_a_png_is_refused(png: bytes) -> None:
    store = PngStore()
    jpeg = store.put(make_jpeg())
    with pytest.raises(PlannerError, match="not a PNG"):
        request.function_response(_result("click_at", jpeg), store.load)
    with pytest.raises(PlannerError, match="not a PNG"):
        request.to_contents([history.task_turn("x", jpeg)], store.load, 1)


def _jpeg_response(name: str) -> types.FunctionResponse:
    blob = types.FunctionResponseBlob(mime_type="image/jpeg", data=make_jpeg())
    return types.FunctionResponse(
        name=name, response={"url": ""}, parts=[types.FunctionResponsePart(inline_data=blob)]
    )


_Build = Callable[[Callable[[CallResult], types.FunctionResponse]], list[types.FunctionResponse]]

BROKEN_FOLLOW_UPS: dict[str, tuple[_Build, str]] = {
    "missing one response": (
        lambda reply: [reply(_result("click_at", "png", approved=True))],
        "pairing",
    ),
    "wrong order": (
        lambda reply: [
            reply(_result("hover_at", "png")),
            reply(_result("click_at", "png", approved=True)),
        ],
        "pairing",
    ),
    "a JPEG": (
        lambda reply: [
            reply(_result("click_at", "png", approved=True)),
            _jpeg_response("hover_at"),
        ],
        "png",
    ),
    "no acknowledgement": (
        lambda reply: [reply(_result("click_at", "png")), reply(_result("hover_at", "png"))],
        "safety_acknowledgement",
    ),
    # issue 17 item 3: the stand-in let an error stand in for the acknowledgement
    "an error without acknowledgement": (
        lambda reply: [
            reply(_result("click_at", "png", error="x must be at most 999")),
            reply(_result("hover_at", "png")),
        ],
        "safety_acknowledgement",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN_FOLLOW_UPS))
def test_broken_follow_up_is_rejected_with_400(
    gemini: GeminiStandIn, make_planner: Factory, png: bytes, case: str
) -> None:
    build, rule = BROKEN_FOLLOW_UPS[case]
    gemini.script(
        Reply.calls(
            FunctionCallSpec("click_at", x=1, y=2, safety_decision=require_confirmation()),
            FunctionCallSpec("hover_at", x=3, y=4),
        ),
        Reply.text("done"),
    )
    planner = make_planner()
    proposal = ask(planner)
    assert proposal.turn is not None
    pngs = {"png": png}.__getitem__
    replies = build(lambda result: request.function_response(result, pngs))
    contents = [
        *request.to_contents([history.task_turn("x", None)], pngs, 3),
        request.model_turn_content(proposal.turn),
        types.Content(role="user", parts=[types.Part(function_response=fr) for fr in replies]),
    ]
    with pytest.raises(ApiError) as info:
        planner.generate(contents)
    assert info.value.status_code == 400
    assert info.value.status == "INVALID_ARGUMENT"
    assert [v.rule for v in gemini.violations] == [rule]
    assert len(gemini.requests) == 2  # a 400 is not retried
    assert gemini.remaining == 1  # and the rejected request consumed no script item


# ------------------------------------------------------------------ screenshots kept inline


def _history(n_turns: int, png: bytes) -> tuple[list[dict[str, Any]], PngStore]:
    """A task with a screenshot, then ``n_turns`` model turns each answered with one."""
    store = PngStore()
    sha = store.put(png)
    turns = [history.task_turn("task", sha)]
    for i in range(n_turns):
        content = types.Content(
            role="model",
            parts=[
                types.Part(text=f"step {i}"),
                types.Part(
                    function_call=types.FunctionCall(name="click_at", args={"x": i, "y": i})
                ),
            ],
        )
        turns.append(history.model_turn(request.turn_record(content)))
        turns.append(history.responses_turn([_result("click_at", sha, error=f"e{i}")]))
    return turns, store


def _count_images(contents: list[types.Content]) -> int:
    count = 0
    for content in contents:
        for part in content.parts or []:
            if part.inline_data is not None:
                count += 1
            if part.function_response is not None:
                count += len(part.function_response.parts or [])
    return count


@pytest.mark.parametrize("keep", [0, 1, 3, 10])
def test_only_the_last_n_screenshots_go_inline(keep: int) -> None:
    turns, store = _history(5, make_png())
    before = json.dumps(turns)
    contents = request.to_contents(turns, store.load, keep)
    assert json.dumps(turns) == before  # the history is not modified
    assert len(contents) == len(turns)
    assert _count_images(contents) == min(keep, 6)
    # Images that remain are in the newest turns.
    with_images = [i for i, c in enumerate(contents) if _count_images([c])]
    assert with_images == [i for i in range(len(turns)) if i % 2 == 0][::-1][:keep][::-1]
    # Older turns keep their text and response.
    assert (contents[0].parts or [])[0].text == "task"
    for i in range(5):
        fr = (contents[2 + 2 * i].parts or [])[0].function_response
        assert fr is not None and fr.response == {"url": "", "error": f"e{i}"}
        assert (contents[1 + 2 * i].parts or [])[0].text == f"step {i}"


def test_a_negative_keep_is_refused() -> None:
    turns, store = _history(1, make_png())
    with pytest.raises(ValueError, match="keep_screenshots"):
        request.to_contents(turns, store.load, -1)


def test_older_records_saying_role_are_read() -> None:
    store = PngStore()
    sha = store.put(make_png())
    old = [{"role": "user", "text": "task", "screenshot": sha}]
    (content,) = request.to_contents(old, store.load, 1)
    assert [p.text for p in content.parts or []] == ["task", None]


def test_history_with_screenshots_dropped_is_accepted_and_sends_only_the_last_images(
    gemini: GeminiStandIn, make_planner: Factory
) -> None:
    gemini.script(Reply.text("done"))
    planner = make_planner(keep_screenshots=3)
    turns, store = _history(5, make_png())
    planner.propose(turns, store.load)  # the planner's own keep_screenshots
    assert len(gemini.last_request.image_parts()) == 3
    planner.propose(turns, store.load, 1)
    assert len(gemini.last_request.image_parts()) == 1
    assert gemini.violations == []


# ------------------------------------------------------------------ retries and errors


def test_429_then_503_then_success(gemini: GeminiStandIn, make_planner: Factory) -> None:
    gemini.script(Reply.error(429), Reply.error(503), Reply.text("finally"))
    planner = make_planner()
    assert ask(planner).text == "finally"
    assert [r.status for r in gemini.requests] == [429, 503, 200]


def test_always_503_gives_api_error_after_the_configured_attempts(
    gemini: GeminiStandIn, make_planner: Factory
) -> None:
    gemini.script(*[Reply.error(503) for _ in range(10)])
    planner = make_planner(retry_attempts=3)
    with pytest.raises(ApiError) as info:
        ask(planner)
    assert info.value.status_code == 503
    assert info.value.status == "UNAVAILABLE"
    assert "overloaded" in str(info.value)
    assert len(gemini.requests) == 3


def test_400_is_a_clear_api_error_and_not_retried(
    gemini: GeminiStandIn, make_planner: Factory
) -> None:
    gemini.script(Reply.error(400, "Request contains an invalid argument."), Reply.text("never"))
    planner = make_planner()
    with pytest.raises(ApiError) as info:
        ask(planner)
    assert (
        str(info.value)
        == "Gemini API error 400 INVALID_ARGUMENT: Request contains an invalid argument."
    )
    assert len(gemini.requests) == 1


def test_malformed_then_calls(gemini: GeminiStandIn, make_planner: Factory) -> None:
    gemini.script(Reply.malformed(), Reply.calls(FunctionCallSpec("go_back")))
    planner = make_planner()
    proposal = ask(planner)
    assert [c["name"] for c in proposal.calls] == ["go_back"]
    assert len(gemini.requests) == 2
    assert gemini.requests[0].body == gemini.requests[1].body  # asked again, same history


def test_always_malformed_raises_after_the_bound(
    gemini: GeminiStandIn, make_planner: Factory
) -> None:
    gemini.script(*[Reply.malformed() for _ in range(10)])
    planner = make_planner(max_malformed_retries=2)
    with pytest.raises(PlannerError, match="MALFORMED_FUNCTION_CALL 3 times"):
        ask(planner)
    assert len(gemini.requests) == 3


# ------------------------------------------------------------------ keys and endpoints


def test_no_key_is_a_config_error_before_any_request(
    gemini: GeminiStandIn, make_planner: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY")
    planner = make_planner()  # constructing needs no key
    with pytest.raises(
        ConfigError, match=r"No Gemini API key: set GOOGLE_API_KEY \(or GEMINI_API_KEY\)"
    ):
        ask(planner)
    assert gemini.requests == []


@pytest.mark.parametrize(
    ("google", "gemini_key", "expected"),
    [("g-key", None, "g-key"), (None, "gem-key", "gem-key"), ("g-key", "gem-key", "g-key")],
)
def test_key_resolution_mirrors_the_sdk(
    gemini: GeminiStandIn,
    make_planner: Factory,
    monkeypatch: pytest.MonkeyPatch,
    google: str | None,
    gemini_key: str | None,
    expected: str,
) -> None:
    for name, value in (("GOOGLE_API_KEY", google), ("GEMINI_API_KEY", gemini_key)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    gemini.script(Reply.text("ok"))
    planner = make_planner()
    ask(planner)
    assert gemini.last_request.api_key == expected


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_unreachable_base_url_is_a_clear_planner_error(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "AIzaSecretThatMustNotLeak"
    url = f"http://127.0.0.1:{_closed_port()}"
    planner = GeminiComputerUse(api_key=secret, base_url=url, retry_attempts=2, **FAST_RETRY)
    with pytest.raises(PlannerError) as info:
        ask(planner)
    message = str(info.value)
    assert not isinstance(info.value, ApiError)
    assert message.startswith(f"Cannot reach the Gemini API at {url}")
    assert "\n" not in message
    assert secret not in message


def test_key_never_appears_in_error_messages(
    gemini: GeminiStandIn, make_planner: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    gemini.script(Reply.error(400, f"API key not valid: {DUMMY_API_KEY}"))
    planner = make_planner()
    with pytest.raises(ApiError) as info:
        ask(planner)
    assert DUMMY_API_KEY not in str(info.value)
    assert "API key not valid: ***" in str(info.value)
    ours = [r for r in caplog.records if r.name.startswith("vnc_use")]
    assert ours
    assert all(DUMMY_API_KEY not in r.getMessage() for r in ours)


# ------------------------------------------------------------------ configuration


def test_config_is_built_once_with_the_tools() -> None:
    planner = GeminiComputerUse(excluded_actions=["search"], environment="ENVIRONMENT_BROWSER")
    tools = planner.config.tools or []
    assert len(tools) == 1
    cu = tools[0].computer_use  # type: ignore[union-attr]
    assert cu is not None
    assert cu.environment == types.Environment.ENVIRONMENT_BROWSER
    assert cu.excluded_predefined_functions == ["search"]
    assert planner.config.thinking_config == types.ThinkingConfig(include_thoughts=False)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"excluded_actions": ["teleport"]}, "Unknown excluded action"),
        ({"environment": "ENVIRONMENT_MARS"}, "Unknown environment"),
        ({"retry_attempts": 0}, "retry_attempts"),
    ],
)
def test_bad_settings_are_config_errors(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        GeminiComputerUse(**kwargs)  # type: ignore[arg-type]


def _open_app_function() -> CustomFunction:
    declaration = types.FunctionDeclaration(
        name="open_app",
        description="Open an application by name.",
        parameters=types.Schema(
            type=types.Type.OBJECT,
            properties={"app_name": types.Schema(type=types.Type.STRING)},
            required=["app_name"],
        ),
    )
    return CustomFunction("open_app", declaration, lambda app_name: {"opened": app_name})


def test_custom_function_is_declared_and_extracted(
    gemini: GeminiStandIn, make_planner: Factory, png: bytes
) -> None:
    gemini.script(
        Reply.calls(
            FunctionCallSpec("open_app", app_name="Calculator"),
            FunctionCallSpec("click_at", x=5, y=6),
        ),
        Reply.text("done"),
    )
    planner = make_planner(custom_functions=[_open_app_function()])
    store = PngStore()
    turns = [history.task_turn("Open the calculator", None)]
    proposal = planner.propose(turns, store.load, 3)

    req = gemini.last_request
    assert len(req.tools()) == 2
    assert req.computer_use_tool() is not None
    declared = req.function_declarations()
    assert [d["name"] for d in declared] == ["open_app"]
    assert "functionDeclarations" in req.tools()[1]
    assert proposal.calls[0] == {
        "id": None,
        "name": "open_app",
        "args": {"app_name": "Calculator"},
        "safety": "none",
        "safety_explanation": None,
        "intent": None,
    }
    assert planner.is_custom("open_app") and not planner.is_custom("click_at")

    output = planner.run_custom_function(proposal.calls[0])
    assert output == {"opened": "Calculator"}
    answered = _answered(
        turns,
        proposal,
        _result("open_app", output=output),
        _result("click_at", store.put(png)),
    )
    assert planner.propose(answered, store.load, 3).text == "done"
    assert gemini.violations == []
    sent = gemini.function_responses()
    assert [(r["name"], r["response"], len(r["images"])) for r in sent] == [
        ("open_app", {"opened": "Calculator"}, 0),
        ("click_at", {"url": ""}, 1),
    ]


def test_custom_function_errors_become_error_responses(make_planner: Factory) -> None:
    def boom(**_: object) -> dict[str, object]:
        raise RuntimeError("no such app")

    cf = _open_app_function()
    planner = make_planner(custom_functions=[CustomFunction("open_app", cf.declaration, boom)])
    output = planner.run_custom_function(
        {"name": "open_app", "args": {"app_name": "x"}, "id": None}
    )
    assert output == {"error": "RuntimeError: no such app"}


def test_custom_function_may_not_shadow_a_predefined_one() -> None:
    declaration = types.FunctionDeclaration(name="click_at", description="mine")
    cf = CustomFunction("click_at", declaration, lambda: {})
    with pytest.raises(ConfigError, match="clashes"):
        GeminiComputerUse(custom_functions=[cf])
    GeminiComputerUse(excluded_actions=["click_at"], custom_functions=[cf])  # allowed when excluded


def test_http_timeout_is_a_clear_planner_error(
    gemini: GeminiStandIn, make_planner: Factory
) -> None:
    release = threading.Event()

    def slow(request: dict[str, object], index: int) -> Reply:
        release.wait(timeout=30)  # held until the client has given up
        return Reply.text("too late")

    gemini.script(slow)
    planner = make_planner(http_timeout_s=0.2, retry_attempts=1)
    try:
        with pytest.raises(
            PlannerError,
            match=r"Cannot reach the Gemini API at http://127\.0\.0\.1:\d+ \(\w*Timeout",
        ):
            ask(planner)
    finally:
        release.set()
    assert gemini.last_request.headers.get("x-server-timeout") == "1"


# ------------------------------------------------------------------ model families on the wire


def test_gemini_35_request_matches_the_documented_shape(
    gemini: GeminiStandIn, make_planner: Factory, png: bytes
) -> None:
    """tools: [{computerUse: {environment: ENVIRONMENT_DESKTOP}}], task text + PNG, then
    3.5-style calls whose args (``intent`` included) come back verbatim."""
    gemini.script(
        Reply.calls(
            FunctionCallSpec("triple_click", x=500, y=100, intent="Select the address line"),
            FunctionCallSpec("hotkey", keys=["control", "c"], intent="Copy it"),
            text="Selecting the line.",
        ),
        Reply.text("done"),
    )
    planner = make_planner(model="gemini-3.5-flash", environment="desktop")
    store = PngStore()
    sha = store.put(png)
    turns = [history.task_turn("Copy the address", sha)]
    proposal = planner.propose(turns, store.load, 3)

    req = gemini.last_request
    assert req.path == "/v1beta/models/gemini-3.5-flash:generateContent"
    assert req.tools() == [{"computerUse": {"environment": "ENVIRONMENT_DESKTOP"}}]
    assert [list(p) for p in req.contents()[0]["parts"]] == [["text"], ["inlineData"]]
    assert [(c["name"], c["args"]) for c in proposal.calls] == [
        ("triple_click", {"x": 500, "y": 100, "intent": "Select the address line"}),
        ("hotkey", {"keys": ["control", "c"], "intent": "Copy it"}),
    ]
    assert [c["intent"] for c in proposal.calls] == ["Select the address line", "Copy it"]
    # The stand-in signs the first call of a Gemini 3 turn, as the real models do...
    assert proposal.turn is not None
    parts = request.model_turn_content(proposal.turn).parts or []
    assert parts[1].thought_signature is not None and parts[2].thought_signature is None
    answered = _answered(turns, proposal, _result("triple_click", sha), _result("hotkey", sha))
    assert planner.propose(answered, store.load, 3).text == "done"
    # ...and it is echoed back unchanged (the stand-in refuses the request otherwise).
    echoed = gemini.last_request.contents()[1]["parts"][1]["thoughtSignature"]
    assert _decode_b64(echoed) == parts[1].thought_signature
    assert not gemini.violations and not gemini.exhausted


def test_gemini_3_flash_on_a_desktop_sends_the_browser_environment_with_exclusions(
    gemini: GeminiStandIn, make_planner: Factory
) -> None:
    gemini.script(Reply.text("ok"))
    planner = make_planner(model="gemini-3-flash-preview", environment="desktop")
    ask(planner)
    assert gemini.last_request.computer_use_tool() == {
        "environment": "ENVIRONMENT_BROWSER",
        "excludedPredefinedFunctions": [
            "open_web_browser",
            "go_back",
            "go_forward",
            "search",
            "navigate",
        ],
    }
    assert not gemini.violations


def test_a_dropped_signature_is_refused_for_gemini_3(
    gemini: GeminiStandIn, make_planner: Factory, png: bytes
) -> None:
    """The history must carry the model turn whole: rebuilding the call loses its signature."""
    gemini.script(Reply.calls(FunctionCallSpec("click_at", x=1, y=2)), Reply.text("done"))
    planner = make_planner(model="gemini-3-flash-preview", retry_attempts=1)
    store = PngStore()
    turns = [history.task_turn("x", None)]
    proposal = planner.propose(turns, store.load, 3)
    call = proposal.calls[0]
    rebuilt = types.Content(
        role="model",
        parts=[types.Part(function_call=types.FunctionCall(name=call["name"], args=call["args"]))],
    )
    proposal = replace(proposal, turn=request.turn_record(rebuilt))
    answered = _answered(turns, proposal, _result("click_at", store.put(png)))
    with pytest.raises(ApiError, match="missing a `thought_signature`"):
        planner.propose(answered, store.load, 3)
    assert [v.rule for v in gemini.violations] == ["thought_signature"]
