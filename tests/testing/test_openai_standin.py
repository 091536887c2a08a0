"""The OpenAI-compatible stand-in: the real ``openai`` SDK on the happy paths, raw bodies for
every refusal, and the command line."""

from __future__ import annotations

import base64
import io
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI
from PIL import Image

from vnc_use.testing.gemini_standin import make_png
from vnc_use.testing.openai_standin import (
    DEFAULT_MAX_IMAGES,
    DEFAULT_MODEL,
    EXHAUSTED_TEXT,
    FINISH_TOOL,
    OpenAIStandIn,
    Reply,
    ToolCall,
    Violation,
    add_violation_listener,
    data_url,
    remove_violation_listener,
)

MODEL = "ui-tars-1.5-7b"
KEY = "sk-test-not-a-real-key"
PNG_URL = data_url(make_png(16, 10))
UI_TARS = "Thought: The File menu is at the top left.\nAction: click(start_box='(100,200)')"
QWEN = (
    "<tool_call>\n"
    '{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [500, 500]}}\n'
    "</tool_call>"
)


def _client(server: OpenAIStandIn, **kwargs: Any) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, **kwargs)


def _user(text: str = "Open the File menu", *images: str) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    parts += [{"type": "image_url", "image_url": {"url": url}} for url in images]
    return {"role": "user", "content": parts}


def _assistant_calls(*ids: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "click", "arguments": "{}"}}
            for i in ids
        ],
    }


def _tool(call_id: str, content: Any = "clicked") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _jpeg() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (12, 8), (200, 40, 40)).save(buf, format="JPEG")
    return buf.getvalue()


# ----------------------------------------------------------------------------- the SDK


def test_models_are_listed_and_looked_up_through_the_sdk() -> None:
    with OpenAIStandIn(models=[MODEL, "qwen3-vl-8b"]) as server:
        client = _client(server)
        assert [m.id for m in client.models.list()] == [MODEL, "qwen3-vl-8b"]
        assert client.models.retrieve(MODEL).id == MODEL
        with pytest.raises(openai.NotFoundError) as caught:
            client.models.retrieve("llava")
        assert caught.value.code == "model_not_found"


def test_text_dialects_are_served_as_assistant_content() -> None:
    with OpenAIStandIn([Reply.text(UI_TARS), {"content": QWEN}], models=MODEL) as server:
        client = _client(server)
        first = client.chat.completions.create(model=MODEL, messages=[_user()])
        second = client.chat.completions.create(model=MODEL, messages=[_user()])
    assert first.object == "chat.completion" and first.model == MODEL
    assert first.choices[0].message.role == "assistant"
    assert first.choices[0].message.content == UI_TARS
    assert first.choices[0].message.tool_calls is None
    assert first.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == QWEN
    assert first.usage is not None and first.usage.total_tokens > 0
    assert first.id != second.id
    assert not server.violations and server.remaining == 0 and not server.exhausted


def test_tool_calls_carry_generated_or_scripted_ids_and_json_string_arguments() -> None:
    script = [
        Reply.tool_calls(
            ToolCall("click", {"x": 500, "y": 300, "intent": "Open File"}),
            ToolCall("type", {"text": "hello", "press_enter": True}, id="call_given"),
            content="Two steps.",
        ),
        Reply.tool_calls(ToolCall("click", '{"x": 5')),  # malformed arguments, verbatim
    ]
    with OpenAIStandIn(script) as server:
        client = _client(server)
        reply = client.chat.completions.create(model=DEFAULT_MODEL, messages=[_user()])
        broken = client.chat.completions.create(model=DEFAULT_MODEL, messages=[_user()])
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Two steps."
    calls = choice.message.tool_calls
    assert calls is not None and len(calls) == 2
    first, second = calls
    assert first.type == "function" and second.type == "function"
    assert first.id.startswith("call_") and second.id == "call_given"
    assert first.function.name == "click"
    assert json.loads(first.function.arguments) == {"x": 500, "y": 300, "intent": "Open File"}
    assert json.loads(second.function.arguments) == {"text": "hello", "press_enter": True}
    broken_calls = broken.choices[0].message.tool_calls
    assert broken_calls is not None and broken_calls[0].function.arguments == '{"x": 5'
    assert broken_calls[0].id != first.id


