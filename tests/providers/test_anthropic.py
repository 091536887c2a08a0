"""The anthropic provider without a desktop: the tool-version table, the stand-in's strictness
through the real ``anthropic`` SDK, error translation, the one provider front."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic.lib.tools._toolsets._errors import ConfirmDeclinedError
from PIL import Image

from vnc_use import VncUseAgent
from vnc_use.actions import GEMINI_35_DESKTOP_TABLE, ActionError
from vnc_use.errors import ConfigError
from vnc_use.providers.anthropic import request, translate
from vnc_use.providers.anthropic.planner import AnthropicPlanner
from vnc_use.providers.anthropic.versions import HIGH_LIMITS, choose, fit, tokens
from vnc_use.providers.registry import make_planner, planner_from_settings, provider_for_model
from vnc_use.testing import FakeDesktop
from vnc_use.testing.anthropic_standin import Action, AnthropicStandIn, Reply

from cli_tools import run_cli

KEY = "sk-ant-unit-SECRET-9876"


def png(width: int, height: int) -> str:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buf, "PNG")
    return base64.b64encode(buf.getvalue()).decode()


def image(width: int, height: int) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": png(width, height)},
    }


# ---------------------------------------------------------------------- the table


@pytest.mark.parametrize(
    ("model", "version", "limits"),
    [
        ("claude-sonnet-5-5", "computer_toolset_20260801", "opus-4.7+"),
        ("claude-opus-4-8", "computer_toolset_20260801", "opus-4.7+"),
        ("claude-opus-4-7", "computer_20251124", "opus-4.7+"),
        ("claude-sonnet-4-6", "computer_20251124", "earlier"),
        ("claude-opus-4-5-20251101", "computer_20251124", "earlier"),
        ("claude-sonnet-4-5-20250929", "computer_20250124", "earlier"),
    ],
)
def test_the_tool_version_follows_the_model(model: str, version: str, limits: str) -> None:
    choice = choose(model)
    assert (choice.version, choice.limits.name, choice.warning) == (version, limits, None)


def test_an_unknown_claude_gets_the_toolset_with_a_warning_and_override_wins() -> None:
    choice = choose("claude-nova-7")
    assert choice.version == "computer_toolset_20260801"
    assert (
        choice.warning and "claude-nova-7" in choice.warning and "--tool-version" in choice.warning
    )
    assert choose("claude-sonnet-5-5", "computer_20251124").version == "computer_20251124"
    with pytest.raises(ConfigError, match="unknown tool version"):
        AnthropicPlanner("claude-sonnet-5-5", tool_version="computer_1999")


def test_resize_fits_the_limits() -> None:
    w, h = fit(2880, 1800, HIGH_LIMITS)
    assert max(w, h) <= 2576 and tokens(w, h) <= 4784 and abs(w / h - 1.6) < 0.01
    assert fit(1440, 900, HIGH_LIMITS) == (1440, 900)


def test_declined_answer_is_the_sdk_helpers_words() -> None:
    assert request.declined_text("type") == str(ConfirmDeclinedError("type"))


# ---------------------------------------------------------------------- the front


def test_provider_is_inferred_from_the_model_id() -> None:
    assert provider_for_model("claude-opus-5") == "anthropic"
    assert provider_for_model("gpt-5.5") == "openai"
    assert provider_for_model("computer-use-preview") == "openai"
    assert provider_for_model("gemini-3.5-flash") is None
    planner = make_planner(model="claude-opus-4-7", tool_version="computer_20250124")
    assert isinstance(planner, AnthropicPlanner)
    settings = planner.run_settings()
    assert settings == {
        "model": "claude-opus-4-7",
        "provider": "anthropic",
        "tool_version": "computer_20250124",
        "keep_screenshots": 3,
    }
    again = planner_from_settings(settings)
    assert isinstance(again, AnthropicPlanner) and again.tool_version == "computer_20250124"
    from vnc_use.providers.openai import OpenAIPlanner

    assert isinstance(make_planner(model="gpt-5.5"), OpenAIPlanner)
    with pytest.raises(ConfigError, match="not an OpenAI tool"):
        make_planner("openai", model="gpt-5.5", tool_version="computer_20250124")
    with pytest.raises(ConfigError, match="--tool-version"):
        make_planner("gemini", tool_version="computer_20250124")


@pytest.mark.parametrize(
    ("args", "env", "words"),
    [
        (["--model", "claude-opus-5"], {}, ["ANTHROPIC_API_KEY"]),
        (["--model", "gpt-5.5"], {"OPENAI_API_KEY": ""}, ["OPENAI_API_KEY"]),
        (
            ["--model", "claude-opus-5", "--tool-version", "computer_1"],
            {"ANTHROPIC_API_KEY": KEY},
            ["unknown tool version", "computer_20251124"],
        ),
        (["--tool-version", "computer_20251124"], {}, ["--tool-version", "anthropic"]),
    ],
)
def test_bad_anthropic_settings_are_one_line_exit_2(
    args: list[str], env: dict[str, str], words: list[str], tmp_path: Path
) -> None:
    proc = run_cli(
        ["run", "--vnc", "127.0.0.1::5999", "--task", "x", "--runs-dir", str(tmp_path), *args],
        env={"ANTHROPIC_API_KEY": "", **env},
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert all(w in line for w in words), line


# ---------------------------------------------------------------------- the stand-in


def client(server: AnthropicStandIn) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=KEY, base_url=server.base_url, max_retries=0)


TOOLSET = [{"type": "computer_toolset_20260801"}]
LEGACY = [
    {
        "type": "computer_20251124",
        "name": "computer",
        "display_width_px": 100,
        "display_height_px": 80,
    }
]


def bad(server: AnthropicStandIn, rule: str, beta: bool = False, **body: Any) -> str:
    body = {"model": "claude-opus-5", "max_tokens": 100, **body}
    with pytest.raises(anthropic.BadRequestError) as info:
        if beta:
            client(server).beta.messages.create(**body, betas=["computer-use-2025-11-24"])
        else:
            client(server).messages.create(**body)
    assert server.violations[-1].rule == rule
    return str(info.value)


def test_standin_refuses_what_the_api_refuses() -> None:
    user = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    with AnthropicStandIn([Reply.act(Action("screenshot"))]) as server:
        first = client(server).messages.create(
            model="claude-opus-5", max_tokens=100, tools=TOOLSET, messages=[user]
        )
        (block,) = first.content
        assert block.type == "tool_use" and block.name == "screenshot"
        assert block.toolset_name == "computer"  # type: ignore[union-attr]
        turn = {"role": "assistant", "content": [block.model_dump(exclude_none=True)]}
        unanswered = [user, turn, {"role": "user", "content": "and?"}]
        message = bad(server, "tool_result", tools=TOOLSET, messages=unanswered)
        assert "without `tool_result` blocks immediately after" in message
        result = {"type": "tool_result", "tool_use_id": block.id, "content": [image(30, 18)]}
        no_name = [user, turn, {"role": "user", "content": [result]}]
        assert "toolset_name" in bad(server, "tool_result", tools=TOOLSET, messages=no_name)
        result.update(toolset_name="computer", content=[image(3000, 1800)])
        too_big = [user, turn, {"role": "user", "content": [result]}]
        assert "exceed" in bad(server, "image", tools=TOOLSET, messages=too_big)
        named = [{**TOOLSET[0], "display_width_px": 10}]
        bad(server, "tools", tools=named, messages=[user])
        no_size = [{"type": "computer_20251124", "name": "computer"}]
        bad(server, "tools", beta=True, tools=no_size, messages=[user])
        bad(server, "tools", tools=LEGACY, messages=[user])  # no beta header
        assert "does not support" in bad(
            server, "tools", beta=True, tools=LEGACY, messages=[user], model="claude-opus-5-5"
        )
    with AnthropicStandIn([], expected_api_key=KEY) as server:
        with pytest.raises(anthropic.AuthenticationError):
            anthropic.Anthropic(api_key="wrong", base_url=server.base_url).messages.create(
                model="claude-opus-5", max_tokens=10, messages=[user]
            )
        assert all(KEY not in json.dumps(r.headers) for r in server.requests)


def test_standin_command_line(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "done"}]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "vnc_use.testing.anthropic_standin", "--script", str(script)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        answer = anthropic.Anthropic(api_key="k", base_url=base_url).messages.create(
            model="claude-opus-5",
            max_tokens=10,
            messages=[{"role": "user", "content": "hi"}],
        )
        assert answer.stop_reason == "end_turn" and answer.content[0].text == "done"  # type: ignore[union-attr]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# ---------------------------------------------------------------------- errors


def run_with(script: list[Reply], tmp_path: Path, **planner: Any) -> Any:
    with AnthropicStandIn(script) as server:
        p = AnthropicPlanner(
            "claude-opus-5", api_key=KEY, base_url=server.base_url, **{"max_retries": 0, **planner}
        )
        with VncUseAgent(planner=p, desktop=FakeDesktop(1440, 900), runs_dir=tmp_path) as agent:
            return agent.run(task="x", thread_id="e"), server


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (
            Reply.error(401, "authentication_error", "invalid x-api-key"),
            ["401", "ANTHROPIC_API_KEY"],
        ),
        (Reply.error(429, "rate_limit_error", "slow down"), ["429", "retry-after", "resume"]),
        (Reply.error(529, "overloaded_error", "Overloaded"), ["529", "overloaded", "resume"]),
        (Reply.error(500, "api_error", "boom"), ["500", "resume"]),
        (Reply.error(413, "request_too_large", "too big"), ["413", "--keep-screenshots"]),
    ],
)
def test_api_errors_end_the_run_as_error_in_one_line(
    reply: Reply, words: list[str], tmp_path: Path
) -> None:
    result, _ = run_with([reply], tmp_path)
    assert result.status == "error"
    assert "Anthropic API" in result.error and "\n" not in result.error
    assert all(w in result.error for w in words), result.error
    assert KEY not in result.error


def test_rate_limit_is_retried_after_retry_after(tmp_path: Path) -> None:
    script = [Reply.error(429, "rate_limit_error", "slow down", retry_after=0.01), Reply.done("ok")]
    result, server = run_with(script, tmp_path, max_retries=1)
    assert result.status == "done" and result.final_text == "ok"
    assert [r.status for r in server.requests] == [429, 200]


def test_timeout_is_one_line(tmp_path: Path) -> None:
    import time

    def slow(body: dict[str, Any], index: int) -> Reply:
        time.sleep(1.0)
        return Reply.done("late")

    result, _ = run_with(slow, tmp_path, timeout_s=0.2)  # type: ignore[arg-type]
    assert result.status == "error" and "no answer within" in result.error


def test_a_point_off_the_image_fails_its_block_and_stops_the_batch(tmp_path: Path) -> None:
    """The toolset's batch rule: the failed block says why, every later one is "Not
    executed" in the SDK's words; nothing of the batch runs on a guessed point."""
    script = [
        Reply.act(
            Action("left_click", {"coordinate": [5000, 10]}),
            Action("key", {"text": "Return", "repeat": 2}),
        ),
        Reply.done("ok"),
    ]
    result, server = run_with(script, tmp_path)
    assert result.status == "done"
    first, second = server.requests[1].tool_results()
    assert first["is_error"] and "outside the display" in first["content"][0]["text"]
    assert second["is_error"] and second["toolset_name"] == "computer"
    assert second["content"][0]["text"] == translate.NOT_EXECUTED
    assert [s["result"] for s in result.transcript] == ["error", "error"]


