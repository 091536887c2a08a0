"""The Gemini API stand-in itself: routing, replies, recording and contract checks."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from google.genai import types

from vnc_use.errors import ApiError
from vnc_use.providers.gemini.planner import DEFAULT_MODEL, GeminiComputerUse
from vnc_use.testing.gemini_standin import (
    EXHAUSTED_TEXT,
    MAX_REQUEST_BYTES,
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    Violation,
    add_violation_listener,
    make_png,
    remove_violation_listener,
    require_confirmation,
)

from gemini_fixtures import DUMMY_API_KEY, ask, make_jpeg

Factory = Callable[..., GeminiComputerUse]
CU_PATH = f"/v1beta/models/{DEFAULT_MODEL}:generateContent"
CU_TOOL = {"computerUse": {"environment": "ENVIRONMENT_BROWSER"}}


def _task(text: str, image: bytes | None = None) -> list[types.Content]:
    """A first user turn built by hand (to send what the agent never would)."""
    parts = [types.Part(text=text)]
    if image is not None:
        parts.append(types.Part.from_bytes(data=image, mime_type="image/png"))
    return [types.Content(role="user", parts=parts)]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _post(
    url: str, body: Any, key: str | None = DUMMY_API_KEY, method: str = "POST"
) -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["x-goog-api-key"] = key
    req = urllib.request.Request(
        url, data=data if method == "POST" else None, headers=headers, method=method
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _request(*contents: dict[str, Any], tools: list[Any] | None = None) -> dict[str, Any]:
    return {"contents": list(contents), "tools": [CU_TOOL] if tools is None else tools}


def _user_text(text: str = "task") -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


# ------------------------------------------------------------------ replies and routing


def test_replies_are_camel_case_like_the_real_api(gemini: GeminiStandIn) -> None:
    gemini.script(
        Reply.calls(
            FunctionCallSpec(
                "click_at",
                x=1,
                y=2,
                safety_decision=require_confirmation("why"),
                thought_signature=b"sig",
            ),
            text="hi",
        )
    )
    status, body = _post(gemini.base_url + CU_PATH, _request(_user_text()))
    assert status == 200
    candidate = body["candidates"][0]
    assert candidate["finishReason"] == "STOP"
    assert candidate["content"]["role"] == "model"
    assert candidate["content"]["parts"] == [
        {"text": "hi"},
        {
            "functionCall": {
                "name": "click_at",
                "args": {"x": 1, "y": 2, "safety_decision": require_confirmation("why")},
            },
            "thoughtSignature": _b64(b"sig"),
        },
    ]
    assert set(body["usageMetadata"]) == {
        "promptTokenCount",
        "candidatesTokenCount",
        "totalTokenCount",
    }
    assert body["modelVersion"] == DEFAULT_MODEL
    assert body["responseId"] == "standin-0"


def test_v1beta_and_query_params_are_served(gemini: GeminiStandIn) -> None:
    gemini.script(Reply.text("ok"))
    status, _ = _post(gemini.base_url + CU_PATH + "?alt=json", _request(_user_text()))
    assert status == 200
    assert gemini.last_request.model == DEFAULT_MODEL
    assert gemini.last_request.api_version == "v1beta"


def test_a_version_not_served_gets_the_apis_404(gemini: GeminiStandIn) -> None:
    """Rule 13: v1beta only by default; another version is answered as Google's front end
    answers a model the version does not serve, and consumes no script item."""
    gemini.script(Reply.text("ok"))
    v1_path = f"/v1/models/{DEFAULT_MODEL}:generateContent"
    status, body = _post(gemini.base_url + v1_path, _request(_user_text()))
    assert status == 404
    assert body["error"] == {
        "code": 404,
        "message": f"models/{DEFAULT_MODEL} is not found for API version v1, or is not "
        "supported for generateContent. Call ListModels to see the list of available models "
        "and their supported methods.",
        "status": "NOT_FOUND",
    }
    assert [v.rule for v in gemini.violations] == ["api_version"]
    assert gemini.last_request.api_version == "v1" and gemini.remaining == 1

    with GeminiStandIn([Reply.text("v1 too")], api_versions=("v1", "v1beta")) as both:
        for path in (v1_path, CU_PATH):
            status, _ = _post(both.base_url + path, _request(_user_text()))
            assert status == 200
        assert [r.api_version for r in both.requests] == ["v1", "v1beta"]
        assert not both.violations


def test_unknown_paths_and_bad_json_get_api_errors(gemini: GeminiStandIn) -> None:
    status, body = _post(gemini.base_url + "/v1/models/x:countTokens", _request(_user_text()))
    assert status == 404 and body["error"]["status"] == "NOT_FOUND"
    status, body = _post(gemini.base_url + CU_PATH, None, method="GET")
    assert status == 404
    status, body = _post(gemini.base_url + CU_PATH, b"{not json")
    assert status == 400 and body["error"] == {
        "code": 400,
        "message": "Invalid JSON payload received.",
        "status": "INVALID_ARGUMENT",
    }


def test_error_replies_have_the_api_body(gemini: GeminiStandIn) -> None:
    gemini.script(Reply.error(429), Reply.error(418, "teapot", "TEAPOT"))
    status, body = _post(gemini.base_url + CU_PATH, _request(_user_text()))
    assert status == 429
    assert body == {
        "error": {
            "code": 429,
            "message": "Resource has been exhausted (e.g. check quota).",
            "status": "RESOURCE_EXHAUSTED",
        }
    }
    status, body = _post(gemini.base_url + CU_PATH, _request(_user_text()))
    assert (status, body["error"]["status"], body["error"]["message"]) == (418, "TEAPOT", "teapot")


def test_exhausted_script_answers_a_final_text_and_says_so(
    gemini: GeminiStandIn, make_planner: Factory
) -> None:
    gemini.script(Reply.text("first"))
    planner = make_planner()
    assert gemini.remaining == 1
    assert ask(planner).text == "first"
    assert not gemini.exhausted
    assert ask(planner).text == EXHAUSTED_TEXT
    assert gemini.exhausted and gemini.exhausted_count == 1
    gemini.extend(Reply.text("more"))
    assert ask(planner).text == "more"


def test_callable_script_sees_the_request_and_its_index(
    gemini: GeminiStandIn, make_planner: Factory
) -> None:
    seen: list[tuple[str, int]] = []

    def script(request: dict[str, Any], index: int) -> dict[str, Any] | Reply:
        seen.append((request["contents"][0]["parts"][0]["text"], index))
        if index == 0:
            return Reply.calls(FunctionCallSpec("search"))
        return {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": "raw"}]}, "finishReason": "STOP"}
            ]
        }

    gemini.script(script)
    planner = make_planner()
    assert ask(planner, "a").calls[0]["name"] == "search"
    assert ask(planner, "b").text == "raw"
    assert seen == [("a", 0), ("b", 1)]
    with pytest.raises(ValueError, match="list script"):
        gemini.extend(Reply.text("x"))


def test_json_script_items_match_the_builders() -> None:
    assert Reply.from_json({"text": "done"}) == Reply.text("done")
    assert Reply.from_json({"malformed": True}) == Reply.malformed()
    assert Reply.from_json({"error": 503}) == Reply.error(503)
    assert Reply.from_json({"no_candidates": True}) == Reply.no_candidates()
    assert Reply.from_json({"raw": {"candidates": []}}) == Reply.raw({"candidates": []})
    item = {
        "calls": [{"name": "click_at", "args": {"x": 1, "y": 2}, "thoughtSignature": "c2ln"}],
        "text": "t",
    }
    expected = Reply.calls(
        FunctionCallSpec("click_at", x=1, y=2, thought_signature="c2ln"), text="t"
    )
    assert Reply.from_json(item) == expected
    with pytest.raises(ValueError, match="Unrecognised"):
        Reply.from_json({"nonsense": 1})


def test_context_manager_sets_and_restores_the_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "http://previous.invalid")
    with GeminiStandIn() as standin:
        assert os.environ["GOOGLE_GEMINI_BASE_URL"] == standin.base_url
        assert standin.base_url.startswith("http://127.0.0.1:")
    assert os.environ["GOOGLE_GEMINI_BASE_URL"] == "http://previous.invalid"
    monkeypatch.delenv("GOOGLE_GEMINI_BASE_URL")
    with GeminiStandIn():
        pass
    assert "GOOGLE_GEMINI_BASE_URL" not in os.environ


# ------------------------------------------------------------------ recording


def test_records_headers_body_and_decodes_both_spellings(gemini: GeminiStandIn) -> None:
    png = make_png(3, 3)
    gemini.script(Reply.text("ok"))
    body = {
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "task"},
                    {"inline_data": {"mime_type": "image/png", "data": _b64(png)}},
                ],
            },
            {
                "role": "model",
                "parts": [{"function_call": {"name": "click_at", "args": {"x": 1, "y": 2}}}],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "function_response": {
                            "name": "click_at",
                            "response": {"url": ""},
                            "parts": [
                                {
                                    "inlineData": {
                                        "mimeType": "image/png",
                                        "data": base64.urlsafe_b64encode(png).decode(),
                                    }
                                }
                            ],
                        }
                    }
                ],
            },
        ],
        "tools": [
            {
                "computer_use": {
                    "environment": "ENVIRONMENT_BROWSER",
                    "excluded_predefined_functions": ["search"],
                }
            }
        ],
    }
    status, _ = _post(gemini.base_url + CU_PATH, body)
    assert status == 200, gemini.violations
    req = gemini.last_request
    assert req.method == "POST"
    assert req.headers["x-goog-api-key"] == DUMMY_API_KEY
    assert req.body == body
    assert req.computer_use_tool() == {
        "environment": "ENVIRONMENT_BROWSER",
        "excludedPredefinedFunctions": ["search"],
    }
    assert gemini.image_parts() == [png, png]
    assert gemini.function_responses() == [
        {"name": "click_at", "response": {"url": ""}, "id": None, "images": [png]}
    ]


# ------------------------------------------------------------------ contract checks


def test_missing_key_is_refused(gemini: GeminiStandIn) -> None:
    gemini.script(Reply.text("never"))
    status, body = _post(gemini.base_url + CU_PATH, _request(_user_text()), key=None)
    assert status == 403 and body["error"]["status"] == "PERMISSION_DENIED"
    assert [v.rule for v in gemini.violations] == ["api_key"]
    assert gemini.remaining == 1


def test_wrong_key_is_refused_when_a_key_is_expected() -> None:
    with GeminiStandIn([Reply.text("ok")], expected_api_key="right") as standin:
        status, body = _post(standin.base_url + CU_PATH, _request(_user_text()), key="wrong")
        assert status == 400 and "API key not valid" in body["error"]["message"]
        status, _ = _post(standin.base_url + CU_PATH, _request(_user_text()), key="right")
        assert status == 200


def test_computer_use_model_needs_the_tool(gemini: GeminiStandIn, make_planner: Factory) -> None:
    gemini.script(Reply.text("ok"))
    planner = make_planner()
    with pytest.raises(ApiError) as info:
        planner.generate(_task("x"), config=types.GenerateContentConfig())
    assert info.value.status_code == 400
    assert "requires the use of the Computer Use tool" in info.value.message
    # Another model has no such requirement.
    other = make_planner(model="gemini-3-flash-preview")
    other.generate(_task("x"), config=types.GenerateContentConfig())
    assert [v.rule for v in gemini.violations] == ["computer_use_tool"]


def test_user_image_must_really_be_a_png(gemini: GeminiStandIn, make_planner: Factory) -> None:
    gemini.script(Reply.text("ok"))
    planner = make_planner()
    with pytest.raises(ApiError) as info:
        planner.generate(_task("x", make_jpeg()))  # labelled image/png
    assert info.value.status_code == 400
    assert "not a valid PNG" in info.value.message
    status, body = _post(
        gemini.base_url + CU_PATH,
        _request(
            {
                "role": "user",
                "parts": [{"inlineData": {"mimeType": "image/jpeg", "data": _b64(make_jpeg())}}],
            }
        ),
    )
    assert status == 400 and "requires image of mime_type image/png" in body["error"]["message"]


def test_function_response_without_a_call_is_refused(gemini: GeminiStandIn) -> None:
    orphan = {"role": "user", "parts": [{"functionResponse": {"name": "click_at", "response": {}}}]}
    status, body = _post(gemini.base_url + CU_PATH, _request(_user_text(), orphan))
    assert status == 400
    assert (
        "function response turn comes immediately after a function call turn"
        in body["error"]["message"]
    )


def test_history_ending_with_unanswered_calls_is_refused(gemini: GeminiStandIn) -> None:
    model = {"role": "model", "parts": [{"functionCall": {"name": "go_back", "args": {}}}]}
    status, body = _post(gemini.base_url + CU_PATH, _request(_user_text(), model))
    assert status == 400
    assert "expected responses ['go_back']" in body["error"]["message"]


# ------------------------------------------------------------------ command line


def test_command_line_serves_a_json_script(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"calls": [{"name": "search", "args": {}}]}, {"text": "bye"}]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "vnc_use.testing.gemini_standin", "--script", str(script)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:")
        status, body = _post(base_url + CU_PATH, _request(_user_text()))
        assert status == 200
        assert body["candidates"][0]["content"]["parts"] == [
            {"functionCall": {"name": "search", "args": {}}}
        ]
        status, _ = _post(base_url + CU_PATH.replace("v1beta", "v1"), _request(_user_text()))
        assert status == 404  # v1beta only, unless --api-version says otherwise
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# ------------------------------------------------------------------ model families (rules 6, 7)

G35_PATH = "/v1beta/models/gemini-3.5-flash:generateContent"
G3_PATH = "/v1beta/models/gemini-3-flash-preview:generateContent"


def _cu(environment: str | None = None, excluded: list[str] | None = None) -> dict[str, Any]:
    cu: dict[str, Any] = {}
    if environment is not None:
        cu["environment"] = environment
    if excluded is not None:
        cu["excluded_predefined_functions"] = excluded
    return {"computerUse": cu}


@pytest.mark.parametrize(
    ("path", "tool"),
    [
        (G35_PATH, _cu("ENVIRONMENT_DESKTOP")),
        (G35_PATH, _cu("ENVIRONMENT_DESKTOP", ["middle_click", "hotkey"])),
        (G35_PATH, _cu("ENVIRONMENT_BROWSER", ["navigate"])),
        (G35_PATH, _cu("ENVIRONMENT_MOBILE", ["open_app", "long_press"])),
        (G35_PATH, _cu()),  # no environment: the browser
        (CU_PATH, _cu("ENVIRONMENT_BROWSER", ["navigate", "search"])),
        (G3_PATH, _cu("ENVIRONMENT_BROWSER", ["open_web_browser"])),
    ],
)
def test_documented_tool_shapes_are_accepted(
    gemini: GeminiStandIn, path: str, tool: dict[str, Any]
) -> None:
    gemini.script(Reply.text("ok"))
    status, body = _post(gemini.base_url + path, _request(_user_text(), tools=[tool]))
    assert status == 200, body
    assert not gemini.violations


@pytest.mark.parametrize(
    ("path", "tools", "rule", "message"),
    [
        (G35_PATH, [], "computer_use_tool", "needs a computer_use tool"),
        (G35_PATH, [_cu("ENVIRONMENT_MARS")], "computer_use_environment", "Invalid value"),
        (
            CU_PATH,
            [_cu("ENVIRONMENT_DESKTOP")],
            "computer_use_environment",
            "ENVIRONMENT_DESKTOP is not supported by gemini-2.5-computer-use",
        ),
        (G3_PATH, [_cu("ENVIRONMENT_DESKTOP")], "computer_use_environment", "Gemini 3.5 Flash"),
        (
            G35_PATH,
            [_cu("ENVIRONMENT_DESKTOP", ["navigate"])],
            "excluded_functions",
            "'navigate' not predefined for gemini-3.5-flash in ENVIRONMENT_DESKTOP",
        ),
        (
            G35_PATH,
            [_cu("ENVIRONMENT_DESKTOP", ["click_at"])],
            "excluded_functions",
            "'click_at'",
        ),
        (CU_PATH, [_cu("ENVIRONMENT_BROWSER", ["click"])], "excluded_functions", "'click'"),
    ],
)
def test_tool_that_does_not_fit_the_model_is_refused(
    gemini: GeminiStandIn, path: str, tools: list[Any], rule: str, message: str
) -> None:
    gemini.script(Reply.text("ok"))
    status, body = _post(gemini.base_url + path, _request(_user_text(), tools=tools))
    assert status == 400
    assert message in body["error"]["message"]
    assert [v.rule for v in gemini.violations] == [rule]
    assert gemini.remaining == 1  # a refused request does not use up the script


def test_gemini_3_replies_are_signed_and_signatures_must_come_back(gemini: GeminiStandIn) -> None:
    tools = [_cu("ENVIRONMENT_DESKTOP")]
    gemini.script(
        Reply.calls(
            FunctionCallSpec("click", x=1, y=2, intent="open it"),
            FunctionCallSpec("type", text="hi", intent="say hi"),
        ),
        Reply.text("ok"),
        Reply.text("ok"),
    )
    status, body = _post(gemini.base_url + G35_PATH, _request(_user_text(), tools=tools))
    assert status == 200
    parts = body["candidates"][0]["content"]["parts"]
    assert "thoughtSignature" in parts[0] and "thoughtSignature" not in parts[1]
    sig = parts[0]["thoughtSignature"]
    responses = {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "click", "response": {"url": ""}}},
            {"functionResponse": {"name": "type", "response": {"url": ""}}},
        ],
    }

    def history(first_part: dict[str, Any]) -> dict[str, Any]:
        model = {"role": "model", "parts": [first_part, parts[1]]}
        return _request(_user_text(), model, responses, tools=tools)

    unsigned = {"functionCall": parts[0]["functionCall"]}
    status, body = _post(gemini.base_url + G35_PATH, history(unsigned))
    assert status == 400
    assert body["error"]["message"] == (
        "Function call `click` in the `1.` content block is missing a `thought_signature`."
    )
    forged = {**unsigned, "thoughtSignature": _b64(b"forged")}
    status, body = _post(gemini.base_url + G35_PATH, history(forged))
    assert status == 400 and body["error"]["message"] == "Corrupted thought signature."
    # URL-safe base64 of the same bytes (as the SDK sends it) is the same signature
    same = {**unsigned, "thoughtSignature": sig.replace("+", "-").replace("/", "_")}
    status, body = _post(gemini.base_url + G35_PATH, history(same))
    assert status == 200, body
    assert [v.rule for v in gemini.violations] == ["thought_signature"] * 2


def test_signing_follows_the_model_and_the_switch() -> None:
    call = Reply.calls(FunctionCallSpec("click_at", x=1, y=2))
    with GeminiStandIn([call, call]) as api:
        _, body = _post(api.base_url + CU_PATH, _request(_user_text()))
        assert "thoughtSignature" not in body["candidates"][0]["content"]["parts"][0]
        _, body = _post(api.base_url + G3_PATH, _request(_user_text()))
        assert "thoughtSignature" in body["candidates"][0]["content"]["parts"][0]
    with GeminiStandIn([call], sign_calls=False) as api:
        _, body = _post(api.base_url + G3_PATH, _request(_user_text()))
        assert "thoughtSignature" not in body["candidates"][0]["content"]["parts"][0]
    given = Reply.calls(FunctionCallSpec("click_at", x=1, y=2, thought_signature=b"mine"))
    with GeminiStandIn([given], sign_calls=True) as api:
        _, body = _post(api.base_url + CU_PATH, _request(_user_text()))
        assert body["candidates"][0]["content"]["parts"][0]["thoughtSignature"] == _b64(b"mine")
    assert "thoughtSignature" not in call.body["candidates"][0]["content"]["parts"][0]


def test_model_generation() -> None:
    from vnc_use.testing.gemini_standin import ENVIRONMENT_FUNCTIONS, model_generation

    assert model_generation(DEFAULT_MODEL) == "2.5"
    assert model_generation("gemini-3-flash-preview") == "3"
    assert model_generation("gemini-3.5-flash") == "3.5"
    assert model_generation("gemini-2.5-flash") is None
    assert len(ENVIRONMENT_FUNCTIONS["3.5"]["ENVIRONMENT_BROWSER"]) == 20
    assert len(ENVIRONMENT_FUNCTIONS["3.5"]["ENVIRONMENT_DESKTOP"]) == 17
    assert len(ENVIRONMENT_FUNCTIONS["2.5"]["ENVIRONMENT_BROWSER"]) == 13


# ------------------------------------------------------------------ what the real API refuses

BAD_REQUEST = "INVALID_ARGUMENT"
PNG_B64 = _b64(make_png(4, 4))


def _refused(status: int, body: dict[str, Any], message: str) -> None:
    """Status 400 and exactly the API's error body with ``message``."""
    assert status == 400, body
    assert body == {"error": {"code": 400, "message": message, "status": BAD_REQUEST}}


