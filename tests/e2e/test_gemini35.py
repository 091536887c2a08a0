"""Gemini 3.5 Flash (and the 2.5 / 3 families on a desktop) end to end.

Scripted runs through the real google-genai SDK against the stand-in, on a real TigerVNC
desktop whose probe app records every event that arrives: each intent-bearing action of the
3.5 family (both spellings of its drag and scroll), the browser-only exclusions, and thought
signatures surviving checkpoints, approvals from a new agent and resumes from a new agent.
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from google.genai import types
from PIL import Image

from vnc_use import VncUseAgent
from vnc_use.actions import denorm
from vnc_use.agent.state import RunResult
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.testing.gemini_standin import (
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    require_confirmation,
)

from desktop_fixtures import Probe

pytestmark = pytest.mark.desktop

MODEL = "gemini-3.5-flash"
FAST: dict[str, Any] = {"retry_initial_delay": 0.01, "retry_max_delay": 0.05}
CONTROL_MASK = 4  # X ControlMask in an event's state

Call = FunctionCallSpec


def grid(probe: Probe, x: int, y: int) -> dict[str, Any]:
    """The 0-999 grid point the model would name for pixel (x, y) of the probe's screen."""
    w, h = probe.size
    return {"x": round(x * 1000 / w), "y": round(y * 1000 / h)}


def pixel(probe: Probe, x: int, y: int) -> tuple[int, int]:
    """Where vnc-use puts the grid point nearest to pixel (x, y)."""
    g = grid(probe, x, y)
    return denorm(g["x"], g["y"], *probe.size)


def entry(probe: Probe) -> dict[str, Any]:
    return grid(probe, *probe.entry_center)


def events_of(result: RunResult, kind: str = "action") -> list[dict[str, Any]]:
    lines = (Path(result.run_dir) / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == kind]


def decode(sig: str) -> bytes:
    return base64.urlsafe_b64decode(sig.replace("+", "-").replace("/", "_") + "==")


def model_signatures(request_contents: list[dict[str, Any]]) -> list[bytes]:
    """The thought signatures on the function calls of a request's model turns, in order."""
    return [
        decode(p["thoughtSignature"])
        for c in request_contents
        if c["role"] == "model"
        for p in c["parts"]
        if "functionCall" in p and "thoughtSignature" in p
    ]


@pytest.fixture
def agents(tmp_path: Path, gemini: GeminiStandIn) -> Iterator[Callable[..., VncUseAgent]]:
    """Factory for agents on the probe's desktop (each closed at the end of the test)."""
    made: list[VncUseAgent] = []

    def factory(probe: Probe, **kwargs: Any) -> VncUseAgent:
        agent = VncUseAgent(
            vnc_server=probe.desktop.server,
            vnc_password=probe.desktop.password,
            runs_dir=kwargs.pop("runs_dir", tmp_path / "runs"),
            **kwargs,
        )
        made.append(agent)
        return agent

    yield factory
    for agent in made:
        agent.close()


def assert_desktop_requests(gemini: GeminiStandIn) -> None:
    """Every request had the documented 3.5 desktop tool and broke no contract rule."""
    assert gemini.requests
    for req in gemini.requests:
        assert req.path == f"/v1beta/models/{MODEL}:generateContent"
        assert req.tools() == [{"computerUse": {"environment": "ENVIRONMENT_DESKTOP"}}]
    assert not gemini.violations and not gemini.exhausted


# ------------------------------------------------------------------ every new action