def test_an_empty_message_and_a_cut_off_one_can_be_scripted() -> None:
    script = [{"content": None}, {"content": "Thought: I will", "finish_reason": "length"}]
    with OpenAIStandIn(script) as server:
        client = _client(server)
        empty = client.chat.completions.create(model=DEFAULT_MODEL, messages=[_user()])
        cut = client.chat.completions.create(model=DEFAULT_MODEL, messages=[_user()])
    assert empty.choices[0].message.content is None
    assert empty.choices[0].message.tool_calls is None
    assert cut.choices[0].finish_reason == "length"
    assert cut.choices[0].message.content == "Thought: I will"


def test_a_finish_is_a_finish_tool_call() -> None:
    with OpenAIStandIn([Reply.finish("All done."), {"finish": "Also done."}]) as server:
        client = _client(server)
        replies = [
            client.chat.completions.create(model=DEFAULT_MODEL, messages=[_user()])
            for _ in range(2)
        ]
    for reply, text in zip(replies, ["All done.", "Also done."], strict=True):
        calls = reply.choices[0].message.tool_calls
        assert calls is not None and calls[0].function.name == FINISH_TOOL
        assert json.loads(calls[0].function.arguments) == {"text": text}


def test_a_full_tool_round_trip_with_a_screenshot_in_a_user_message_is_accepted() -> None:
    """The portable shape: text tool messages, then the screenshot in a user message."""
    jpeg_url = data_url(_jpeg(), "image/jpeg")
    with OpenAIStandIn(
        [
            Reply.tool_calls(ToolCall("click", {"x": 1, "y": 2}), ToolCall("wait", {})),
            Reply.text("done"),
        ]
    ) as server:
        client = _client(server)
        messages: list[Any] = [
            {"role": "system", "content": "You operate a desktop."},
            _user("Click it", PNG_URL),
        ]
        first = client.chat.completions.create(model=DEFAULT_MODEL, messages=messages)
        message = first.choices[0].message
        assert message.tool_calls is not None
        messages.append(message.model_dump(exclude_none=True))
        messages += [_tool(c.id, [{"type": "text", "text": "ok"}]) for c in message.tool_calls]
        messages.append(_user("The screen now", jpeg_url))
        second = client.chat.completions.create(model=DEFAULT_MODEL, messages=messages)
    assert second.choices[0].message.content == "done"
    assert not server.violations
    last = server.last_request
    assert last.images() == [make_png(16, 10), _jpeg()]
    assert [m["role"] for m in last.messages()] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
    ]


def test_requests_are_recorded_and_the_key_is_kept_out_of_headers() -> None:
    tools = [{"type": "function", "function": {"name": "click", "parameters": {"type": "object"}}}]
    with OpenAIStandIn([Reply.text("ok")]) as server:
        _client(server).chat.completions.create(
            model=DEFAULT_MODEL,
            messages=[_user("hi", PNG_URL)],
            tools=tools,
        )
        httpx.get(f"{server.base_url}/models")
    with_key, without_key = server.requests
    assert with_key.method == "POST" and with_key.path == "/v1/chat/completions"
    assert with_key.model == DEFAULT_MODEL and with_key.status == 200
    assert with_key.tools() == tools and with_key.script_index == 0
    assert with_key.has_authorization and with_key.api_key == KEY
    assert with_key.headers["authorization"] == "<redacted>"
    assert KEY not in repr(with_key) and KEY not in json.dumps(with_key.headers)
    assert with_key.images() == [make_png(16, 10)]
    assert not without_key.has_authorization and without_key.api_key is None


@pytest.mark.standin_refusals
def test_an_expected_key_is_enforced_without_echoing_it() -> None:
    with OpenAIStandIn([Reply.text("ok")], expected_api_key=KEY) as server:
        for key in ("sk-wrong-key", None):
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            answer = httpx.post(
                f"{server.base_url}/chat/completions",
                json={"model": DEFAULT_MODEL, "messages": [_user()]},
                headers=headers,
            )
            assert answer.status_code == 401
            assert answer.json()["error"]["code"] == "invalid_api_key"
            assert "sk-wrong-key" not in answer.text
        reply = _client(server).chat.completions.create(model=DEFAULT_MODEL, messages=[_user()])
    assert reply.choices[0].message.content == "ok"
    assert [v.rule for v in server.violations] == ["api_key", "api_key"]