# ---------------------------------------------------------------------- translation

FRAME = translate.Frame(1000, 500, pointer=(100.0, 100.0))
"""A 1000x500 image: grid x = pixel x, grid y = 2 * pixel y; the pointer at (100, 100)."""
INTENT = "why"


def calls_of(member: str, args: dict[str, Any], toolset: bool = True) -> list[tuple[str, dict]]:
    block: dict[str, Any] = {"type": "tool_use", "id": "t1", "name": member, "input": args}
    if toolset:
        block["toolset_name"] = "computer"
    else:
        block.update(name="computer", input={"action": member, **args})
    out = translate.translate([block], FRAME, INTENT)
    return [(c["name"], {k: v for k, v in c["args"].items() if k != "intent"}) for c in out.calls]


@pytest.mark.parametrize("toolset", [True, False])
@pytest.mark.parametrize(
    ("member", "args", "want"),
    [
        ("screenshot", {}, [("take_screenshot", {})]),
        ("zoom", {"region": [0, 0, 500, 250]}, [("take_screenshot", {})]),
        ("left_click", {"coordinate": [500, 250]}, [("click", {"x": 500, "y": 500})]),
        ("left_click", {}, [("click", {"x": 100, "y": 200})]),
        (
            "left_click",
            {"coordinate": [10, 10], "text": "ctrl+shift"},
            [
                ("key_down", {"key": "ctrl"}),
                ("key_down", {"key": "shift"}),
                ("click", {"x": 10, "y": 20}),
                ("key_up", {"key": "shift"}),
                ("key_up", {"key": "ctrl"}),
            ],
        ),
        ("right_click", {"coordinate": [1, 1]}, [("right_click", {"x": 1, "y": 2})]),
        ("middle_click", {"coordinate": [1, 1]}, [("middle_click", {"x": 1, "y": 2})]),
        ("double_click", {"coordinate": [1, 1]}, [("double_click", {"x": 1, "y": 2})]),
        ("triple_click", {"coordinate": [1, 1]}, [("triple_click", {"x": 1, "y": 2})]),
        (
            "left_click_drag",
            {"start_coordinate": [1, 1], "coordinate": [2, 2]},
            [("drag_and_drop", {"start_x": 1, "start_y": 2, "end_x": 2, "end_y": 4})],
        ),
        ("mouse_move", {"coordinate": [3, 3]}, [("move", {"x": 3, "y": 6})]),
        ("left_mouse_down", {}, [("mouse_down", {"x": 100, "y": 200})]),
        ("left_mouse_up", {}, [("mouse_up", {"x": 100, "y": 200})]),
        ("cursor_position", {}, [("take_screenshot", {})]),
        (
            "scroll",
            {"scroll_direction": "up", "scroll_amount": 10, "coordinate": [5, 5]},
            [
                ("scroll", {"x": 5, "y": 10, "direction": "up", "magnitude_in_pixels": 900}),
                ("scroll", {"x": 5, "y": 10, "direction": "up", "magnitude_in_pixels": 100}),
            ],
        ),
        ("type", {"text": "héllo\n"}, [("type", {"text": "héllo\n"})]),
        ("key", {"text": "ctrl+a"}, [("hotkey", {"keys": ["ctrl", "a"]})]),
        ("key", {"text": "Return", "repeat": 2}, [("press_key", {"key": "Return"})] * 2),
        (
            "hold_key",
            {"text": "shift", "duration": 1.5},
            [
                ("key_down", {"key": "shift"}),
                ("wait", {"seconds": 2}),
                ("key_up", {"key": "shift"}),
            ],
        ),
        ("wait", {"duration": 2}, [("wait", {"seconds": 2})]),
    ],
)
def test_every_member_maps_onto_the_vocabulary(
    member: str, args: dict[str, Any], want: list[tuple[str, dict]], toolset: bool
) -> None:
    assert calls_of(member, args, toolset) == want
    for name, grid_args in want:
        checked = GEMINI_35_DESKTOP_TABLE.validate(name, {**grid_args, "intent": INTENT})
        assert not isinstance(checked, ActionError), checked