def test_pointer_actions_of_gemini_35(
    probe: Probe, gemini: GeminiStandIn, agents: Callable[..., VncUseAgent]
) -> None:
    """click variants, mouse down/move/up, drag and scroll: what arrives, where, which button."""
    a, b, c = (900, 300), (1000, 300), (1100, 300)
    d, e, f = (900, 450), (1000, 500), (1100, 550)
    g, h = (900, 650), (1200, 700)
    s, k = (1000, 400), (800, 600)
    gemini.script(
        Reply.calls(
            Call("double_click", **grid(probe, *a), intent="Open the item"),
            Call("right_click", **grid(probe, *b), intent="Show its context menu"),
            Call("middle_click", **grid(probe, *c), intent="Paste the selection"),
            text="Trying the mouse buttons.",
        ),
        Reply.calls(
            Call("mouse_down", **grid(probe, *d), intent="Grab the handle"),
            Call("move", **grid(probe, *e), intent="Pull it"),
            Call("mouse_up", **grid(probe, *f), intent="Let go"),
        ),
        Reply.calls(
            Call(
                "drag_and_drop",
                start_x=grid(probe, *g)["x"],
                start_y=grid(probe, *g)["y"],
                end_x=grid(probe, *h)["x"],
                end_y=grid(probe, *h)["y"],
                intent="Move the card to the right",
            ),
            Call("scroll", **grid(probe, *s), direction="down", intent="See more below"),
            Call(
                "scroll",
                **grid(probe, *s),
                direction="left",
                magnitude_in_pixels=100,
                intent="Back to the left edge",
            ),
            Call("click", **grid(probe, *k), intent="Click the canvas"),
        ),
        Reply.text("All pointer actions done."),
    )
    agent = agents(probe, model=MODEL, environment="desktop")
    assert agent.planner.environment == "desktop"
    result = agent.run(task="Exercise the mouse")

    assert result.status == "done", result.error
    assert [t["result"] for t in result.transcript] == ["ok"] * 10
    points = {"a": a, "b": b, "c": c, "d": d, "e": e, "f": f, "g": g, "h": h, "s": s, "k": k}
    px = {name: pixel(probe, *p) for name, p in points.items()}

    last = probe.log.wait_type("press", x=px["k"][0], y=px["k"][1])
    assert last["button"] == 1
    presses = [(ev["x"], ev["y"], ev["button"]) for ev in probe.log.events("press")]
    assert presses == [
        (*px["a"], 1),
        (*px["a"], 1),
        (*px["b"], 3),  # right click: button 3
        (*px["c"], 2),  # middle click: button 2
        (*px["d"], 1),
        (*px["g"], 1),
        (*px["k"], 1),
    ]
    releases = [(ev["x"], ev["y"], ev["button"]) for ev in probe.log.events("release")]
    assert (*px["f"], 1) in releases and (*px["h"], 1) in releases
    assert probe.log.events("double")[0]["x"] == px["a"][0]
    # the move happened while the button was held: a motion with button 1 down, at e
    held = [m for m in probe.log.events("motion") if (m["x"], m["y"]) == px["e"]]
    assert held and held[0]["buttons"] & 1
    wheels = [(w["x"], w["y"], w["button"]) for w in probe.log.events("wheel")]
    assert wheels == [(*px["s"], 5)] * 3 + [(*px["s"], 6)]  # 300 px down, 100 px left

    # pixel keys as for the 2.5 handlers, and the model's intent in the transcript and events
    by_name = {t["name"]: t for t in result.transcript}
    assert by_name["drag_and_drop"]["pixels"] == {
        "x": px["g"][0],
        "y": px["g"][1],
        "destination_x": px["h"][0],
        "destination_y": px["h"][1],
    }
    assert result.transcript[7]["pixels"] == {"x": px["s"][0], "y": px["s"][1], "magnitude": 300}
    assert result.transcript[8]["pixels"]["magnitude"] == 100
    assert by_name["right_click"]["pixels"] == {"x": px["b"][0], "y": px["b"][1]}
    actions = events_of(result)
    assert [ev["args"]["intent"] for ev in actions][:3] == [
        "Open the item",
        "Show its context menu",
        "Paste the selection",
    ]
    assert all(ev["args"]["intent"] for ev in actions)
    assert_desktop_requests(gemini)