def test_scripted_failures_reach_the_sdk_as_its_errors() -> None:
    script: list[Any] = [
        Reply.error(404),
        Reply.context_length_exceeded(limit=8192, got=9000),
        {"error": 500},
        {"error": "context_length_exceeded"},
        {"error": 503, "message": "Model is loading", "code": "model_loading"},
    ]
    with OpenAIStandIn(script) as server:
        client = _client(server)

        def ask() -> Any:
            return client.chat.completions.create(model=DEFAULT_MODEL, messages=[_user()])

        with pytest.raises(openai.NotFoundError) as not_found:
            ask()
        assert not_found.value.code == "model_not_found"
        with pytest.raises(openai.BadRequestError) as too_long:
            ask()
        assert too_long.value.code == "context_length_exceeded"
        assert too_long.value.param == "messages"
        assert "maximum context length is 8192 tokens" in too_long.value.message
        with pytest.raises(openai.InternalServerError) as server_error:
            ask()
        assert server_error.value.status_code == 500
        assert server_error.value.type == "server_error"
        with pytest.raises(openai.BadRequestError):
            ask()
        with pytest.raises(openai.InternalServerError) as loading:
            ask()
        assert loading.value.status_code == 503 and loading.value.code == "model_loading"
        assert "Model is loading" in loading.value.message
    assert not server.violations and server.remaining == 0


def test_a_delay_makes_the_client_time_out() -> None:
    with OpenAIStandIn(
        [Reply.text("late", delay=5.0), {"content": "on time", "delay": 0.05}]
    ) as server:
        client = _client(server, timeout=0.3)
        start = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            client.chat.completions.create(model=DEFAULT_MODEL, messages=[_user()])
        assert time.monotonic() - start < 3
        reply = client.chat.completions.create(model=DEFAULT_MODEL, messages=[_user()])
        assert reply.choices[0].message.content == "on time"
        started = time.monotonic()
    assert time.monotonic() - started < 3  # stop() does not wait for the delayed answer


def test_scripts_can_be_replaced_extended_computed_and_run_out() -> None:
    seen: list[tuple[str, int]] = []

    def answer(body: Any, index: int) -> Any:
        seen.append((body["messages"][-1]["content"][0]["text"], index))
        return {"content": f"answer {index}"}

    with OpenAIStandIn([Reply.text("one")]) as server:
        client = _client(server)

        def ask(text: str = "hi") -> str | None:
            reply = client.chat.completions.create(model=DEFAULT_MODEL, messages=[_user(text)])
            return reply.choices[0].message.content

        assert ask() == "one"
        assert ask() == EXHAUSTED_TEXT and server.exhausted
        server.extend(Reply.text("two"))
        assert ask() == "two"
        server.script(answer)
        assert ask("a") == "answer 0" and ask("b") == "answer 1"
        with pytest.raises(ValueError):
            server.extend(Reply.text("x"))
        server.script(Reply.text("x"), Reply.text("y"))
        assert server.remaining == 2 and ask() == "x"
    assert seen == [("a", 0), ("b", 1)]


@pytest.mark.standin_refusals
def test_a_refused_request_does_not_use_a_script_item() -> None:
    with OpenAIStandIn([Reply.text("first")], models=MODEL) as server:
        client = _client(server)
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="not-loaded", messages=[_user()])
        reply = client.chat.completions.create(model=MODEL, messages=[_user()])
    assert reply.choices[0].message.content == "first"
    assert [v.rule for v in server.violations] == ["model_not_found"]
    assert server.requests[0].script_index is None and server.requests[0].status == 404


@pytest.mark.standin_refusals
def test_violations_reach_the_listeners() -> None:
    seen: list[Violation] = []
    add_violation_listener(seen.append)
    try:
        with OpenAIStandIn() as server:
            httpx.post(f"{server.base_url}/chat/completions", json={"messages": [_user()]})
    finally:
        remove_violation_listener(seen.append)
    assert [(v.rule, v.status, v.request_index) for v in seen] == [("missing_field", 400, 0)]


