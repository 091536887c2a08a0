"""GeminiComputerUse through the real google-genai SDK, over HTTP, against the stand-in."""

from __future__ import annotations

import base64
import io
import socket
import threading
from collections.abc import Callable

import pytest
from google.genai import types
from PIL import Image

from vnc_use.errors import ApiError, ConfigError, PlannerError
from vnc_use.providers.gemini.planner import (
    DEFAULT_MODEL,
    CustomFunction,
    GeminiComputerUse,
    prune_screenshots,
)
from vnc_use.testing.gemini_standin import (
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    make_png,
    require_confirmation,
)

from gemini_fixtures import DUMMY_API_KEY, FAST_RETRY, make_jpeg

Factory = Callable[..., GeminiComputerUse]


def _decode_b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text.replace("+", "-").replace("/", "_") + "==")


# ------------------------------------------------------------------ request shape


def test_request_carries_tool_task_png_and_key(
    gemini: GeminiStandIn, make_planner: Factory, png: bytes
) -> None:
    gemini.script(Reply.text("All done."))
    planner = make_planner(excluded_actions=["drag_and_drop", "search"], api_version="v1beta")
    proposal = planner.propose(planner.start_contents("Open the settings", png))

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
    assert proposal.finish_reason == "STOP"
    assert proposal.usage is not None and proposal.usage["total_token_count"] == 1020
    assert proposal.response_json["candidates"][0]["finish_reason"] == "STOP"
    assert not gemini.violations and not gemini.exhausted


@pytest.mark.parametrize(("api_version", "prefix"), [(None, "/v1/"), ("v1beta", "/v1beta/")])
def test_path_follows_api_version_and_model(
    gemini: GeminiStandIn, make_planner: Factory, api_version: str | None, prefix: str
) -> None:
    gemini.script(Reply.text("ok"))
    planner = make_planner(api_version=api_version, model="gemini-3-flash-preview")
    planner.propose(planner.start_contents("hi"))
    assert gemini.last_request.path == f"{prefix}models/gemini-3-flash-preview:generateContent"
    assert gemini.last_request.image_parts() == []  # no initial screenshot given


def test_explicit_base_url_and_key_win_over_env(gemini: GeminiStandIn) -> None:
    other = GeminiStandIn([Reply.text("other")]).start()  # started, but not in the env
    try:
        planner = GeminiComputerUse(base_url=other.base_url, api_key="explicit-key", **FAST_RETRY)
        assert planner.propose(planner.start_contents("x")).text == "other"
        assert other.last_request.api_key == "explicit-key"
        assert gemini.requests == []
    finally:
        other.stop()


def test_include_thoughts_goes_on_the_wire_and_thoughts_stay_out_of_text(
    gemini: GeminiStandIn, make_planner: Factory
) -> None:
    gemini.script(Reply.calls(FunctionCallSpec("wait_5_seconds"), text="Waiting.", thought="Hmm."))
    planner = make_planner(include_thoughts=True)
    proposal = planner.propose(planner.start_contents("x"))
    thinking = gemini.last_request.generation_config()["thinkingConfig"]
    assert thinking.get("includeThoughts", thinking.get("include_thoughts")) is True
    assert proposal.text == "Waiting."
    assert proposal.thoughts == "Hmm."


# ------------------------------------------------------------------ parsing