def test_drag_and_scroll_in_the_reference_agents_spelling(
    probe: Probe, gemini: GeminiStandIn, agents: Callable[..., VncUseAgent]
) -> None:
    """``drag_and_drop(x, y, destination_x, destination_y)`` and ``scroll(..., magnitude)``,
    as Google's reference agent reads them: the drag lands where the documented spelling's
    would, and ``magnitude`` is on the grid, scaled by the screen like 2.5's ``scroll_at``."""
    g, h, s, k = (900, 650), (1200, 700), (1000, 400), (800, 600)
    width, height = probe.size
    gemini.script(
        Reply.calls(
            Call(
                "drag_and_drop",
                **grid(probe, *g),
                destination_x=grid(probe, *h)["x"],
                destination_y=grid(probe, *h)["y"],
                intent="Move the card to the right",
            ),
            Call("scroll", **grid(probe, *s), direction="down", magnitude=700, intent="Below"),
            Call("scroll", **grid(probe, *s), direction="left", magnitude=300, intent="Left"),
            Call("click", **grid(probe, *k), intent="Click the canvas"),
        ),
        Reply.text("Dragged and scrolled."),
    )
    result = agents(probe, model=MODEL).run(task="Drag and scroll")

    assert result.status == "done", result.error
    assert [t["result"] for t in result.transcript] == ["ok"] * 4
    px = {name: pixel(probe, *p) for name, p in {"g": g, "h": h, "s": s, "k": k}.items()}
    probe.log.wait_type("press", x=px["k"][0], y=px["k"][1])
    presses = [(ev["x"], ev["y"], ev["button"]) for ev in probe.log.events("press")]
    assert presses == [(*px["g"], 1), (*px["k"], 1)]
    releases = [(ev["x"], ev["y"], ev["button"]) for ev in probe.log.events("release")]
    assert releases[0] == (*px["h"], 1)
    # 700 of 1000 of the screen's height and 300 of 1000 of its width, in 100-pixel notches
    # (read as pixels, they would have been 7 and 3 notches)
    down, left = round(0.7 * height), round(0.3 * width)
    assert (width, height, down, left) == (1440, 900, 630, 432)
    wheels = [(w["x"], w["y"], w["button"]) for w in probe.log.events("wheel")]
    assert wheels == [(*px["s"], 5)] * 6 + [(*px["s"], 6)] * 4

    drag = {"x": px["g"][0], "y": px["g"][1], "destination_x": px["h"][0]}
    drag["destination_y"] = px["h"][1]
    scrolls = [{"x": px["s"][0], "y": px["s"][1], "magnitude": m} for m in (down, left)]
    expected = [drag, *scrolls, {"x": px["k"][0], "y": px["k"][1]}]
    assert [t["pixels"] for t in result.transcript] == expected
    assert [ev["pixels"] for ev in events_of(result)] == expected
    assert_desktop_requests(gemini)


def test_a_call_mixing_the_two_spellings_is_refused(
    probe: Probe, gemini: GeminiStandIn, agents: Callable[..., VncUseAgent]
) -> None:
    """A drag or a scroll that mixes the documented and the reference agent's argument names
    never reaches the desktop; the model is told why, with both spellings."""
    gemini.script(
        Reply.calls(
            Call(
                "drag_and_drop",
                start_x=600,
                start_y=700,
                destination_x=800,
                destination_y=700,
                intent="Move the card",
            ),
            Call(
                "scroll",
                x=500,
                y=500,
                direction="down",
                magnitude=700,
                magnitude_in_pixels=300,
                intent="Below",
            ),
        ),
        Reply.text("Gave up."),
    )
    result = agents(probe, model=MODEL).run(task="Drag and scroll")

    assert result.status == "done", result.error
    assert [(t["result"], t["pixels"]) for t in result.transcript] == [("error", {})] * 2
    drag, scroll = gemini.requests[1].function_responses()
    assert drag["response"]["error"].startswith(
        "Invalid arguments for drag_and_drop: mixes two spellings "
        "(start_x, start_y with destination_x, destination_y); use one of them. "
        "Expected drag_and_drop(intent: str, start_x: int 0-999, start_y: int 0-999, "
        "end_x: int 0-999, end_y: int 0-999) or drag_and_drop(intent: str, x: int 0-999, "
        "y: int 0-999, destination_x: int 0-999, destination_y: int 0-999)."
    )
    assert scroll["response"]["error"].startswith(
        "Invalid arguments for scroll: mixes two spellings (magnitude_in_pixels with magnitude)"
    )
    assert "magnitude_in_pixels: int 0-999 = 300) or scroll(" in scroll["response"]["error"]
    assert [t["error"] for t in result.transcript] == [
        drag["response"]["error"],
        scroll["response"]["error"],
    ]
    for kind in ("press", "release", "wheel", "motion"):
        assert probe.log.events(kind) == [], kind
    assert_desktop_requests(gemini)