def test_the_package_exports_the_class_lazily() -> None:
    code = (
        "import sys, vnc_use.testing as t\n"
        "assert 'vnc_use.testing.openai_standin' not in sys.modules\n"
        "assert 'openai' not in sys.modules\n"
        "assert t.OpenAIStandIn.__name__ == 'OpenAIStandIn'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# ----------------------------------------------------------------------------- refusals

_BASE: dict[str, Any] = {"model": DEFAULT_MODEL}
_GIF = base64.b64encode(b"GIF89a\x01\x00\x01\x00\x00\x00\x00;").decode()
_TRUNCATED_PNG = base64.b64encode(make_png(64, 64)[:60]).decode()

REFUSALS: list[tuple[str, Any, int, str, str | None, str | None, str]] = [
    # (case, body, status, rule, code, param, words in the message)
    ("not json", b"{not json", 400, "json", None, None, "could not parse the JSON body"),
    ("json array", [1, 2], 400, "json", None, None, "could not parse the JSON body"),
    (
        "no model",
        {"messages": [_user()]},
        400,
        "missing_field",
        None,
        None,
        "you must provide a model parameter",
    ),
    (
        "no messages",
        {**_BASE},
        400,
        "missing_field",
        "missing_required_parameter",
        "messages",
        "Missing required parameter: 'messages'.",
    ),
    (
        "empty messages",
        {**_BASE, "messages": []},
        400,
        "missing_field",
        "empty_array",
        "messages",
        "empty array",
    ),
    (
        "unknown role",
        {**_BASE, "messages": [{"role": "robot", "content": "hi"}]},
        400,
        "role",
        "invalid_value",
        "messages[0].role",
        "Invalid value: 'robot'. Supported values are:",
    ),
    (
        "streaming",
        {**_BASE, "messages": [_user()], "stream": True},
        400,
        "stream",
        None,
        "stream",
        "does not stream",
    ),
    (
        "model not loaded",
        {"model": "llava:7b", "messages": [_user()]},
        404,
        "model_not_found",
        "model_not_found",
        None,
        "The model `llava:7b` does not exist",
    ),
    (
        "image in a tool message",
        {
            **_BASE,
            "messages": [
                _user(),
                _assistant_calls("c1"),
                _tool("c1", [{"type": "image_url", "image_url": {"url": PNG_URL}}]),
            ],
        },
        400,
        "image_role",
        "invalid_value",
        "messages[2]",
        "Image URLs are only allowed for messages with role 'user', but this message with role "
        "'tool' contains an image URL.",
    ),
    (
        "image in an assistant message",
        {
            **_BASE,
            "messages": [
                _user(),
                {
                    "role": "assistant",
                    "content": [{"type": "image_url", "image_url": {"url": PNG_URL}}],
                },
            ],
        },
        400,
        "image_role",
        "invalid_value",
        "messages[1]",
        "with role 'assistant'",
    ),
    (
        "unanswered tool call",
        {**_BASE, "messages": [_user(), _assistant_calls("c1", "c2"), _tool("c1"), _user()]},
        400,
        "unanswered_tool_call",
        None,
        "messages.[1].role",
        "The following tool_call_ids did not have response messages: c2",
    ),
    (
        "tool calls at the end",
        {**_BASE, "messages": [_user(), _assistant_calls("c1")]},
        400,
        "unanswered_tool_call",
        None,
        "messages.[1].role",
        "must be followed by tool messages",
    ),
    (
        "tool answer to an unknown id",
        {**_BASE, "messages": [_user(), _assistant_calls("c1"), _tool("c1"), _tool("c9")]},
        400,
        "unknown_tool_call_id",
        None,
        "messages.[3].tool_call_id",
        "'tool_call_id' of 'c9' not found in 'tool_calls' of previous message.",
    ),
    (
        "tool message without a call",
        {**_BASE, "messages": [_user(), _tool("c1")]},
        400,
        "tool_without_call",
        None,
        "messages.[1].role",
        "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'",
    ),
    (
        "tool message without an id",
        {**_BASE, "messages": [_user(), _assistant_calls("c1"), {"role": "tool", "content": "x"}]},
        400,
        "missing_field",
        "missing_required_parameter",
        "messages[2].tool_call_id",
        "Missing required parameter: 'messages[2].tool_call_id'.",
    ),
    (
        "arguments as an object",
        {
            **_BASE,
            "messages": [
                _user(),
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "click", "arguments": {"x": 1}},
                        }
                    ],
                },
                _tool("c1"),
            ],
        },
        400,
        "field_type",
        "invalid_type",
        "messages[1].tool_calls[0].function.arguments",
        "expected a string, but got an object instead",
    ),
    (
        "unknown content part",
        {**_BASE, "messages": [{"role": "user", "content": [{"type": "video", "video": "x"}]}]},
        400,
        "content_part",
        "invalid_value",
        "messages[0].content[0].type",
        "Invalid value: 'video'.",
    ),
    (
        "image_url as a bare string",
        {
            **_BASE,
            "messages": [
                {"role": "user", "content": [{"type": "image_url", "image_url": PNG_URL}]}
            ],
        },
        400,
        "field_type",
        "invalid_type",
        "messages[0].content[0].image_url",
        "expected an object, but got a string instead",
    ),
    (
        "image by http URL",
        {**_BASE, "messages": [_user("x", "https://example.com/shot.png")]},
        400,
        "image_data",
        "invalid_image_url",
        "messages[0].content[1].image_url.url",
        "data URLs only",
    ),
    (
        "bad base64",
        {**_BASE, "messages": [_user("x", "data:image/png;base64,@@not-base64@@")]},
        400,
        "image_data",
        "invalid_image_format",
        "messages[0].content[1].image_url.url",
        "You uploaded an unsupported image.",
    ),
    (
        "truncated PNG",
        {**_BASE, "messages": [_user("x", f"data:image/png;base64,{_TRUNCATED_PNG}")]},
        400,
        "image_data",
        "invalid_image_format",
        None,
        "unsupported image",
    ),
    (
        "GIF",
        {**_BASE, "messages": [_user("x", f"data:image/gif;base64,{_GIF}")]},
        400,
        "image_data",
        "invalid_image_format",
        None,
        "unsupported image",
    ),
    (
        "JPEG declared as PNG",
        {**_BASE, "messages": [_user("x", data_url(_jpeg(), "image/png"))]},
        400,
        "image_data",
        "invalid_image_format",
        None,
        "unsupported image",
    ),
    (
        "tool of another type",
        {**_BASE, "messages": [_user()], "tools": [{"type": "computer_use_preview"}]},
        400,
        "tools",
        "invalid_value",
        "tools[0].type",
        "Supported values are: 'function'.",
    ),
    (
        "tool name with a space",
        {
            **_BASE,
            "messages": [_user()],
            "tools": [{"type": "function", "function": {"name": "left click"}}],
        },
        400,
        "tools",
        "invalid_value",
        "tools[0].function.name",
        "does not match pattern",
    ),
    (
        "tool without a name",
        {**_BASE, "messages": [_user()], "tools": [{"type": "function", "function": {}}]},
        400,
        "missing_field",
        "missing_required_parameter",
        "tools[0].function.name",
        "Missing required parameter: 'tools[0].function.name'.",
    ),
    (
        "tool parameters as a string",
        {
            **_BASE,
            "messages": [_user()],
            "tools": [{"type": "function", "function": {"name": "click", "parameters": "{}"}}],
        },
        400,
        "field_type",
        "invalid_type",
        "tools[0].function.parameters",
        "expected an object, but got a string instead",
    ),
    (
        "tool_choice without tools",
        {**_BASE, "messages": [_user()], "tool_choice": "auto"},
        400,
        "tools",
        None,
        "tool_choice",
        "only allowed when 'tools' are specified",
    ),
    (
        "too many images",
        {**_BASE, "messages": [_user("x", *[PNG_URL] * (DEFAULT_MAX_IMAGES + 1))]},
        400,
        "max_images",
        None,
        "messages",
        f"At most {DEFAULT_MAX_IMAGES} image(s) may be provided in one request.",
    ),
]