def _call_turn(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "model", "parts": [{"functionCall": c} for c in calls]}


def _response_turn(*responses: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "parts": [{"functionResponse": r} for r in responses]}


def _png_part(png: bytes, spelling: str = "inlineData") -> dict[str, Any]:
    return {spelling: {"mimeType": "image/png", "data": _b64(png)}}


@pytest.mark.standin_refusals
@pytest.mark.parametrize("role", ["system", "function", "tool", "assistant", "USER", "", None])
def test_a_role_other_than_user_or_model_is_refused(gemini: GeminiStandIn, role: Any) -> None:
    gemini.script(Reply.text("never"))
    content: dict[str, Any] = {"parts": [{"text": "task"}]}
    if role is not None:
        content["role"] = role
    status, body = _post(gemini.base_url + CU_PATH, _request(content))
    _refused(status, body, "Please use a valid role: user, model.")
    assert [v.rule for v in gemini.violations] == ["role"]
    assert gemini.remaining == 1


@pytest.mark.standin_refusals
@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {**_request(_user_text()), "foo": 1},
            'Invalid JSON payload received. Unknown name "foo": Cannot find field.',
        ),
        (
            _request({"role": "user", "parts": [{"text": "task", "foo": "bar"}]}),
            'Invalid JSON payload received. Unknown name "foo" at '
            "'contents[0].parts[0]': Cannot find field.",
        ),
        (
            _request({"role": "user", "parts": [{"text": "t"}], "tone": "kind"}),
            "Invalid JSON payload received. Unknown name \"tone\" at 'contents[0]': "
            "Cannot find field.",
        ),
        (
            _request(
                _user_text(),
                _call_turn({"name": "go_back", "args": {}}),
                _response_turn({"name": "go_back", "response": {}, "content": "done"}),
            ),
            'Invalid JSON payload received. Unknown name "content" at '
            "'contents[2].parts[0].function_response': Cannot find field.",
        ),
        (
            _request(
                {
                    "role": "user",
                    "parts": [{"inline_data": {"mime_type": "image/png", "data": PNG_B64, "x": 1}}],
                }
            ),
            'Invalid JSON payload received. Unknown name "x" at '
            "'contents[0].parts[0].inline_data': Cannot find field.",
        ),
        (
            _request(
                _user_text(),
                tools=[{"computerUse": {"environment": "ENVIRONMENT_BROWSER", "os": "linux"}}],
            ),
            'Invalid JSON payload received. Unknown name "os" at '
            "'tools[0].computer_use': Cannot find field.",
        ),
        (
            {
                **_request(_user_text()),
                "generationConfig": {"thinkingConfig": {"include_thoughts": True, "depth": 3}},
            },
            'Invalid JSON payload received. Unknown name "depth" at '
            "'generation_config.thinking_config': Cannot find field.",
        ),
        (
            _request(
                _user_text(),
                tools=[
                    CU_TOOL,
                    {
                        "functionDeclarations": [
                            {
                                "name": "lookup",
                                "parameters": {
                                    "type": "OBJECT",
                                    "properties": {
                                        "q": {"type": "STRING"},
                                        "kind": {"type": "STRING", "const": "a"},
                                    },
                                },
                            }
                        ]
                    },
                ],
            ),
            'Invalid JSON payload received. Unknown name "const" at '
            "'tools[1].function_declarations[0].parameters.properties[1].value': "
            "Cannot find field.",
        ),
    ],
)
def test_unknown_fields_are_refused_at_any_level(
    gemini: GeminiStandIn, body: dict[str, Any], message: str
) -> None:
    gemini.script(Reply.text("never"))
    status, answer = _post(gemini.base_url + CU_PATH, body)
    _refused(status, answer, message)
    assert [v.rule for v in gemini.violations] == ["unknown_field"]
    assert gemini.remaining == 1


