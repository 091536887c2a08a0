"""The openai-compatible planner through the real ``openai`` SDK against the stand-in.

Each test scripts the stand-in (a strict local chat-completions server) and drives
:class:`OpenAICompatPlanner` with vnc-use's own history records, then asserts on what the
server received and on the neutral proposal: images in user messages only, every tool call
answered, the resized image for pixel dialects, errors in one line naming the server.
"""

from __future__ import annotations

import ast
import io
import json
import socket
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from vnc_use.errors import ApiError, ConfigError, PlannerError
from vnc_use.providers import history
from vnc_use.providers.base import CallResult, Proposal
from vnc_use.providers.openai_compat import OpenAICompatPlanner
from vnc_use.testing.openai_standin import OpenAIStandIn, Reply, ToolCall

SCREEN = (1021, 767)  # not a multiple of 28: a resize mistake shows


def png(width: int, height: int, shade: int = 0) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (shade, 80, 160)).save(out, format="PNG")
    return out.getvalue()


class Shots:
    """Screenshots by name, as the run folder keeps them (``load_png``)."""

    def __init__(self) -> None:
        self.pngs: dict[str, bytes] = {}

    def add(self, name: str, size: tuple[int, int] = SCREEN) -> str:
        self.pngs[name] = png(*size, shade=len(self.pngs) * 20)
        return name

    def load(self, sha: str) -> bytes:
        return self.pngs[sha]


def planner(server: OpenAIStandIn, **kw: Any) -> OpenAICompatPlanner:
    kw.setdefault("model", server.models[0])
    return OpenAICompatPlanner(server.base_url, max_retries=0, timeout_s=10, **kw)


def results_for(proposal: Proposal, shot: str) -> list[CallResult]:
    return [
        {"name": c["name"], "id": c["id"], "screenshot": shot, "screen_size": SCREEN}
        for c in proposal.calls
    ]


def image_sizes(server: OpenAIStandIn, index: int = -1) -> list[tuple[int, int]]:
    sizes = []
    for data in server.requests[index].images():
        with Image.open(io.BytesIO(data)) as image:
            sizes.append(image.size)
    return sizes


# ------------------------------------------------------------------ settings


def test_settings_dialect_and_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with OpenAIStandIn([Reply.text("done")], models="ui-tars-1.5-7b") as server:
        p = planner(server)
        assert p.dialect_name == "ui-tars"
        assert planner(server, dialect="tools").dialect_name == "tools"
        monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-123")
        settings = p.run_settings()
        assert settings == {
            "model": "ui-tars-1.5-7b",
            "provider": "openai-compatible",
            "base_url": server.base_url,
            "dialect": "ui-tars",
            "keep_screenshots": 2,
        }
        assert "sk-secret" not in repr(settings)
    for bad in [{"base_url": "localhost:1234"}, {"dialect": "klingon"}, {"keep_screenshots": -1}]:
        kw: dict[str, Any] = {"base_url": "http://127.0.0.1:1/v1", "model": "m", **bad}
        with pytest.raises(ConfigError):
            OpenAICompatPlanner(**kw)


def test_the_key_comes_from_openai_api_key_and_may_be_absent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shots = Shots()
    turn = [history.task_turn("Do it", shots.add("s0"), SCREEN)]
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with OpenAIStandIn([Reply.text("ok")]) as server:
        planner(server, dialect="tools").propose(turn, shots.load)
        assert server.requests[-1].api_key  # a placeholder the SDK accepts
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-1")
    with OpenAIStandIn([Reply.text("ok")], expected_api_key="sk-local-1") as server:
        planner(server, dialect="tools").propose(turn, shots.load)
        assert server.requests[-1].status == 200 and not server.violations


# ------------------------------------------------------------------ pixel dialects


def test_ui_tars_gets_the_resized_image_and_its_pixels_map_back_through_it() -> None:
    shots = Shots()
    turns = [history.task_turn("Press the button", shots.add("s0"), SCREEN)]
    # The widget at screen pixel (700, 300) is at (691, 296) of the 1008x756 image sent.
    reply = "Thought: the OK button.\nAction: click(start_box='(691,296)')"
    with OpenAIStandIn([Reply.text(reply)], models="ui-tars-1.5-7b") as server:
        proposal = planner(server).propose(turns, shots.load)
        assert image_sizes(server) == [(1008, 756)]
        first_user = server.requests[-1].messages()[1]
        assert "## Action Space" in first_user["content"][0]["text"]
        assert "Press the button" in first_user["content"][0]["text"]
    assert proposal.stop == "calls"
    [call] = proposal.calls
    assert call["name"] == "click" and call["intent"] == "the OK button."
    from vnc_use.actions import denorm

    x, y = denorm(call["args"]["x"], call["args"]["y"], *SCREEN)
    assert abs(x - 700) <= 1 and abs(y - 300) <= 1
    assert proposal.turn is not None and proposal.turn["image_size"] == [1008, 756]
    assert proposal.turn["dialect"] == "ui-tars"