def test_keyboard_actions_of_gemini_35(
    probe: Probe, gemini: GeminiStandIn, agents: Callable[..., VncUseAgent]
) -> None:
    """type, triple click selecting a line, hotkey lists, press_key, and a modifier held with
    key_down across a click."""
    held, plain = (900, 500), (1000, 500)
    gemini.script(
        Reply.calls(
            Call("hotkey", keys=["control", "a"], intent="Select what is in the field"),
            Call("press_key", key="BackSpace", intent="Empty the field"),
            Call("type", text="first line of text", intent="Write a line"),
        ),
        Reply.calls(
            Call("triple_click", **entry(probe), intent="Select the whole line"),
            Call("type", text="replaced", press_enter=True, intent="Overwrite the line"),
        ),
        Reply.calls(
            Call("hotkey", keys=["control", "a"], intent="Select all"),
            Call("type", text="via hotkey", intent="Overwrite again"),
            Call("press_key", key="Return", intent="Submit"),
        ),
        Reply.calls(
            Call("key_down", key="control", intent="Hold Control"),
            Call("click", **grid(probe, *held), intent="Control-click the item"),
            Call("key_up", key="control", intent="Release Control"),
            Call("click", **grid(probe, *plain), intent="Plain click"),
        ),
        Reply.text("Typed, selected, submitted."),
    )
    result = agents(probe, model=MODEL).run(task="Exercise the keyboard")  # desktop: default

    assert result.status == "done", result.error
    assert [t["result"] for t in result.transcript] == ["ok"] * 12
    second = probe.log.wait_type("submit", text="via hotkey")
    submits = [ev["text"] for ev in probe.log.events("submit")]
    assert submits == ["replaced", "via hotkey"]  # the triple click selected the whole line
    triple = probe.log.events("triple")
    assert [(ev["x"], ev["y"]) for ev in triple] == [probe.entry_center]
    assert any(ev["text"] == "first line of text" for ev in probe.log.events("text"))
    # hotkey ["control", "a"]: the "a" arrived with Control held
    ctrl_a = [
        ev
        for ev in probe.log.events("key")
        if ev["keysym"] == "a" and ev["state"] & CONTROL_MASK and ev["char"] == "\x01"
    ]
    assert len(ctrl_a) == 2  # one per hotkey; the typed "a"s came without Control
    # key_down(control) held across the click; released before the next one
    hp, pp = pixel(probe, *held), pixel(probe, *plain)
    plain_press = probe.log.wait_type("press", x=pp[0], y=pp[1])
    held_press = probe.log.wait_type("press", x=hp[0], y=hp[1])
    assert held_press["state"] & CONTROL_MASK
    assert not plain_press["state"] & CONTROL_MASK
    assert held_press["seq"] > second["seq"]
    assert probe.log.wait_type("keyup", keysym="Control_L")["seq"] < plain_press["seq"]
    assert {t["name"]: t["pixels"] for t in result.transcript}["type"] == {}
    assert_desktop_requests(gemini)


def test_wait_and_take_screenshot_answer_with_a_fresh_png(
    probe: Probe, gemini: GeminiStandIn, agents: Callable[..., VncUseAgent]
) -> None:
    gemini.script(
        Reply.calls(
            Call("wait", seconds=0, intent="Let the window settle"),
            Call("take_screenshot", intent="Look at the screen again"),
        ),
        Reply.text("Seen it."),
    )
    result = agents(probe, model=MODEL, environment="desktop").run(task="Look")
    assert result.status == "done", result.error
    assert [(t["name"], t["result"], t["pixels"]) for t in result.transcript] == [
        ("wait", "ok", {}),
        ("take_screenshot", "ok", {}),
    ]
    responses = gemini.requests[1].function_responses()
    assert [r["name"] for r in responses] == ["wait", "take_screenshot"]
    for r in responses:
        assert r["response"] == {"url": ""}
        (png,) = r["images"]
        assert Image.open(io.BytesIO(png)).size == probe.size
    assert probe.log.events("press") == [] and probe.log.events("key") == []
    assert_desktop_requests(gemini)


# ------------------------------------------------------------------ the environment's action set


def test_35_desktop_has_no_browser_navigation_but_the_browser_has(
    probe: Probe, gemini: GeminiStandIn, agents: Callable[..., VncUseAgent]
) -> None:
    navigate = Call("navigate", url="example.com", intent="Open the site")
    gemini.script(Reply.calls(navigate), Reply.text("cannot"))
    desk = agents(probe, model=MODEL).run(task="Open example.com")
    assert desk.status == "done", desk.error
    (entry_,) = desk.transcript
    assert entry_["result"] == "error"
    assert "Unknown function 'navigate'" in entry_["error"]
    (response,) = gemini.requests[1].function_responses()
    assert "Unknown function 'navigate'" in response["response"]["error"]
    assert len(response["images"]) == 1

    # in the browser environment the same call is an action: Ctrl+L, the URL, Enter
    gemini.script(
        Reply.calls(Call("hotkey", keys=["control", "a"], intent="Select the field"), navigate),
        Reply.text("opened"),
    )
    browser = agents(probe, model=MODEL, environment="browser")
    result = browser.run(task="Open example.com")
    assert result.status == "done", result.error
    assert probe.log.wait_type("submit")["text"] == "https://example.com"
    assert gemini.last_request.tools() == [{"computerUse": {"environment": "ENVIRONMENT_BROWSER"}}]
    assert not gemini.violations