def test_parallel_calls_and_safety_decision_are_extracted_in_order(
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
    proposal = planner.propose(planner.start_contents("Search for pricing."))
    assert proposal.calls == [
        {"name": "click_at", "args": {"x": 500, "y": 300}, "safety_decision": decision, "id": None},
        {
            "name": "type_text_at",
            "args": {"x": 371, "y": 470, "text": "hello", "press_enter": True},
            "safety_decision": None,
            "id": None,
        },
        {
            "name": "key_combination",
            "args": {"keys": "control+a"},
            "safety_decision": None,
            "id": "c3",
        },
    ]
    assert proposal.text == "I will click the search box."
    # The model content kept for history still carries the safety decision verbatim.
    assert proposal.model_content is not None
    parts = proposal.model_content.parts or []
    assert parts[1].function_call is not None
    assert parts[1].function_call.args == {"x": 500, "y": 300, "safety_decision": decision}


@pytest.mark.parametrize(
    ("reply", "finish"),
    [
        (Reply.no_candidates(), "NO_CANDIDATES"),
        (Reply.no_candidates("PROHIBITED_CONTENT"), "PROMPT_BLOCKED:PROHIBITED_CONTENT"),
        (Reply.no_content("SAFETY"), "SAFETY"),
        (
            Reply.raw({"candidates": [{"content": {"role": "model", "parts": [{"text": "x"}]}}]}),
            None,
        ),
    ],
)
def test_odd_responses_give_no_calls_not_a_traceback(
    gemini: GeminiStandIn, make_planner: Factory, reply: Reply, finish: str | None
) -> None:
    gemini.script(reply)
    planner = make_planner()
    proposal = planner.propose(planner.start_contents("x"))
    assert proposal.calls == []
    assert proposal.finish_reason == finish


def test_thought_signature_survives_into_the_next_request(
    gemini: GeminiStandIn, make_planner: Factory, png: bytes
) -> None:
    signature = bytes(range(250, 256)) + b"\x00opaque-signature\xfb\xff"
    gemini.script(
        Reply.calls(FunctionCallSpec("click_at", x=1, y=2, thought_signature=signature)),
        Reply.text("done"),
    )
    planner = make_planner()
    contents = planner.start_contents("x")
    proposal = planner.propose(contents)
    assert proposal.model_content is not None
    assert (proposal.model_content.parts or [])[0].thought_signature == signature
    contents += [
        proposal.model_content,
        planner.function_responses_content([planner.build_function_response("click_at", png)]),
    ]
    planner.propose(contents)
    echoed = gemini.last_request.contents()[1]["parts"][0]["thoughtSignature"]
    # The SDK re-encodes bytes as URL-safe base64; the bytes are unchanged.
    assert _decode_b64(echoed) == signature
    assert not gemini.violations


# ------------------------------------------------------------------ function responses


def test_function_response_shape(gemini: GeminiStandIn, make_planner: Factory, png: bytes) -> None:
    planner = make_planner()
    fr = planner.build_function_response("click_at", png, {"error": "nothing there"})
    assert fr.name == "click_at"
    assert fr.response == {"url": "", "error": "nothing there"}
    assert fr.parts is not None and len(fr.parts) == 1
    blob = fr.parts[0].inline_data
    assert blob is not None and blob.mime_type == "image/png" and blob.data is not None
    with Image.open(io.BytesIO(blob.data)) as img:
        assert img.format == "PNG"
        assert img.size == (16, 10)
    bare = planner.build_function_response("wait_5_seconds", None)
    assert bare.response == {"url": ""}
    assert bare.parts is None

    # Sent back through the SDK, the stand-in accepts it.
    gemini.script(
        Reply.calls(
            FunctionCallSpec("click_at", x=1, y=2, safety_decision=require_confirmation()),
            FunctionCallSpec("hover_at", x=3, y=4),
        ),
        Reply.text("done"),
    )
    contents = planner.start_contents("x", png)
    proposal = planner.propose(contents)
    assert proposal.model_content is not None
    contents += [
        proposal.model_content,
        planner.function_responses_content(
            [
                planner.build_function_response(
                    "click_at", png, {"safety_acknowledgement": "true"}
                ),
                planner.build_function_response("hover_at", png),
            ]
        ),
    ]
    assert planner.propose(contents).text == "done"
    assert gemini.violations == []
    sent = gemini.function_responses()
    assert [r["name"] for r in sent] == ["click_at", "hover_at"]
    assert sent[0]["response"] == {"url": "", "safety_acknowledgement": "true"}
    assert sent[0]["images"] == [png]
    assert sent[1]["images"] == [png]


def test_build_function_response_refuses_a_non_png(make_planner: Factory) -> None:
    with pytest.raises(PlannerError, match="not a PNG"):
        make_planner().build_function_response("click_at", make_jpeg())


def _jpeg_response(name: str) -> types.FunctionResponse:
    blob = types.FunctionResponseBlob(mime_type="image/jpeg", data=make_jpeg())
    return types.FunctionResponse(
        name=name, response={"url": ""}, parts=[types.FunctionResponsePart(inline_data=blob)]
    )


BROKEN_FOLLOW_UPS: dict[
    str, tuple[Callable[[GeminiComputerUse, bytes], list[types.FunctionResponse]], str]
] = {
    "missing one response": (
        lambda p, png: [
            p.build_function_response("click_at", png, {"safety_acknowledgement": "true"})
        ],
        "pairing",
    ),
    "wrong order": (
        lambda p, png: [
            p.build_function_response("hover_at", png),
            p.build_function_response("click_at", png, {"safety_acknowledgement": "true"}),
        ],
        "pairing",
    ),
    "a JPEG": (
        lambda p, png: [
            p.build_function_response("click_at", png, {"safety_acknowledgement": "true"}),
            _jpeg_response("hover_at"),
        ],
        "png",
    ),
    "no acknowledgement": (
        lambda p, png: [
            p.build_function_response("click_at", png),
            p.build_function_response("hover_at", png),
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
    contents = planner.start_contents("x")
    proposal = planner.propose(contents)
    assert proposal.model_content is not None
    contents += [proposal.model_content, planner.function_responses_content(build(planner, png))]
    with pytest.raises(ApiError) as info:
        planner.propose(contents)
    assert info.value.status_code == 400
    assert info.value.status == "INVALID_ARGUMENT"
    assert [v.rule for v in gemini.violations] == [rule]
    assert len(gemini.requests) == 2  # a 400 is not retried
    assert gemini.remaining == 1  # and the rejected request consumed no script item


# ------------------------------------------------------------------ pruning


def _history(n_turns: int, png: bytes) -> list[types.Content]:
    planner = GeminiComputerUse()
    contents = planner.start_contents("task", png)
    for i in range(n_turns):
        contents.append(
            types.Content(
                role="model",
                parts=[
                    types.Part(text=f"step {i}"),
                    types.Part(
                        function_call=types.FunctionCall(name="click_at", args={"x": i, "y": i})
                    ),
                ],
            )
        )
        fr = planner.build_function_response("click_at", png, {"url": f"https://e.com/{i}"})
        contents.append(planner.function_responses_content([fr]))
    return contents


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
def test_pruning_keeps_exactly_the_last_n_images(keep: int) -> None:
    png = make_png()
    contents = _history(5, png)
    assert _count_images(contents) == 6
    pruned = prune_screenshots(contents, keep)
    assert _count_images(pruned) == min(keep, 6)
    assert _count_images(contents) == 6  # caller's objects untouched
    assert len(pruned) == len(contents)
    # Images that remain are in the newest turns.
    with_images = [i for i, c in enumerate(pruned) if _count_images([c])]
    assert with_images == [i for i in range(len(contents)) if i % 2 == 0][::-1][:keep][::-1]
    # Older turns keep their text and url.
    assert (pruned[0].parts or [])[0].text == "task"
    for i in range(5):
        fr = (pruned[2 + 2 * i].parts or [])[0].function_response
        assert fr is not None and fr.response == {"url": f"https://e.com/{i}"}
        assert (pruned[1 + 2 * i].parts or [])[0].text == f"step {i}"


def test_pruned_history_is_accepted_and_sends_only_the_last_images(
    gemini: GeminiStandIn, make_planner: Factory
) -> None:
    gemini.script(Reply.text("done"))
    planner = make_planner(keep_screenshots=3)
    contents = _history(5, make_png())
    planner.propose(planner.prune_screenshots(contents))
    assert len(gemini.last_request.image_parts()) == 3
    assert gemini.violations == []


def test_image_only_turn_gets_a_placeholder_text() -> None:
    only_image = types.Content(
        role="user", parts=[types.Part.from_bytes(data=make_png(), mime_type="image/png")]
    )
    newer = types.Content(
        role="user", parts=[types.Part.from_bytes(data=make_png(), mime_type="image/png")]
    )
    pruned = prune_screenshots([only_image, newer], 1)
    assert [p.text for p in pruned[0].parts or []] == ["[older screenshot omitted]"]
    assert pruned[1] is newer


# ------------------------------------------------------------------ retries and errors


def test_429_then_503_then_success(gemini: GeminiStandIn, make_planner: Factory) -> None:
    gemini.script(Reply.error(429), Reply.error(503), Reply.text("finally"))
    planner = make_planner()
    assert planner.propose(planner.start_contents("x")).text == "finally"
    assert [r.status for r in gemini.requests] == [429, 503, 200]


def test_always_503_gives_api_error_after_the_configured_attempts(
    gemini: GeminiStandIn, make_planner: Factory
) -> None:
    gemini.script(*[Reply.error(503) for _ in range(10)])
    planner = make_planner(retry_attempts=3)
    with pytest.raises(ApiError) as info:
        planner.propose(planner.start_contents("x"))
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
        planner.propose(planner.start_contents("x"))
    assert (
        str(info.value)
        == "Gemini API error 400 INVALID_ARGUMENT: Request contains an invalid argument."
    )
    assert len(gemini.requests) == 1


def test_malformed_then_calls(gemini: GeminiStandIn, make_planner: Factory) -> None:
    gemini.script(Reply.malformed(), Reply.calls(FunctionCallSpec("go_back")))
    planner = make_planner()
    proposal = planner.propose(planner.start_contents("x"))
    assert [c["name"] for c in proposal.calls] == ["go_back"]
    assert len(gemini.requests) == 2
    assert gemini.requests[0].body == gemini.requests[1].body  # asked again, same history


def test_always_malformed_raises_after_the_bound(
    gemini: GeminiStandIn, make_planner: Factory
) -> None:
    gemini.script(*[Reply.malformed() for _ in range(10)])
    planner = make_planner(max_malformed_retries=2)
    with pytest.raises(PlannerError, match="MALFORMED_FUNCTION_CALL 3 times"):
        planner.propose(planner.start_contents("x"))
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
        planner.propose(planner.start_contents("x"))
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
    planner.propose(planner.start_contents("x"))
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
        planner.propose(planner.start_contents("x"))
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
        planner.propose(planner.start_contents("x"))
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
    contents = planner.start_contents("Open the calculator")
    proposal = planner.propose(contents)

    req = gemini.last_request
    assert len(req.tools()) == 2
    assert req.computer_use_tool() is not None
    declared = req.function_declarations()
    assert [d["name"] for d in declared] == ["open_app"]
    assert "functionDeclarations" in req.tools()[1]
    assert proposal.calls[0] == {
        "name": "open_app",
        "args": {"app_name": "Calculator"},
        "safety_decision": None,
        "id": None,
    }
    assert planner.is_custom("open_app") and not planner.is_custom("click_at")

    custom_fr = planner.run_custom_function(proposal.calls[0])
    assert custom_fr.response == {"opened": "Calculator"}
    assert custom_fr.parts is None
    assert proposal.model_content is not None
    contents += [
        proposal.model_content,
        planner.function_responses_content(
            [custom_fr, planner.build_function_response("click_at", png)]
        ),
    ]
    assert planner.propose(contents).text == "done"
    assert gemini.violations == []


def test_custom_function_errors_become_error_responses(make_planner: Factory) -> None:
    def boom(**_: object) -> dict[str, object]:
        raise RuntimeError("no such app")

    cf = _open_app_function()
    planner = make_planner(custom_functions=[CustomFunction("open_app", cf.declaration, boom)])
    fr = planner.run_custom_function({"name": "open_app", "args": {"app_name": "x"}, "id": None})
    assert fr.response == {"error": "RuntimeError: no such app"}


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
            planner.propose(planner.start_contents("x"))
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
    contents = planner.start_contents("Copy the address", png)
    proposal = planner.propose(contents)

    req = gemini.last_request
    assert req.path == "/v1/models/gemini-3.5-flash:generateContent"
    assert req.tools() == [{"computerUse": {"environment": "ENVIRONMENT_DESKTOP"}}]
    assert [list(p) for p in req.contents()[0]["parts"]] == [["text"], ["inlineData"]]
    assert [(c["name"], c["args"]) for c in proposal.calls] == [
        ("triple_click", {"x": 500, "y": 100, "intent": "Select the address line"}),
        ("hotkey", {"keys": ["control", "c"], "intent": "Copy it"}),
    ]
    # The stand-in signs the first call of a Gemini 3 turn, as the real models do...
    assert proposal.model_content is not None
    parts = proposal.model_content.parts or []
    assert parts[1].thought_signature is not None and parts[2].thought_signature is None
    contents += [
        proposal.model_content,
        planner.function_responses_content(
            [
                planner.build_function_response("triple_click", png),
                planner.build_function_response("hotkey", png),
            ]
        ),
    ]
    assert planner.propose(contents).text == "done"
    # ...and it is echoed back unchanged (the stand-in refuses the request otherwise).
    echoed = gemini.last_request.contents()[1]["parts"][1]["thoughtSignature"]
    assert _decode_b64(echoed) == parts[1].thought_signature
    assert not gemini.violations and not gemini.exhausted


def test_gemini_3_flash_on_a_desktop_sends_the_browser_environment_with_exclusions(
    gemini: GeminiStandIn, make_planner: Factory
) -> None:
    gemini.script(Reply.text("ok"))
    planner = make_planner(model="gemini-3-flash-preview", environment="desktop")
    planner.propose(planner.start_contents("x"))
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
    contents = planner.start_contents("x")
    proposal = planner.propose(contents)
    call = proposal.calls[0]
    rebuilt = types.Content(
        role="model",
        parts=[types.Part(function_call=types.FunctionCall(name=call["name"], args=call["args"]))],
    )
    contents += [
        rebuilt,
        planner.function_responses_content([planner.build_function_response("click_at", png)]),
    ]
    with pytest.raises(ApiError, match="missing a `thought_signature`"):
        planner.propose(contents)
    assert [v.rule for v in gemini.violations] == ["thought_signature"]