def test_a_screenshot_is_resized_once_and_reused_by_the_next_request() -> None:
    """With two screenshots kept, each request resizes only the new one (the busy 1440x900
    case costs ~40 ms per image); the image sent again is byte for byte the same."""
    shots = Shots()
    loaded: list[str] = []

    def load(sha: str) -> bytes:
        loaded.append(sha)
        return shots.load(sha)

    turns: list[dict[str, Any]] = [history.task_turn("Go", shots.add("s0"), SCREEN)]
    click = "Thought: x.\nAction: click(start_box='(10,10)')"
    script = [Reply.text(click)] * 3
    with OpenAIStandIn(script, models="ui-tars-1.5-7b", max_images=2) as server:
        p = planner(server)
        for step in range(3):
            proposal = p.propose(turns, load)
            assert proposal.turn is not None
            turns.append(history.model_turn(proposal.turn))
            turns.append(history.responses_turn(results_for(proposal, shots.add(f"s{step + 1}"))))
        assert loaded == ["s0", "s1", "s2"]
        first, second, third = (r.images() for r in server.requests)
        assert second[0] == first[0] and third[0] == second[1]
        assert image_sizes(server) == [(1008, 756), (1008, 756)]


def test_qwen25_declares_the_size_it_sends() -> None:
    shots = Shots()
    turns = [history.task_turn("Go", shots.add("s0"), SCREEN)]
    block = (
        '<tool_call>\n{"name": "computer_use", "arguments": '
        '{"action": "left_click", "coordinate": [504, 378]}}\n</tool_call>'
    )
    with OpenAIStandIn([Reply.text(block)], models="qwen2.5-vl-7b-instruct") as server:
        proposal = planner(server).propose(turns, shots.load)
        system = server.requests[-1].messages()[0]["content"]
        assert "The screen's resolution is 1008x756." in system
        assert not server.requests[-1].tools()
    assert proposal.calls[0]["args"]["x"] == 500 and proposal.calls[0]["args"]["y"] == 500


# ------------------------------------------------------------------ conversation shape


def test_tools_dialect_conversation_answers_every_call_and_keeps_two_images() -> None:
    shots = Shots()
    turns: list[dict[str, Any]] = [history.task_turn("Fill the form", shots.add("s0"), SCREEN)]
    script = [
        Reply.tool_calls(
            ToolCall("click", {"x": 500, "y": 500, "intent": "the field"}),
            ToolCall("type", {"text": "hi", "press_enter": True}),
            ToolCall("finish", {"text": "ignored next to actions"}),
        ),
        Reply.tool_calls(ToolCall("hotkey", {"keys": ["ctrl", "s"]})),
        Reply.tool_calls(ToolCall("scroll", {"x": [10, 10, 30, 30], "direction": "down"})),
        Reply.finish("Saved."),
    ]
    with OpenAIStandIn(script, models="local-model", max_images=2) as server:
        p = planner(server)
        assert p.dialect_name == "tools"
        for step in range(4):
            proposal = p.propose(turns, shots.load)
            assert proposal.turn is not None
            turns.append(history.model_turn(proposal.turn))
            if proposal.stop == "finished":
                break
            turns.append(history.responses_turn(results_for(proposal, shots.add(f"s{step + 1}"))))
        assert not server.violations, server.violations
        assert len(server.requests) == 4
        assert [len(r.images()) for r in server.requests] == [1, 2, 2, 2]
        assert server.requests[0].tools()
        last = server.requests[-1].messages()
        tool_msgs = [m for m in last if m["role"] == "tool"]
        assert [m["content"] for m in tool_msgs[:3]] == ["click: done", "type: done", "Not run."]
        assert all(isinstance(m["content"], str) for m in tool_msgs)
    assert proposal.stop == "finished" and proposal.text == "Saved."
    scroll = turns[-3]["content"]["calls"][0]
    assert scroll["name"] == "scroll" and (scroll["args"]["x"], scroll["args"]["y"]) == (20, 20)


