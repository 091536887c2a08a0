"""The openai provider without a desktop: its translation of actions, its errors, and the
Responses stand-in's strictness, all through the real ``openai`` SDK (FakeDesktop runs)."""

from __future__ import annotations

import base64
import io
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import openai
import pytest
from PIL import Image

from vnc_use import VncUseAgent
from vnc_use.errors import ApiError, ConfigError, PlannerError
from vnc_use.providers import make_planner
from vnc_use.providers.openai import OpenAIPlanner
from vnc_use.providers.openai.actions import Frame, Untranslatable, translate
from vnc_use.providers.openai.request import sent_size
from vnc_use.testing.fake import FakeDesktop
from vnc_use.testing.openai_responses_standin import OpenAIResponsesStandIn, Turn

KEY = "sk-test-unit-abcdef0123456789"
FRAME = Frame(image=(1000, 500), screen=(2000, 1000))


def names(actions: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for group in translate(actions, FRAME):
        for call in group:
            args = {k: v for k, v in call.args.items() if k != "intent"}
            out.append((call.name, args))
    return out


# ------------------------------------------------------------------ translation


def test_a_chord_is_pressed_together_with_openai_names_mapped() -> None:
    assert names([{"type": "keypress", "keys": ["CTRL", "SHIFT", "T"]}]) == [
        ("hotkey", {"keys": ["control", "shift", "T"]})
    ]
    assert names([{"type": "keypress", "keys": ["ARROWLEFT"]}]) == [("hotkey", {"keys": ["left"]})]
    with pytest.raises(Untranslatable, match="unknown key 'HYPERDRIVE'"):
        translate([{"type": "keypress", "keys": ["HYPERDRIVE"]}], FRAME)


def test_mouse_keys_are_held_around_the_action_and_wheel_is_the_middle_button() -> None:
    held = names(
        [{"type": "click", "button": "wheel", "x": 500, "y": 250, "keys": ["CTRL", "ALT"]}]
    )
    assert held == [
        ("key_down", {"key": "control"}),
        ("key_down", {"key": "alt"}),
        ("middle_click", {"x": 500, "y": 500}),
        ("key_up", {"key": "alt"}),
        ("key_up", {"key": "control"}),
    ]
    with pytest.raises(Untranslatable, match="button 'back'"):
        translate([{"type": "click", "button": "back", "x": 1, "y": 1}], FRAME)


def test_scroll_pixels_are_screen_pixels_split_per_axis() -> None:
    # the image is half the screen: 300 image pixels are 600 screen pixels (6 wheel clicks)
    assert names([{"type": "scroll", "x": 100, "y": 100, "scroll_x": -50, "scroll_y": 300}]) == [
        ("scroll", {"x": 100, "y": 200, "direction": "down", "magnitude_in_pixels": 600}),
        ("scroll", {"x": 100, "y": 200, "direction": "left", "magnitude_in_pixels": 100}),
    ]


def test_a_long_drag_path_goes_through_every_point() -> None:
    path = [{"x": 0, "y": 0}, {"x": 100, "y": 100}, {"x": 200, "y": 50}]
    assert [n for n, _ in names([{"type": "drag", "path": path}])] == [
        "mouse_down",
        "move",
        "mouse_up",
    ]


def test_screenshots_above_10_24_mp_are_downscaled() -> None:
    assert sent_size(2880, 1800) == (2880, 1800)
    w, h = sent_size(5120, 2880)
    assert w * h <= 10_240_000 and abs(w / h - 5120 / 2880) < 0.01


def test_preview_models_and_gemini_settings_are_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="computer_use_preview tool, shut down"):
        make_planner("openai", model="computer-use-preview-2025-03-11")
    with pytest.raises(ConfigError, match="--environment / environment="):
        make_planner("openai", environment="browser")
    planner = make_planner("openai", model="gpt-5.4", base_url="http://127.0.0.1:9/v1")
    assert planner.run_settings()["provider"] == "openai"


# ------------------------------------------------------------------ runs on a FakeDesktop


def _agent(server: OpenAIResponsesStandIn, tmp_path: Path, **planner: Any) -> VncUseAgent:
    p = OpenAIPlanner("gpt-5.5", api_key=KEY, base_url=server.base_url, max_retries=0, **planner)
    return VncUseAgent(planner=p, desktop=FakeDesktop(640, 400), runs_dir=tmp_path)


def test_a_bad_key_stops_the_batch_and_the_model_is_told(tmp_path: Path) -> None:
    script = [
        Turn.call(
            {"type": "type", "text": "a"},
            {"type": "keypress", "keys": ["NOPE"]},
            {"type": "type", "text": "never"},
        ),
        Turn.message("ok"),
    ]
    with OpenAIResponsesStandIn(script) as server, _agent(server, tmp_path) as agent:
        result = agent.run(task="t", thread_id="badkey")
        told = server.requests[1].items()[-1]
    assert result.status == "done"
    assert [s["result"] for s in result.transcript] == ["ok", "error"]
    assert told["role"] == "user" and "NOPE" in told["content"][0]["text"]
    assert "1 action(s) after it were not run" in told["content"][0]["text"]