@pytest.mark.standin_refusals
def test_every_unknown_name_is_reported_one_per_line(gemini: GeminiStandIn) -> None:
    body = {
        "contents": [{"role": "user", "parts": [{"text": "t", "a": 1}, {"text": "u", "b": 2}]}],
        "tools": [CU_TOOL],
        "c": 3,
    }
    status, answer = _post(gemini.base_url + CU_PATH, body)
    _refused(
        status,
        answer,
        "Invalid JSON payload received. Unknown name \"a\" at 'contents[0].parts[0]': "
        "Cannot find field.\n"
        "Invalid JSON payload received. Unknown name \"b\" at 'contents[0].parts[1]': "
        "Cannot find field.\n"
        'Invalid JSON payload received. Unknown name "c": Cannot find field.',
    )
    assert [v.rule for v in gemini.violations] == ["unknown_field"] * 3


def test_known_fields_pass_in_both_spellings(gemini: GeminiStandIn) -> None:
    """camelCase JSON names and snake_case proto names, mixed as the SDK mixes them."""
    png = make_png(4, 4)
    gemini.script(Reply.text("ok"), Reply.text("ok"))
    call = {"id": "c1", "name": "click_at", "args": {"x": 1, "y": 2, "anything": [1]}}
    camel = {
        "contents": [
            {"role": "user", "parts": [{"text": "task"}, _png_part(png)]},
            {
                "role": "model",
                "parts": [
                    {"text": "thinking", "thought": True},
                    {"functionCall": call, "thoughtSignature": _b64(b"sig")},
                ],
            },
            _response_turn(
                {
                    "id": "c1",
                    "name": "click_at",
                    "response": {"url": "", "nested": {"list": [1, "two"]}},
                    "parts": [_png_part(png)],
                }
            ),
        ],
        "tools": [
            {
                "computerUse": {
                    "environment": "ENVIRONMENT_BROWSER",
                    "excludedPredefinedFunctions": ["search"],
                }
            },
            {
                "functionDeclarations": [
                    {
                        "name": "lookup",
                        "description": "find",
                        "parametersJsonSchema": {"type": "object", "const": "free-form"},
                    }
                ]
            },
        ],
        "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
        "systemInstruction": {"parts": [{"text": "be careful"}]},
        "safetySettings": [
            {"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"}
        ],
        "generationConfig": {
            "temperature": 0.5,
            "maxOutputTokens": 100,
            "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 128},
        },
    }
    snake = {
        "contents": [
            {"role": "user", "parts": [{"text": "task"}, _png_part(png, "inline_data")]},
            {
                "role": "model",
                "parts": [
                    {"text": "thinking", "thought": True},
                    {"function_call": call, "thought_signature": _b64(b"sig")},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "function_response": {
                            "id": "c1",
                            "name": "click_at",
                            "response": {"url": ""},
                            "parts": [
                                {"inline_data": {"mime_type": "image/png", "data": _b64(png)}}
                            ],
                        }
                    }
                ],
            },
        ],
        "tools": [
            {
                "computer_use": {
                    "environment": "ENVIRONMENT_BROWSER",
                    "excluded_predefined_functions": ["search"],
                }
            }
        ],
        "tool_config": {"function_calling_config": {"mode": "AUTO"}},
        "system_instruction": {"parts": [{"text": "be careful"}]},
        "generation_config": {
            "max_output_tokens": 100,
            "thinking_config": {"include_thoughts": False},
        },
    }
    for body in (camel, snake):
        status, answer = _post(gemini.base_url + CU_PATH, body)
        assert status == 200, answer
    assert not gemini.violations