def test_calls_left_unanswered_in_the_history_are_answered_not_run() -> None:
    """A model turn whose calls never got results (a run cut short, then resumed) still has
    every tool_call_id answered before the next message."""
    shots = Shots()
    with OpenAIStandIn([Reply.tool_calls(ToolCall("wait", {})), Reply.text("ok")]) as server:
        p = planner(server, dialect="tools")
        turns: list[dict[str, Any]] = [history.task_turn("Wait", shots.add("s0"), SCREEN)]
        first = p.propose(turns, shots.load)
        assert first.turn is not None
        turns.append(history.model_turn(first.turn))
        second = p.propose(turns, shots.load)
        assert not server.violations and second.stop == "finished"
        assert server.requests[-1].messages()[-1] == {
            "role": "tool",
            "tool_call_id": first.calls[0]["id"],
            "content": "Not run.",
        }


def test_a_text_only_reply_finishes_in_the_tools_dialect() -> None:
    shots = Shots()
    turns = [history.task_turn("What is shown?", shots.add("s0"), SCREEN)]
    with OpenAIStandIn([Reply.text("A blue window.")]) as server:
        proposal = planner(server, dialect="tools").propose(turns, shots.load)
    assert (proposal.stop, proposal.text, proposal.calls) == ("finished", "A blue window.", [])


# ------------------------------------------------------------------ unusable answers


def test_an_unusable_answer_is_answered_as_an_error_and_asked_again() -> None:
    shots = Shots()
    turns = [history.task_turn("Click", shots.add("s0"), SCREEN)]
    good = (
        '<tool_call>{"name": "computer_use", "arguments": '
        '{"action": "left_click", "coordinate": [100, 900]}}</tool_call>'
    )
    script = [
        Reply.text("I think I should click the button."),
        Reply.text('<tool_call>{"name": "computer_use", "arguments": {"action": "left_click"'),
        Reply.text(good),
    ]
    with OpenAIStandIn(script, models="qwen3-vl-8b") as server:
        proposal = planner(server).propose(turns, shots.load)
        assert len(server.requests) == 3 and not server.violations
        retry = server.requests[-1].messages()
        assert retry[-1]["role"] == "user"
        assert "could not be used" in retry[-1]["content"]
        assert retry[-2]["role"] == "assistant"
    assert proposal.calls[0]["args"]["x"] == 100 and proposal.calls[0]["args"]["y"] == 900
    assert proposal.turn is not None
    assert proposal.turn["message"]["content"] == good  # the history keeps the usable turn


def test_answers_that_stay_unusable_end_in_a_planner_error() -> None:
    shots = Shots()
    turns = [history.task_turn("Click", shots.add("s0"), SCREEN)]
    bad = ToolCall("click", {"x": 5000, "y": 1})  # off the grid: never clamped onto the edge
    with OpenAIStandIn([Reply.tool_calls(bad)] * 3, models="m") as server:
        with pytest.raises(PlannerError, match=r"no usable action 3 times.*off the image"):
            planner(server, dialect="tools", max_parse_retries=2).propose(turns, shots.load)
        assert len(server.requests) == 3 and not server.violations
        tool_answer = [m for m in server.requests[-1].messages() if m["role"] == "tool"]
        assert tool_answer and tool_answer[0]["content"].startswith("Error:")


# ------------------------------------------------------------------ failures


def _turns() -> tuple[list[dict[str, Any]], Shots]:
    shots = Shots()
    return [history.task_turn("Go", shots.add("s0"), SCREEN)], shots


@pytest.mark.standin_refusals  # a model the server has not loaded: its 404 is the point
def test_model_not_loaded_is_a_404_naming_the_server_and_the_fix() -> None:
    turns, shots = _turns()
    with OpenAIStandIn([Reply.text("x")], models="other") as server:
        with pytest.raises(ApiError) as err:
            planner(server, model="qwen3-vl-8b").propose(turns, shots.load)
        base_url = server.base_url
    message = str(err.value)
    assert err.value.status_code == 404 and "\n" not in message
    assert base_url in message and "load it" in message
    assert message.startswith("OpenAI-compatible server error 404")