def test_old_screenshots_go_with_their_whole_turn(tmp_path: Path) -> None:
    script = [Turn.call({"type": "wait"}) for _ in range(4)] + [Turn.message("done")]
    with (
        OpenAIResponsesStandIn(script) as server,
        # four waits on a screen that does not change are a stall: its note is not what
        # this test counts
        VncUseAgent(
            planner=OpenAIPlanner(
                "gpt-5.5", api_key=KEY, base_url=server.base_url, max_retries=0, keep_screenshots=2
            ),
            desktop=FakeDesktop(640, 400),
            runs_dir=tmp_path,
            stall_after=0,
        ) as agent,
    ):
        result = agent.run(task="t", thread_id="prune")
        last = server.requests[-1]
        assert not server.violations
    assert result.status == "done"
    assert len(last.images()) == 2 and len(last.outputs()) == 2
    notes = [i for i in last.items() if i.get("role") == "user"][1:]
    assert len(notes) == 2 and "no longer sent" in notes[0]["content"][0]["text"]


@pytest.mark.parametrize(
    "turn",
    [
        Turn.fail("misalignment_policy_violation", "Data transfer."),
        Turn.error(400, "Data transfer.", code="misalignment_policy_violation"),
    ],
    ids=["failed-response", "error-status"],
)
def test_misalignment_blocks_the_run(turn: Turn, tmp_path: Path) -> None:
    with OpenAIResponsesStandIn([turn]) as server, _agent(server, tmp_path) as agent:
        result = agent.run(task="t", thread_id="mis")
    assert result.status == "blocked"
    assert "misalignment_policy_violation" in (result.error or "")
    assert "Data transfer." in (result.error or "")


def test_a_double_click_is_replayed_with_its_keys(tmp_path: Path) -> None:
    """The API's input type requires a double_click's ``keys`` (null allowed): a response read
    without its nulls must not replay the action without it (the stand-in refuses that)."""
    script = [Turn.call({"type": "double_click", "x": 10, "y": 10}), Turn.message("ok")]
    with OpenAIResponsesStandIn(script) as server, _agent(server, tmp_path) as agent:
        result = agent.run(task="t", thread_id="dbl")
        replayed = [i for i in server.requests[1].items() if i.get("type") == "computer_call"]
    assert result.status == "done"
    assert replayed[0]["actions"] == [{"type": "double_click", "x": 10, "y": 10, "keys": None}]


@pytest.mark.parametrize(
    ("turn", "words"),
    [
        (Turn.error(401, "Incorrect API key provided."), "set OPENAI_API_KEY"),
        (Turn.error(429, "Rate limit reached.", code="rate_limit_exceeded"), "rate limited"),
        (Turn.error(500, "boom"), "OpenAI failed"),
        (Turn.error(413, "Request too large."), "lower --keep-screenshots"),
        (Turn.error(404, "no such model", code="model_not_found"), "--model gpt-5.5"),
    ],
)
def test_api_errors_are_one_line_naming_the_provider_and_the_fix(
    turn: Turn, words: str, tmp_path: Path
) -> None:
    with OpenAIResponsesStandIn([turn]) as server:
        planner = OpenAIPlanner("gpt-5.5", api_key=KEY, base_url=server.base_url, max_retries=0)
        with pytest.raises(ApiError) as caught:
            planner.propose([{"turn": "user", "text": "t", "screenshot": None}], lambda s: b"", 3)
    line = str(caught.value)
    assert line.startswith("OpenAI API error") and words in line and "\n" not in line
    assert KEY not in line


def test_rate_limits_are_retried_after_retry_after(tmp_path: Path) -> None:
    script = [Turn.error(429, "slow down", retry_after=0.2), Turn.message("fine")]
    with OpenAIResponsesStandIn(script) as server:
        planner = OpenAIPlanner("gpt-5.5", api_key=KEY, base_url=server.base_url, max_retries=2)
        proposal = planner.propose(
            [{"turn": "user", "text": "t", "screenshot": None}], lambda s: b"", 3
        )
        assert len(server.requests) == 2
    assert proposal.stop == "finished" and proposal.text == "fine"


def test_a_timeout_is_a_planner_error_naming_the_fix() -> None:
    def slow(body: Any, index: int) -> Turn:
        time.sleep(1.5)
        return Turn.message("late")

    with OpenAIResponsesStandIn(slow) as server:
        planner = OpenAIPlanner(
            "gpt-5.5", api_key=KEY, base_url=server.base_url, max_retries=0, timeout_s=0.3
        )
        with pytest.raises(PlannerError) as caught:
            planner.propose([{"turn": "user", "text": "t", "screenshot": None}], lambda s: b"", 3)
    line = str(caught.value)
    assert "OpenAI API" in line and "did not answer within 0.3 s" in line and "resume" in line