@pytest.mark.standin_refusals
@pytest.mark.parametrize(
    ("contents", "message"),
    [
        (
            [_user_text(), {"role": "model", "parts": []}, _user_text()],
            "* GenerateContentRequest.contents[1].parts: contents.parts must not be empty.\n",
        ),
        (
            [{"role": "user"}],
            "* GenerateContentRequest.contents[0].parts: contents.parts must not be empty.\n",
        ),
        (
            [{"role": "user", "parts": []}, {"role": "model", "parts": None}, _user_text()],
            "* GenerateContentRequest.contents[0].parts: contents.parts must not be empty.\n"
            "* GenerateContentRequest.contents[1].parts: contents.parts must not be empty.\n",
        ),
    ],
)
def test_a_content_without_parts_is_refused(
    gemini: GeminiStandIn, contents: list[Any], message: str
) -> None:
    gemini.script(Reply.text("never"))
    status, body = _post(gemini.base_url + CU_PATH, _request(*contents))
    _refused(status, body, message)
    assert [v.rule for v in gemini.violations] == ["empty_parts"]


@pytest.mark.standin_refusals
@pytest.mark.parametrize(
    ("response", "message"),
    [
        (
            "done",
            "Invalid value at 'contents[2].parts[0].function_response.response' "
            '(type.googleapis.com/google.protobuf.Struct), "done"',
        ),
        (
            5,
            "Invalid value at 'contents[2].parts[0].function_response.response' "
            "(type.googleapis.com/google.protobuf.Struct), 5",
        ),
        (
            [{"url": ""}],
            'Invalid JSON payload received. Unknown name "response" at '
            "'contents[2].parts[0].function_response': Proto field is not repeating, "
            "cannot start list.",
        ),
    ],
)
def test_a_function_response_that_is_not_an_object_is_refused(
    gemini: GeminiStandIn, response: Any, message: str
) -> None:
    gemini.script(Reply.text("never"))
    body = _request(
        _user_text(),
        _call_turn({"name": "go_back", "args": {}}),
        _response_turn({"name": "go_back", "response": response}),
    )
    status, answer = _post(gemini.base_url + CU_PATH, body)
    _refused(status, answer, message)
    assert [v.rule for v in gemini.violations] == ["function_response_value"]


