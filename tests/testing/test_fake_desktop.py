"""The in-memory desktop (``vnc_use.testing.FakeDesktop``) and the desktop boundary.

The agent runs on a FakeDesktop in a fresh interpreter with the Gemini stand-in: the graph,
the executor and the runner must not import vncdotool or Twisted for such a run.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from PIL import Image

from vnc_use import VncUseAgent
from vnc_use.actions import GEMINI_25_TABLE, GEMINI_35_TABLE, ValidatedAction
from vnc_use.actions.execute import ActionContext, execute
from vnc_use.desktops.base import CaptureRule, Desktop
from vnc_use.desktops.png import screen_size_of
from vnc_use.errors import ConfigError, VncConnectionError
from vnc_use.testing import FakeDesktop

from gemini_fixtures import DUMMY_API_KEY

# ------------------------------------------------------------------------ the done-when run

_SCRIPT = r"""
import json, os, sys
os.environ["GOOGLE_API_KEY"] = sys.argv[2]
from vnc_use import VncUseAgent
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.testing import FakeDesktop
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply

desk = FakeDesktop(1280, 800)
script = [
    Reply.calls(FunctionCallSpec("click_at", x=500, y=500), text="The middle."),
    Reply.calls(FunctionCallSpec("type_text_at", x=100, y=20, text="hello", press_enter=True)),
    Reply.text("done"),
]
with GeminiStandIn(script) as api:
    planner = GeminiComputerUse(retry_initial_delay=0.01, retry_max_delay=0.05)
    with VncUseAgent(desktop=desk, planner=planner, runs_dir=sys.argv[1]) as agent:
        result = agent.run(task="Click the middle, then type hello", thread_id="fake")
    violations = list(api.violations)