@pytest.mark.standin_refusals
@pytest.mark.parametrize(
    ("body", "status", "rule", "code", "param", "words"),
    [pytest.param(*case[1:], id=case[0]) for case in REFUSALS],
)
def test_bad_bodies_are_refused_like_a_strict_server(
    body: Any, status: int, rule: str, code: str | None, param: str | None, words: str
) -> None:
    with OpenAIStandIn([Reply.text("never served")]) as server:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        answer = httpx.post(
            f"{server.base_url}/chat/completions",
            content=content,
            headers={"Content-Type": "application/json"},
        )
    assert answer.status_code == status
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["code"] == code
    if param is not None:
        assert error["param"] == param
    assert words in error["message"]
    assert server.violations[0].rule == rule
    assert server.requests[0].violations == server.violations
    assert server.remaining == 1  # nothing was served


@pytest.mark.standin_refusals
def test_the_image_budget_counts_the_whole_request() -> None:
    messages = [_user("a", PNG_URL), {"role": "assistant", "content": "ok"}, _user("b", PNG_URL)]
    with OpenAIStandIn([Reply.text("fits")], max_images=2) as server:
        client = _client(server)
        assert client.chat.completions.create(model=DEFAULT_MODEL, messages=messages)
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(
                model=DEFAULT_MODEL, messages=[*messages, _user("c", PNG_URL)]
            )
    assert "At most 2 image(s)" in caught.value.message
    with OpenAIStandIn([Reply.text("any number")], max_images=None) as server:
        reply = _client(server).chat.completions.create(
            model=DEFAULT_MODEL, messages=[_user("x", *[PNG_URL] * 12)]
        )
        assert reply.choices[0].message.content == "any number"