@pytest.mark.standin_refusals
@pytest.mark.parametrize(
    ("call_id", "response_id"), [("c1", "c2"), ("c1", None), (None, "c1"), ("c1", "")]
)
def test_function_response_ids_must_match_their_calls(
    gemini: GeminiStandIn, call_id: str | None, response_id: str | None
) -> None:
    gemini.script(Reply.text("never"), Reply.text("ok"))
    call: dict[str, Any] = {"name": "go_back", "args": {}}
    resp: dict[str, Any] = {"name": "go_back", "response": {"url": ""}}
    if call_id is not None:
        call["id"] = call_id
    if response_id is not None:
        resp["id"] = response_id
    body = _request(_user_text(), _call_turn(call), _response_turn(resp))
    status, answer = _post(gemini.base_url + CU_PATH, body)
    _refused(
        status,
        answer,
        f"contents[2]: function response 0 ('go_back') has id {response_id!r}, but the "
        f"function call it answers in contents[1] has id {call_id!r}; a function response "
        f"must carry the id of its call.",
    )
    assert [v.rule for v in gemini.violations] == ["function_response_id"]
    # the same history with the call's id is served
    body = _request(_user_text(), _call_turn(call), _response_turn({**resp, "id": call_id}))
    status, answer = _post(gemini.base_url + CU_PATH, body)
    assert status == 200, answer


