"""Replay on the in-memory FakeDesktop (milliseconds a step): what a replay takes from a
recorded run, secrets, the first step, resuming from ``run.json``, and the divergence measure.

The recorded runs are real runs of the agent with the Gemini stand-in; the end-to-end replays
on real desktops with the probe app are in ``test_replay.py``.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw

from vnc_use import VncUseAgent
from vnc_use.errors import ConfigError
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.providers.openai_compat import OpenAICompatPlanner
from vnc_use.providers.openai_compat.resize import UI_TARS, smart_resize
from vnc_use.replay import (
    ReplayPlanner,
    difference,
    load_recording,
    parse_tolerance,
    planner_from_run,
)
from vnc_use.replay.compare import DEFAULT_TOLERANCE, Mask
from vnc_use.testing import FakeDesktop
from vnc_use.testing.gemini_standin import (
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    require_confirmation,
)
from vnc_use.testing.openai_standin import OpenAIStandIn
from vnc_use.testing.openai_standin import Reply as OpenAIReply

from gemini_fixtures import FAST_RETRY

PIN = "2468-secret"


@pytest.fixture
def recorded(tmp_path: Path, gemini: GeminiStandIn) -> Path:
    """A run that performed steps 1 and 3: step 2 was invalid (never performed), step 4's
    outcome is unknown (the process died after sending it, before it was confirmed) and step 5
    was refused (a call needing confirmation, with approvals off): it ends ``denied``."""
    gemini.script(
        Reply.calls(FunctionCallSpec("click_at", x=100, y=200)),
        Reply.calls(FunctionCallSpec("click_at", x=5000, y=10)),
        Reply.calls(FunctionCallSpec("type_text_at", x=500, y=500, text="{{pin}}")),
        Reply.calls(FunctionCallSpec("key_combination", keys="Control+a")),
        Reply.calls(
            FunctionCallSpec(
                "click_at", x=900, y=900, safety_decision=require_confirmation("Pays.")
            )
        ),
    )
    runs = tmp_path / "runs"
    desk = FakeDesktop(1280, 800)
    last_call: list[str] = []

    def crash_after_sending_the_keys(event: dict[str, Any]) -> None:
        if event["event"] == "model_response":
            last_call[:] = [c["name"] for c in event["calls"]]
        elif event["event"] == "screenshot" and last_call == ["key_combination"]:
            last_call.clear()
            raise KeyboardInterrupt  # sent, not yet known to have arrived: outcome unknown

    with VncUseAgent(
        desktop=desk,
        runs_dir=runs,
        planner=GeminiComputerUse(**FAST_RETRY),
        sensitive_text={"pin": PIN},
        hitl_mode=False,
        on_event=crash_after_sending_the_keys,
    ) as agent:
        with pytest.raises(KeyboardInterrupt):
            agent.run(task="Log in with the pin", thread_id="rec")
        result = agent.resume("rec")
    assert result.status == "denied", result.error
    assert [e["kind"] for e in desk.events] == ["click", "click", "type_text", "key_combo"]
    assert "outcome of this action is unknown" in result.transcript[3]["error"]
    return runs


def test_only_performed_actions_are_replayed_with_the_secret_given_again(
    recorded: Path,
) -> None:
    rec = load_recording(recorded, "rec")
    assert [(s.step, s.name) for s in rec.steps] == [(1, "click_at"), (3, "type_text_at")]
    assert rec.steps[1].args["text"] == "{{pin}}"  # the record keeps the placeholder only
    desk = FakeDesktop(1024, 768)  # another size: grid points map to its pixels
    with (
        VncUseAgent(desktop=desk, runs_dir=recorded) as agent,
        pytest.raises(ConfigError, match=r"\{\{pin\}\}.*VNC_USE_SECRET_PIN"),
    ):
        agent.replay("rec", tolerance="off")
    with VncUseAgent(desktop=desk, runs_dir=recorded, sensitive_text={"pin": PIN}) as agent:
        result = agent.replay("rec", replay_id="rep", tolerance="off")
    assert result.status == "done", result.error
    assert [(e["kind"], e.get("x"), e.get("y"), e.get("text")) for e in desk.events] == [
        ("click", 102, 154, None),
        ("click", 512, 384, None),
        ("type_text", None, None, PIN),
    ]
    written = b"".join(p.read_bytes() for p in (recorded / "rep").rglob("*") if p.is_file())
    assert PIN.encode() not in written


def test_from_step_and_resume_rebuild_from_run_json(recorded: Path) -> None:
    desk = FakeDesktop(1280, 800)
    with VncUseAgent(desktop=desk, runs_dir=recorded, sensitive_text={"pin": PIN}) as agent:
        result = agent.replay("rec", replay_id="late", from_step=2, tolerance="off")
    assert result.status == "done", result.error
    assert [e["kind"] for e in desk.events] == ["click", "type_text"]
    saved = json.loads((recorded / "late" / "run.json").read_text())
    assert saved["replay"]["from_step"] == 2 and saved["replay"]["tolerance"] == "off"
    planner = planner_from_run(saved)  # what 'vnc-use resume late' builds
    assert isinstance(planner, ReplayPlanner) and planner.start == 1
    with (
        VncUseAgent(desktop=desk, runs_dir=recorded) as agent,
        pytest.raises(ConfigError, match="no step from there"),
    ):
        agent.replay("rec", from_step=4)
    with (
        VncUseAgent(desktop=desk, runs_dir=recorded, sensitive_text={"pin": PIN}) as agent,
        pytest.raises(ConfigError, match="'late' already exists"),
    ):
        agent.replay("rec", replay_id="late", from_step=2, tolerance="off")


def _png(draw: str = "") -> bytes:
    img = Image.new("RGB", (1440, 900), (244, 244, 244))
    d = ImageDraw.Draw(img)
    d.rectangle((360, 90, 1080, 122), fill="white", outline="black")
    if "cursor" in draw:
        d.rectangle((365, 96, 366, 116), fill="black")
    if "clock" in draw:
        d.text((1360, 880), "12:01", fill="black")
    if "window" in draw:
        d.rectangle((0, 0, 484, 316), fill="white", outline="black")
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def test_the_default_tolerance_passes_a_cursor_and_a_clock_and_stops_a_window() -> None:
    base = _png()
    assert difference(base, base) == 0.0
    assert difference(base, _png("cursor clock")) < DEFAULT_TOLERANCE / 4
    window = difference(base, _png("window"))
    assert window > 5 * DEFAULT_TOLERANCE  # white on light grey: still found
    assert difference(base, _png("window"), [Mask.parse("490x320+0+0", (1440, 900))]) == 0.0
    assert parse_tolerance("off") is None and parse_tolerance("2.5%") == 2.5
    with pytest.raises(ConfigError, match="0-100"):
        parse_tolerance("lots")


def test_a_run_of_another_provider_replays_alike(tmp_path: Path) -> None:
    """A run of UI-TARS (pixels of the resized image sent, behind the OpenAI-compatible
    stand-in) replays with the server gone: the desktop gets the same inputs again."""
    width, height = 1021, 767
    size = smart_resize(height, width, UI_TARS)[::-1]

    def box(x: int, y: int) -> str:
        return f"<|box_start|>({x * size[0] // width},{y * size[1] // height})<|box_end|>"

    def reply(action: str) -> OpenAIReply:
        return OpenAIReply.text(f"Thought: go on.\nAction: {action}")

    script = [
        reply(f"click(start_box='{box(300, 100)}')"),
        reply("type(content='Ada')"),
        reply("hotkey(key='ctrl a')"),
        reply(f"drag(start_box='{box(100, 600)}', end_box='{box(700, 400)}')"),
        reply("finished(content='Done.')"),
    ]
    recorded = FakeDesktop(width, height)
    model = "ui-tars-1.5-7b"
    with OpenAIStandIn(script, models=model, max_images=2) as server:
        planner = OpenAICompatPlanner(server.base_url, model, dialect="ui-tars", max_retries=0)
        with VncUseAgent(desktop=recorded, runs_dir=tmp_path, planner=planner) as agent:
            result = agent.run(task="Rename the card and move it", thread_id="tars")
        assert not server.violations and server.remaining == 0
    assert result.status == "done", result.error
    again = FakeDesktop(width, height)
    with VncUseAgent(desktop=again, runs_dir=tmp_path) as agent:
        result = agent.replay("tars")
    assert result.status == "done", result.error
    assert again.events == recorded.events
    assert [e["kind"] for e in again.events] == ["click", "type_text", "key_combo", "drag_and_drop"]