def test_context_too_long_and_server_errors() -> None:
    turns, shots = _turns()
    with OpenAIStandIn([Reply.context_length_exceeded(), Reply.error(500)]) as server:
        p = planner(server, dialect="tools")
        with pytest.raises(ApiError, match="keep_screenshots") as too_long:
            p.propose(turns, shots.load)
        assert too_long.value.status_code == 400
        with pytest.raises(ApiError, match="server's log") as failed:
            p.propose(turns, shots.load)
        assert failed.value.status_code == 500 and server.base_url in str(failed.value)


def test_a_timeout_and_a_server_that_is_not_running() -> None:
    turns, shots = _turns()
    with OpenAIStandIn([Reply.text("late", delay=3)]) as server:
        p = OpenAICompatPlanner(
            server.base_url, server.models[0], "tools", timeout_s=0.5, max_retries=0
        )
        with pytest.raises(PlannerError, match=r"did not answer within 0\.5 s"):
            p.propose(turns, shots.load)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = OpenAICompatPlanner(f"http://127.0.0.1:{port}/v1", "m", max_retries=0)
    with pytest.raises(PlannerError, match=r"Cannot reach .* start it") as err:
        down.propose(turns, shots.load)
    assert "\n" not in str(err.value)


def test_only_one_module_imports_openai() -> None:
    """The SDK stays in providers/openai_sdk.py, shared by both OpenAI providers (and the test
    kit)."""
    src = Path(__file__).resolve().parents[2] / "src" / "vnc_use"
    importers = []
    for path in sorted(src.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            if any(n == "openai" or n.startswith("openai.") for n in names):
                importers.append(path.relative_to(src).as_posix())
    assert [p for p in importers if not p.startswith("testing/")] == ["providers/openai_sdk.py"]


# ------------------------------------------------------------------ through the agent


def test_a_ui_tars_run_on_the_fake_desktop_lands_where_the_script_aimed(tmp_path: Path) -> None:
    """The whole agent with this planner: clicks, a drag, typing and a key combination on a
    1021x767 screen, from UI-TARS pixels of the 1008x756 image sent."""
    from vnc_use import VncUseAgent
    from vnc_use.testing import FakeDesktop

    def at(x: int, y: int) -> str:  # screen pixel -> pixel of the image sent
        return f"({round(x * 1008 / 1021)},{round(y * 756 / 767)})"

    script = [
        Reply.text(f"Thought: the name field.\nAction: click(start_box='{at(700, 300)}')"),
        Reply.text("Thought: type the name.\nAction: type(content='Ada\\n')"),
        Reply.text(
            f"Thought: move the card.\nAction: drag(start_box='{at(100, 100)}', "
            f"end_box='{at(900, 600)}')\n\nhotkey(key='ctrl s')"
        ),
        Reply.text("Thought: saved.\nAction: finished(content='Saved the form.')"),
    ]
    desk = FakeDesktop(*SCREEN)
    with OpenAIStandIn(script, models="ui-tars-1.5-7b", max_images=2) as server:
        p = OpenAICompatPlanner(server.base_url, "ui-tars-1.5-7b", max_retries=0)
        with VncUseAgent(desktop=desk, planner=p, runs_dir=tmp_path, keep_screenshots=2) as agent:
            result = agent.run(task="Fill in the form", thread_id="tars")
        assert not server.violations, server.violations
        assert all(size == (1008, 756) for r in server.requests for size in image_sizes(server))
    assert result.status == "done", result.error
    assert result.final_text == "Saved the form."
    click, typed, drag, keys = desk.events
    # within a pixel: the 0-999 grid is coarser than a 1021-pixel screen
    assert click["kind"] == "click" and near((click["x"], click["y"]), (700, 300))
    assert (typed["kind"], typed["text"], typed["press_enter"]) == ("type_text", "Ada", True)
    assert drag["kind"] == "drag_and_drop"
    assert near((drag["x"], drag["y"]), (100, 100))
    assert near((drag["destination_x"], drag["destination_y"]), (900, 600))
    assert keys == {"kind": "key_combo", "keys": "ctrl+s"}
    run = json.loads((tmp_path / "tars" / "run.json").read_text())
    assert (run["model"], run["provider"], run["dialect"]) == (
        "ui-tars-1.5-7b",
        "openai-compatible",
        "ui-tars",
    )
    assert run["base_url"].startswith("http://127.0.0.1:") and "api_key" not in run


def near(got: tuple[int, int], want: tuple[int, int]) -> bool:
    return abs(got[0] - want[0]) <= 1 and abs(got[1] - want[1]) <= 1