def test_parallel_calls_are_answered_by_id_in_order(gemini: GeminiStandIn) -> None:
    gemini.script(Reply.text("ok"))
    body = _request(
        _user_text(),
        _call_turn(
            {"id": "a", "name": "go_back", "args": {}}, {"id": "b", "name": "go_back", "args": {}}
        ),
        _response_turn(
            {"id": "a", "name": "go_back", "response": {}},
            {"id": "b", "name": "go_back", "response": {}},
        ),
    )
    status, answer = _post(gemini.base_url + CU_PATH, body)
    assert status == 200, answer


@pytest.mark.standin_refusals
def test_function_response_parts_hold_images_only(gemini: GeminiStandIn) -> None:
    gemini.script(Reply.text("never"))
    png = make_png(4, 4)

    def history(*fr_parts: dict[str, Any]) -> dict[str, Any]:
        fr = {"name": "go_back", "response": {"url": ""}, "parts": list(fr_parts)}
        return _request(
            _user_text(), _call_turn({"name": "go_back", "args": {}}), _response_turn(fr)
        )

    # a text part: the parser knows no such field
    status, body = _post(gemini.base_url + CU_PATH, history(_png_part(png), {"text": "extra"}))
    _refused(
        status,
        body,
        'Invalid JSON payload received. Unknown name "text" at '
        "'contents[2].parts[0].function_response.parts[1]': Cannot find field.",
    )
    assert [v.rule for v in gemini.violations] == ["unknown_field", "function_response_parts"]
    # inline data that is not an image
    gemini.violations.clear()
    text_blob = {"inlineData": {"mimeType": "text/plain", "data": _b64(b"hello")}}
    status, body = _post(gemini.base_url + CU_PATH, history(_png_part(png), text_blob))
    _refused(
        status,
        body,
        "contents[2].parts[0].function_response.parts[1] holds inline data of type "
        "'text/plain': the parts of a function response may hold inline images only.",
    )
    assert [v.rule for v in gemini.violations] == ["function_response_parts"]
    # an empty part
    gemini.violations.clear()
    status, body = _post(gemini.base_url + CU_PATH, history({}))
    _refused(
        status,
        body,
        "contents[2].parts[0].function_response.parts[0] holds no image: the parts of a "
        "function response may hold inline images only.",
    )
    assert gemini.remaining == 1