@pytest.mark.parametrize(
    "model", ["gemini-2.5-computer-use-preview-10-2025", "gemini-3-flash-preview"]
)
def test_13_function_families_exclude_browser_functions_on_a_desktop(
    probe: Probe, gemini: GeminiStandIn, agents: Callable[..., VncUseAgent], model: str
) -> None:
    gemini.script(
        Reply.calls(FunctionCallSpec("navigate", url="example.com")),
        Reply.text("not available"),
    )
    result = agents(probe, model=model, environment="desktop").run(task="Open example.com")
    assert result.status == "done", result.error
    assert "'navigate' is not available" in (result.transcript[0].get("error") or "")
    assert gemini.requests[0].computer_use_tool() == {
        "environment": "ENVIRONMENT_BROWSER",
        "excludedPredefinedFunctions": [
            "open_web_browser",
            "go_back",
            "go_forward",
            "search",
            "navigate",
        ],
    }
    run_json = json.loads((Path(result.run_dir) / "run.json").read_text())
    assert run_json["environment"] == "desktop"

    # the user can keep them
    gemini.script(
        Reply.calls(
            FunctionCallSpec("key_combination", keys="control+a"),
            FunctionCallSpec("navigate", url="example.org"),
        ),
        Reply.text("navigated"),
    )
    kept = agents(probe, model=model, environment="desktop", keep_browser_actions=True)
    result = kept.run(task="Open example.org")
    assert result.status == "done", result.error
    assert [t["result"] for t in result.transcript] == ["ok", "ok"]
    assert probe.log.wait_type("submit")["text"] == "https://example.org"
    assert gemini.last_request.computer_use_tool() == {
        "environment": "ENVIRONMENT_BROWSER",
        "excludedPredefinedFunctions": [],
    }
    assert not gemini.violations


# ------------------------------------------------------------------ thought signatures


def test_thought_signatures_survive_checkpoints_approval_and_resume(
    probe: Probe, gemini: GeminiStandIn, agents: Callable[..., VncUseAgent], tmp_path: Path
) -> None:
    """Signed calls go back unchanged after a pause for approval (approved by a new agent)
    and after an API failure (resumed by a new agent); the stand-in refuses a request whose
    history lost or changed a signature."""
    signature = b"\x00\xff\xfe sig of turn 1 \x80"
    target = (1100, 800)
    gemini.script(
        Reply.calls(
            Call(
                "click",
                **grid(probe, *target),
                intent="Accept the terms",
                safety_decision=require_confirmation("Accepting the terms is binding."),
                thought_signature=signature,
            ),
        ),
        Reply.calls(
            Call("move", x=500, y=500, intent="Park the pointer")
        ),  # signed by the stand-in
        Reply.error(503),  # the API fails once: the run stops, resumable
        Reply.text("Accepted and parked."),
    )

    def planner() -> GeminiComputerUse:
        return GeminiComputerUse(model=MODEL, environment="desktop", retry_attempts=1, **FAST)

    runs = tmp_path / "runs"
    first = agents(probe, planner=planner(), runs_dir=runs)
    paused = first.run(task="Accept the terms", thread_id="signed")
    assert paused.status == "awaiting_approval"
    assert paused.pending_call is not None
    assert paused.pending_call["args"]["intent"] == "Accept the terms"
    assert paused.pending_call["pixels"] == dict(zip("xy", pixel(probe, *target), strict=True))
    first.close()

    # a new agent reads the model turn from the SQLite checkpoint: the signature is there
    second = agents(probe, planner=planner(), runs_dir=runs)
    state = second.graph.get_state({"configurable": {"thread_id": "signed"}}).values
    # (history records say who spoke under "turn"; older ones under "role")
    (model_turn,) = [t for t in state["contents"] if t.get("turn", t.get("role")) == "model"]
    content = types.Content.model_validate(model_turn["content"])
    assert (content.parts or [])[0].thought_signature == signature

    failed = second.approve("signed")
    assert failed.status == "error", failed.error
    assert "503" in (failed.error or "")
    press = probe.log.wait_type("press")
    assert (press["x"], press["y"]) == pixel(probe, *target)
    approved_request = gemini.requests[1]
    assert model_signatures(approved_request.contents()) == [signature]
    (ack,) = approved_request.function_responses()
    assert ack["response"] == {"url": "", "safety_acknowledgement": "true"}
    served_second = decode(
        json.loads((Path(failed.run_dir) / "model" / "0002-response.json").read_text())[
            "candidates"
        ][0]["content"]["parts"][0]["thought_signature"]
    )
    second.close()

    third = agents(probe, planner=planner(), runs_dir=runs)
    done = third.resume("signed")
    assert done.status == "done", done.error
    assert done.final_text == "Accepted and parked."
    assert [t["name"] for t in done.transcript] == ["click", "move"]
    resumed = gemini.requests[-1]
    assert model_signatures(resumed.contents()) == [signature, served_second]
    assert len(probe.log.events("press")) == 1  # the approved click ran once
    assert [v.rule for v in gemini.violations] == []
    assert not gemini.exhausted