def test_the_batch_stops_at_its_first_failure() -> None:
    blocks = [
        {"type": "tool_use", "id": f"t{n}", "name": m, "input": a, "toolset_name": "computer"}
        for n, (m, a) in enumerate(
            [
                ("type", {"text": "a"}),
                ("left_click", {"coordinate": [1000, 0]}),
                ("key", {"text": "a"}),
            ]
        )
    ]
    out = translate.translate(blocks, FRAME, INTENT)
    assert [c["name"] for c in out.calls] == ["type", "left_click", "key"]
    assert "outside the display" in out.calls[1]["args"]["problem"]
    assert out.calls[2]["args"] == {"problem": translate.NOT_EXECUTED}
    assert len(set(translate.MEMBERS)) == 17


# ---------------------------------------------------------------------- approvals, resume


def agent_on(server: AnthropicStandIn, tmp_path: Path, **settings: Any) -> VncUseAgent:
    planner = AnthropicPlanner(
        "claude-opus-5", api_key=KEY, base_url=server.base_url, max_retries=0
    )
    return VncUseAgent(
        planner=planner, desktop=FakeDesktop(1440, 900), runs_dir=tmp_path, **settings
    )


def test_confirm_stops_the_batch_and_a_denial_sends_nothing_more(tmp_path: Path) -> None:
    batch = Reply.act(
        Action("left_click", {"coordinate": [10, 10]}),
        Action("type", {"text": "rm -rf /"}),
        Action("key", {"text": "Return"}),
    )
    with AnthropicStandIn([batch, Reply.done("never")]) as server:
        with agent_on(server, tmp_path, confirm_actions=["type"]) as agent:
            waiting = agent.run(task="x", thread_id="c")
            assert waiting.status == "awaiting_approval"
            assert waiting.pending_call and waiting.pending_call["name"] == "type"
            denied = agent.deny("c")
        assert denied.status == "denied"
        assert len(server.requests) == 1 and server.remaining == 1
    assert [s["name"] for s in denied.transcript] == ["click", "type"]
    assert [s["result"] for s in denied.transcript] == ["ok", "denied"]