@pytest.mark.standin_refusals
def test_a_body_over_the_inline_limit_is_refused(gemini: GeminiStandIn) -> None:
    gemini.script(Reply.text("fits"))
    assert MAX_REQUEST_BYTES == 20 * 1024 * 1024
    frame = json.dumps(_request({"role": "user", "parts": [{"text": ""}]})).encode()
    pad = MAX_REQUEST_BYTES - len(frame)
    at_limit = json.dumps(_request({"role": "user", "parts": [{"text": "x" * pad}]})).encode()
    assert len(at_limit) == MAX_REQUEST_BYTES
    status, body = _post(gemini.base_url + CU_PATH, at_limit)
    assert status == 200, body
    over = json.dumps(_request({"role": "user", "parts": [{"text": "x" * (pad + 1)}]})).encode()
    status, body = _post(gemini.base_url + CU_PATH, over)
    _refused(status, body, "Request payload size exceeds the limit: 20971520 bytes.")
    assert [v.rule for v in gemini.violations] == ["request_size"]
    assert gemini.last_request.body is None  # not parsed


@pytest.mark.standin_refusals
def test_the_limit_can_be_set() -> None:
    with GeminiStandIn([Reply.text("ok")], max_request_bytes=1000) as api:
        status, body = _post(api.base_url + CU_PATH, _request(_user_text("x" * 1000)))
        _refused(status, body, "Request payload size exceeds the limit: 1000 bytes.")