def test_approval_prompt_shows_the_pixels_of_a_35_drag(
    probe: Probe, gemini: GeminiStandIn, agents: Callable[..., VncUseAgent]
) -> None:
    start, end = (900, 300), (1200, 600)
    gemini.script(
        Reply.calls(
            Call(
                "drag_and_drop",
                start_x=grid(probe, *start)["x"],
                start_y=grid(probe, *start)["y"],
                end_x=grid(probe, *end)["x"],
                end_y=grid(probe, *end)["y"],
                intent="Move the file to the bin",
                safety_decision=require_confirmation("Deleting a file."),
            )
        ),
        Reply.text("never"),
    )
    agent = agents(probe, model=MODEL)
    paused = agent.run(task="Delete the file", thread_id="drag")
    assert paused.status == "awaiting_approval"
    assert paused.pending_call is not None
    (x0, y0), (x1, y1) = pixel(probe, *start), pixel(probe, *end)
    assert paused.pending_call["pixels"] == {
        "x": x0,
        "y": y0,
        "destination_x": x1,
        "destination_y": y1,
    }
    assert agent.deny("drag").status == "denied"
    assert probe.log.events("press") == []


# ------------------------------------------------------------------ the command line


def test_cli_run_with_gemini_35_on_the_desktop(
    probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """``vnc-use run --model gemini-3.5-flash --environment desktop`` end to end."""
    gemini.script(
        Reply.calls(
            Call("hotkey", keys=["control", "a"], intent="Select the field"),
            Call("type", text="from the 3.5 CLI", press_enter=True, intent="Type and submit"),
            text="Typing into the field.",
        ),
        Reply.text("Submitted."),
    )
    env = {**os.environ, "VNC_PASSWORD": probe.desktop.password}
    base = [sys.executable, "-m", "vnc_use.cli", "run", "--vnc", probe.desktop.server]
    proc = subprocess.run(
        [
            *base,
            *("--task", "Type into the field", "--runs-dir", str(tmp_path)),
            *("--model", MODEL, "--environment", "desktop", "--thread-id", "cli35"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Unknown model" not in proc.stderr
    assert "Type and submit" in proc.stdout  # the progress line shows the action's intent
    assert probe.log.wait_type("submit")["text"] == "from the 3.5 CLI"
    assert_desktop_requests(gemini)
    run_json = json.loads((tmp_path / "cli35" / "run.json").read_text())
    assert (run_json["model"], run_json["model_family"], run_json["environment"]) == (
        MODEL,
        "gemini-3.5",
        "desktop",
    )

    # an id vnc-use does not know: a warning, and the action set of 3.5 and newer models
    gemini.script(Reply.text("nothing to do"))
    proc = subprocess.run(
        [*base, *("--task", "Nothing", "--runs-dir", str(tmp_path), "--model", "gemini-9-x")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Unknown model 'gemini-9-x': assuming it speaks the gemini-3.5 action set" in (
        proc.stderr
    )
    assert gemini.last_request.tools() == [{"computerUse": {"environment": "ENVIRONMENT_DESKTOP"}}]