def test_no_key_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    planner = OpenAIPlanner("gpt-5.5", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match="set OPENAI_API_KEY"):
        planner.check_ready()


# ------------------------------------------------------------------ stand-in strictness


def _png(w: int = 8, h: int = 8) -> str:
    buf = io.BytesIO()
    Image.new("RGB", (w, h), "white").save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _first_call(server: OpenAIResponsesStandIn, client: openai.OpenAI) -> Any:
    response = client.responses.create(
        model="gpt-5.5",
        tools=[{"type": "computer"}],
        input=[{"role": "user", "content": [{"type": "input_text", "text": "go"}]}],
        store=False,
        include=["reasoning.encrypted_content"],
    )
    return [item.model_dump(exclude_none=True) for item in response.output]


def _output(call_id: str, url: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "computer_call_output",
        "call_id": call_id,
        "output": {"type": "computer_screenshot", "image_url": url, "detail": "original"},
        **extra,
    }


@pytest.mark.standin_refusals
@pytest.mark.parametrize(
    "case",
    [
        "output_before_call",
        "unanswered_call",
        "unacknowledged_safety_check",
        "image_data",
        "image_too_large",
        "reasoning_not_stored",
        "missing_reasoning",
        "tools",
    ],
)
def test_the_standin_refuses_what_the_api_refuses(case: str) -> None:
    turns = [Turn.call({"type": "screenshot"}, checks=[{"code": "malicious_instructions"}])] * 2
    with OpenAIResponsesStandIn(turns) as server:
        client = openai.OpenAI(api_key=KEY, base_url=server.base_url, max_retries=0)
        reasoning, call = _first_call(server, client)
        good = _output(
            call["call_id"], _png(), acknowledged_safety_checks=call["pending_safety_checks"]
        )
        task = {"role": "user", "content": [{"type": "input_text", "text": "go"}]}
        bare = {k: v for k, v in reasoning.items() if k != "encrypted_content"}
        inputs = {
            "output_before_call": [task, good, reasoning, call],
            "unanswered_call": [task, reasoning, call],
            "unacknowledged_safety_check": [
                task,
                reasoning,
                call,
                _output(call["call_id"], _png()),
            ],
            "image_data": [
                task,
                reasoning,
                call,
                {
                    **good,
                    "output": {
                        "type": "computer_screenshot",
                        "image_url": "data:image/png;base64,AAAA",
                    },
                },
            ],
            "image_too_large": [
                task,
                reasoning,
                call,
                {**good, "output": {"type": "computer_screenshot", "image_url": _png(4100, 2600)}},
            ],
            "reasoning_not_stored": [task, bare, call, good],
            "missing_reasoning": [task, call, good],
            "tools": [task, reasoning, call, good],
        }
        tools: list[Any] = [{"type": "computer"}]
        if case == "tools":
            tools = [
                {
                    "type": "computer_use_preview",
                    "display_width": 1024,
                    "display_height": 768,
                    "environment": "linux",
                }
            ]
        with pytest.raises(openai.BadRequestError):
            client.responses.create(
                model="gpt-5.5", tools=tools, input=inputs[case], store=False,
                include=["reasoning.encrypted_content"],
            )  # fmt: skip
        assert [v.rule for v in server.violations] == [case]
        ok = client.responses.create(
            model="gpt-5.5", tools=[{"type": "computer"}], input=[task, reasoning, call, good],
            store=False, include=["reasoning.encrypted_content"],
        )  # fmt: skip
        assert ok.output[-1].type == "computer_call"


def test_the_standin_command_line_serves_the_responses_api(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text('[{"message": "hello from the script"}]')
    proc = subprocess.Popen(
        [sys.executable, "-m", "vnc_use.testing.openai_standin", "--api", "responses",
         "--script", str(script)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        client = openai.OpenAI(api_key=KEY, base_url=base_url, max_retries=0)
        response = client.responses.create(
            model="gpt-5.5", input="hi", tools=[{"type": "computer"}]
        )
        assert response.output_text == "hello from the script"
    finally:
        proc.terminate()
        proc.wait(10)


def test_an_api_failure_ends_the_run_with_error_and_it_resumes(tmp_path: Path) -> None:
    script = [
        Turn.call({"type": "type", "text": "one"}),
        Turn.error(503, "The engine is currently overloaded."),
        Turn.message("finished after resume"),
    ]
    with OpenAIResponsesStandIn(script) as server, _agent(server, tmp_path) as agent:
        failed = agent.run(task="t", thread_id="flaky")
        assert failed.status == "error"
        assert (failed.error or "").startswith("OpenAI API error 503")
        assert "resume" in (failed.error or "")
        resumed = agent.resume("flaky")
        assert not server.violations and len(server.requests) == 3
    assert resumed.status == "done" and resumed.final_text == "finished after resume"
    assert [s["name"] for s in resumed.transcript] == ["type"]  # typed once, not again