@pytest.mark.standin_refusals
def test_refusals_reach_the_listeners(gemini: GeminiStandIn) -> None:
    seen: list[Violation] = []
    add_violation_listener(seen.append)
    try:
        _post(gemini.base_url + CU_PATH, _request({"role": "system", "parts": [{"text": "x"}]}))
    finally:
        remove_violation_listener(seen.append)
    assert [v.rule for v in seen] == ["role"]


@pytest.mark.standin_refusals  # the inner run's refusal reaches this test's listener too
def test_a_refusal_fails_a_test_not_marked_for_it(pytester: pytest.Pytester) -> None:
    """The autouse fixture turns a refusal the test did not ask for into a failure."""
    pytester.makeconftest(
        "from gemini_fixtures import *  # noqa: F403\n"
        "def pytest_configure(config):\n"
        "    config.addinivalue_line('markers', 'standin_refusals: on purpose')\n"
    )
    pytester.syspathinsert(str(Path(__file__).resolve().parents[1] / "helpers"))
    pytester.makepyfile(
        """
        import json, urllib.request, urllib.error
        import pytest

        def post(api):
            body = {"contents": [{"role": "system", "parts": [{"text": "x"}]}]}
            req = urllib.request.Request(
                api.base_url + "/v1beta/models/m:generateContent",
                data=json.dumps(body).encode(),
                headers={"x-goog-api-key": "k", "Content-Type": "application/json"},
            )
            try:
                urllib.request.urlopen(req, timeout=10)
            except urllib.error.HTTPError as err:
                return err.code

        def test_unmarked(gemini):
            assert post(gemini) == 400

        @pytest.mark.standin_refusals
        def test_marked(gemini):
            assert post(gemini) == 400
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        ["*the Gemini stand-in refused requests the real API would refuse*", "*[[]role[]]*"]
    )


def test_command_line_reports_refusals_on_stderr(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "bye"}]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "vnc_use.testing.gemini_standin", "--script", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        base_url = proc.stdout.readline().strip()
        status, _ = _post(base_url + CU_PATH, _request({"role": "tool", "parts": [{"text": "x"}]}))
        assert status == 400
        assert proc.stderr.readline().strip() == (
            "stand-in refused request 0 [role]: Please use a valid role: user, model."
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.desktop
def test_the_agent_answers_each_call_with_its_id(
    probe: Any, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """Through the real SDK and a real desktop: ids come back on every response, in every
    later request's history too, for executed calls and for calls answered with an error."""
    from vnc_use import VncUseAgent

    gemini.script(
        Reply.calls(
            FunctionCallSpec("hover_at", x=500, y=500, call_id="first"),
            FunctionCallSpec("click_at", x=5000, y=1, call_id="bad-args"),  # off the grid
        ),
        Reply.calls(FunctionCallSpec("hover_at", x=400, y=400, call_id="second")),
        Reply.text("done"),
    )
    with VncUseAgent(
        vnc_server=probe.desktop.server,
        vnc_password=probe.desktop.password,
        runs_dir=tmp_path / "runs",
        planner=GeminiComputerUse(retry_initial_delay=0.01, retry_max_delay=0.05),
        hitl_mode=False,
    ) as agent:
        result = agent.run(task="Hover twice")
    assert result.status == "done", result.error
    assert [t["result"] for t in result.transcript] == ["ok", "error", "ok"]
    ids = [[r["id"] for r in req.function_responses()] for req in gemini.requests]
    assert ids == [[], ["first", "bad-args"], ["first", "bad-args", "second"]]
    assert not gemini.violations and not gemini.exhausted