@pytest.mark.standin_refusals
def test_every_broken_rule_is_recorded_and_the_first_is_answered() -> None:
    body = {
        "model": "missing-model",
        "messages": [_user("x", "data:image/png;base64,AAAA"), _assistant_calls("c1")],
    }
    with OpenAIStandIn() as server:
        answer = httpx.post(f"{server.base_url}/chat/completions", json=body)
    assert answer.status_code == 404
    assert [v.rule for v in server.violations] == [
        "model_not_found",
        "unanswered_tool_call",
        "image_data",
    ]


def test_unknown_paths_are_404() -> None:
    with OpenAIStandIn() as server:
        for answer in (
            httpx.post(f"{server.root_url}/chat/completions", json={}),
            httpx.get(f"{server.base_url}/chat/completions"),
            httpx.post(f"{server.base_url}/completions", json={}),
        ):
            assert answer.status_code == 404
            assert answer.json()["error"]["code"] == "unknown_url"
    assert not server.violations


# ----------------------------------------------------------------------------- command line


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_the_command_line_serves_a_script_and_reports_refusals(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            [
                {"content": UI_TARS},
                {"tool_calls": [{"name": "click", "arguments": {"x": 500, "y": 500}}]},
            ]
        ),
        encoding="utf-8",
    )
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vnc_use.testing.openai_standin",
            "--script",
            str(script),
            "--port",
            str(port),
            "--model",
            MODEL,
            "--max-images",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url == f"http://127.0.0.1:{port}/v1"
        client = OpenAI(base_url=base_url, api_key=KEY, max_retries=0)
        reply = client.chat.completions.create(model=MODEL, messages=[_user("x", PNG_URL)])
        assert reply.choices[0].message.content == UI_TARS
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model=MODEL, messages=[_user("x", PNG_URL, PNG_URL)])
        calls = client.chat.completions.create(model=MODEL, messages=[_user()])
        assert calls.choices[0].message.tool_calls is not None
    finally:
        os.kill(proc.pid, 2)  # SIGINT: the server stops and exits
        try:
            _, stderr = proc.communicate(timeout=60)  # a hang guard, not a speed check
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0
    assert "refused request 1 [max_images]" in stderr
    assert KEY not in stderr


def test_the_command_line_answers_like_a_family(tmp_path: Path) -> None:
    """``--family ui-venus --runs-dir DIR``: each request is answered with a click on the
    calibration target its newest text names, in UI-Venus' format (0-999 of the screen)."""
    run = tmp_path / "calibrate-1"
    run.mkdir()
    target = {"label": "K7", "box": [0, 0, 20, 10], "center": [682.5, 424.5], "size": [20, 10]}
    layout = {"screen": {"width": 1366, "height": 850}, "targets": [target]}
    (run / "calibration.json").write_text(json.dumps(layout))
    argv = [sys.executable, "-m", "vnc_use.testing.openai_standin", "--family", "ui-venus"]
    argv += ["--runs-dir", str(tmp_path), "--offset", "0,0"]
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        client = openai.OpenAI(base_url=base_url, api_key="none")
        answer = client.chat.completions.create(
            model="standin-vlm",
            messages=[{"role": "user", "content": "Click the target labelled 'K7'."}],
        )
    finally:
        server.terminate()
        server.wait(timeout=10)
    content = answer.choices[0].message.content or ""
    assert content.endswith("<action>Click(point=(500, 499))</action>"), content