loaded = sorted({m.split(".")[0] for m in sys.modules if m.startswith(("twisted", "vncdotool"))})
print(json.dumps({
    "status": result.status,
    "error": result.error,
    "final_text": result.final_text,
    "pixels": [t["pixels"] for t in result.transcript],
    "events": desk.events,
    "text": desk.text,
    "loaded": loaded,
    "violations": violations,
}))
"""


def test_an_agent_runs_on_the_fake_desktop_without_vnc_code(tmp_path: Path) -> None:
    """The issue's done-when: a scripted run end to end in process, in a fresh interpreter;
    grid (500, 500) lands at pixel (640, 400); vncdotool and Twisted are never imported."""
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path / "runs"), DUMMY_API_KEY],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["status"] == "done", out["error"]
    assert out["final_text"] == "done"
    assert out["loaded"] == []
    assert not out["violations"]
    assert out["events"][0] == {"kind": "click", "x": 640, "y": 400, "button": 1}
    assert [e["kind"] for e in out["events"]] == ["click", "click", "type_text"]
    assert out["events"][1] == {"kind": "click", "x": 128, "y": 16, "button": 1}
    assert out["text"] == "hello\n"
    assert out["pixels"] == [{"x": 640, "y": 400}, {"x": 128, "y": 16}]
    saved = json.loads((tmp_path / "runs" / "fake" / "run.json").read_text())
    assert saved["desktop"] == "FakeDesktop"
    assert saved["vnc_server"] is None and saved["security"] is None  # every key, null


def test_the_graph_imports_no_vnc_code() -> None:
    code = (
        "import sys, vnc_use, vnc_use.agent.graph, vnc_use.agent.runner, vnc_use.actions.execute;"
        "print([m for m in sys.modules if m.startswith(('twisted', 'vncdotool'))])"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert proc.stdout.strip() == "[]"


# ------------------------------------------------------------------- VncUseAgent(desktop=)


@pytest.mark.parametrize(
    "option",
    [
        {"vnc_server": "localhost::5901"},
        {"vnc_password": "secret"},
        {"vnc_username": "me"},
        {"vnc_ca": "/ca.pem"},
        {"screen_region": "100x100+0+0"},
    ],
)
def test_desktop_and_a_vnc_option_together_are_refused(
    option: dict[str, str], tmp_path: Path
) -> None:
    (name,) = option
    with pytest.raises(ConfigError, match=f"desktop= and {name}= were both given") as info:
        VncUseAgent(desktop=FakeDesktop(), runs_dir=tmp_path, **option)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_without_a_desktop_the_vnc_default_stays(tmp_path: Path) -> None:
    with VncUseAgent(runs_dir=tmp_path) as agent:
        assert agent.vnc_server == "localhost::5901"
    with VncUseAgent(desktop=FakeDesktop(), runs_dir=tmp_path) as agent:
        assert agent.vnc_server is None
        with pytest.raises(ConfigError, match="no VNC connection"):
            _ = agent.controller


# ------------------------------------------------------------------------- the fake itself


def _png(desk: FakeDesktop, **rule: object) -> bytes:
    return desk.capture(CaptureRule(**rule)).png  # type: ignore[arg-type]


def test_every_primitive_is_recorded_in_pixels() -> None:
    desk = FakeDesktop(200, 100)
    desk.move(1, 2)
    desk.click(3, 4)
    desk.click(5, 6, button=3)
    desk.double_click(7, 8)
    desk.triple_click(9, 10)
    desk.mouse_down(11, 12)
    desk.mouse_up(13, 14)
    desk.drag_and_drop(15, 16, 17, 18)
    desk.scroll("Down", 300)
    desk.scroll_at(19, 20, "left", 50)
    desk.type_text("héllo", press_enter=True)
    desk.key_combo("control+l")
    desk.key_down("shift")
    desk.key_up("shift")
    assert desk.events == [
        {"kind": "move", "x": 1, "y": 2},
        {"kind": "click", "x": 3, "y": 4, "button": 1},
        {"kind": "click", "x": 5, "y": 6, "button": 3},
        {"kind": "double_click", "x": 7, "y": 8},
        {"kind": "triple_click", "x": 9, "y": 10},
        {"kind": "mouse_down", "x": 11, "y": 12, "button": 1},
        {"kind": "mouse_up", "x": 13, "y": 14, "button": 1},
        {"kind": "drag_and_drop", "x": 15, "y": 16, "destination_x": 17, "destination_y": 18},
        {"kind": "scroll", "direction": "down", "magnitude": 300},
        {"kind": "scroll_at", "x": 19, "y": 20, "direction": "left", "magnitude": 50},
        {"kind": "type_text", "text": "héllo", "press_enter": True, "clear_first": False},
        {"kind": "key_combo", "keys": "control+l"},
        {"kind": "key_down", "key": "shift"},
        {"kind": "key_up", "key": "shift"},
    ]
    assert [e["x"] for e in desk.events_of("click")] == [3, 5]
    json.dumps(desk.events)  # plain, JSON-able values


def test_the_screen_changes_where_it_is_acted_on() -> None:
    desk = FakeDesktop(320, 200)
    before = desk.screenshot()
    desk.click(160, 100)
    after = desk.screenshot()
    assert before.getpixel((160, 100)) != after.getpixel((160, 100))
    assert before.getpixel((40, 100)) == after.getpixel((40, 100))  # elsewhere: unchanged
    desk.click(40, 100, button=3)
    assert desk.screenshot().getpixel((40, 100)) != after.getpixel((160, 100))  # another colour
    shot = desk.screenshot()
    desk.key_combo("Return")  # no mark, but the status bar tells
    assert desk.screenshot().tobytes() != shot.tobytes()


def test_typed_text_is_kept_like_a_field_would() -> None:
    desk = FakeDesktop()
    desk.type_text("abc")
    desk.type_text("def", press_enter=True)
    assert desk.text == "abcdef\n"
    top = desk.screenshot().crop((0, 0, 1280, 24))
    desk.type_text("new", clear_first=True)
    assert desk.text == "new"
    assert desk.screenshot().crop((0, 0, 1280, 24)).tobytes() != top.tobytes()


def test_capture_is_a_real_png_with_the_screen_size() -> None:
    desk = FakeDesktop(1280, 800)
    shot = desk.capture(CaptureRule())
    assert shot.settled and shot.size == shot.screen_size == (1280, 800)
    assert Image.open(io.BytesIO(shot.png)).format == "PNG"
    small = desk.capture(CaptureRule(max_size=(640, 640)))
    assert small.size == (640, 400) and small.screen_size == (1280, 800)
    assert screen_size_of(small.png) == (1280, 800)


def test_capture_with_a_fixed_delay_uses_the_rules_sleep() -> None:
    slept: list[float] = []
    desk = FakeDesktop(64, 64)
    desk.capture(CaptureRule(fixed_s=0.5, sleep=slept.append))
    assert slept == [0.5]


def test_impossible_input_raises_like_a_real_desktop() -> None:
    desk = FakeDesktop(100, 50)
    with pytest.raises(ValueError, match="outside the 100x50 screen"):
        desk.click(100, 10)
    with pytest.raises(ValueError, match="outside"):
        desk.drag_and_drop(1, 1, 5, 50)
    with pytest.raises(ValueError, match="scroll direction"):
        desk.scroll_at(1, 1, "sideways")
    with pytest.raises(ValueError, match="bad key"):
        desk.key_combo("")
    assert desk.events == []


def test_a_disconnected_fake_raises_connection_errors() -> None:
    desk = FakeDesktop()
    desk.disconnect()
    assert not desk.is_connected()
    with pytest.raises(VncConnectionError):
        desk.click(1, 1)
    with pytest.raises(VncConnectionError):
        desk.capture(CaptureRule())
    desk.reconnect()
    desk.click(1, 1)
    assert len(desk.events) == 1


def test_resize_changes_what_round_trip_reports() -> None:
    desk = FakeDesktop(100, 100)
    desk.click(50, 50)
    desk.resize(200, 80)
    assert desk.round_trip() == (200, 80) == desk.screen_size()
    assert desk.capture(CaptureRule()).size == (200, 80)


def test_events_from_many_threads_are_all_kept() -> None:
    desk = FakeDesktop(100, 100)
    threads = [
        threading.Thread(target=lambda i=i: [desk.click(i, j) for j in range(50)]) for i in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(desk.events) == 400


# ------------------------------------------------------- the executor on the desktop boundary


def _with_points(table_family: str) -> list[tuple[str, dict[str, object]]]:
    if table_family == GEMINI_25_TABLE.family:
        return [
            ("click_at", {"x": 500, "y": 500}),
            ("hover_at", {"x": 0, "y": 999}),
            ("type_text_at", {"x": 250, "y": 250, "text": "hi"}),
            ("scroll_at", {"x": 500, "y": 500, "direction": "down", "magnitude": 500}),
            ("drag_and_drop", {"x": 0, "y": 0, "destination_x": 999, "destination_y": 999}),
        ]
    return [
        (name, {"intent": "test", **args})
        for name, args in [
            ("click", {"x": 500, "y": 500}),
            ("right_click", {"x": 500, "y": 500}),
            ("move", {"x": 0, "y": 999}),
            ("drag_and_drop", {"start_x": 0, "start_y": 0, "end_x": 999, "end_y": 999}),
            ("scroll", {"x": 500, "y": 500, "direction": "up", "magnitude_in_pixels": 200}),
        ]
    ]


@pytest.mark.parametrize("table", [GEMINI_25_TABLE, GEMINI_35_TABLE], ids=lambda t: t.family)
def test_the_executor_reports_the_pixels_the_desktop_received(table: object) -> None:
    """Every pixel the executor says it used is the one the desktop got, on both tables."""
    for name, args in _with_points(table.family):  # type: ignore[attr-defined]
        desk = FakeDesktop(1280, 800)
        hands: Desktop = desk
        action = table.validate(name, args)  # type: ignore[attr-defined]
        assert isinstance(action, ValidatedAction), action
        pixels = execute(action, ActionContext(hands=hands, width=1280, height=800))
        points = [e for e in desk.events if "x" in e]
        assert points, name
        assert (points[0]["x"], points[0]["y"]) == (pixels["x"], pixels["y"]), name
        if "destination_x" in pixels:
            assert points[-1]["destination_x"] == pixels["destination_x"], name
        assert 0 <= pixels["x"] < 1280 and 0 <= pixels["y"] < 800


def test_a_longer_run_lands_every_click_where_the_grid_says(tmp_path: Path) -> None:
    from vnc_use.providers.gemini.planner import GeminiComputerUse
    from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply

    replies = [Reply.calls(FunctionCallSpec("click_at", x=10 * i, y=500)) for i in range(20)]
    with (
        pytest.MonkeyPatch.context() as mp,
        GeminiStandIn([*replies, Reply.text("ok")]),
    ):
        mp.setenv("GOOGLE_API_KEY", DUMMY_API_KEY)
        desk = FakeDesktop(1280, 800)
        planner = GeminiComputerUse(retry_initial_delay=0.01, retry_max_delay=0.05)
        with VncUseAgent(desktop=desk, planner=planner, runs_dir=tmp_path) as agent:
            result = agent.run(task="Click along a line")
    assert result.status == "done", result.error
    assert [e["x"] for e in desk.events] == [round(10 * i / 1000 * 1280) for i in range(20)]