def test_an_overloaded_api_ends_the_run_resumably(tmp_path: Path) -> None:
    script = [Reply.error(529, "overloaded_error", "Overloaded"), Reply.done("ok")]
    with AnthropicStandIn(script) as server, agent_on(server, tmp_path) as agent:
        assert agent.run(task="x", thread_id="o").status == "error"
        resumed = agent.resume("o")
    assert resumed.status == "done" and resumed.final_text == "ok"


def test_each_block_is_answered_in_order_with_images_where_due(tmp_path: Path) -> None:
    """A screenshot inside a batch answers with the screen then; zoom with a crop of its
    region at full resolution; cursor_position with the pointer in image pixels; the last
    block carries the screen after the batch."""
    script = [
        Reply.act(
            Action("screenshot"),
            Action("mouse_move", {"coordinate": [720, 450]}),
            Action("cursor_position"),
            Action("zoom", {"region": [0, 0, 360, 225]}),
            Action("wait", {"duration": 0}),
        ),
        Reply.done("ok"),
    ]
    result, server = run_with(script, tmp_path)
    assert result.status == "done" and not server.violations
    shot, moved, cursor, zoom, waited = server.requests[1].tool_results()
    assert [c["type"] for c in shot["content"]] == ["image"]
    assert moved["content"] == [{"type": "text", "text": "Moved the mouse."}]
    assert cursor["content"] == [{"type": "text", "text": "X=720,Y=450"}]
    (crop,) = zoom["content"]
    assert crop["type"] == "image"
    with Image.open(io.BytesIO(base64.b64decode(crop["source"]["data"]))) as image:
        assert image.size == (1440, 900)  # 360x225 scaled to fit the usual screenshot size
    assert [c["type"] for c in waited["content"]] == ["text", "image"]
