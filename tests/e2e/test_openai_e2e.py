"""Every OpenAI-compatible dialect end to end on a real desktop, through the real ``openai`` SDK.

One scripted run per dialect (``tools``, ``qwen3-vl``, ``qwen2.5-vl``, ``ui-tars``; ``holo``,
``ui-venus``, ``opencua`` with a shorter script) against the
stand-in, on a 1021x767 TigerVNC desktop (not a multiple of 28: a resize mistake shows) with
the probe app recording what arrives. Each script is written in its family's own coordinate
convention, computed from the probe's widget positions: the 0-999 grid (``tools``), 0-1000
relative (``qwen3-vl``), pixels of the smart-resized image sent (``qwen2.5-vl``, ``ui-tars``).
The clicks, a drag, typing and a key combination must land on the widgets they aim at.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from vnc_use import VncUseAgent
from vnc_use.providers.openai_compat import OpenAICompatPlanner
from vnc_use.providers.openai_compat.resize import QWEN25_VL, UI_TARS, PixelLimits, smart_resize
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.openai_families import family_reply
from vnc_use.testing.openai_standin import OpenAIStandIn, Reply, ToolCall

from desktop_fixtures import Probe, start_probe

pytestmark = pytest.mark.desktop

WIDTH, HEIGHT = 1021, 767
TOLERANCE = 2
"""Pixels: the model's point, the 0-999 grid and the screen each round once (~0.5 px each).
Mapping image pixels through the screen size instead of the 1008x756 image sent would miss
the aimed points by 6-12 px."""

Point = tuple[int, int]


@pytest.fixture(scope="module")
def odd_probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Probe]:
    """The probe app on a 1021x767 desktop, for this module."""
    with TestDesktop(WIDTH, HEIGHT) as desk:
        yield start_probe(desk, str(tmp_path_factory.mktemp("probe") / "events.jsonl"))


@pytest.fixture
def probe_1021(odd_probe: Probe) -> Probe:
    """The odd-sized probe with its log marked for this test."""
    assert odd_probe.process.poll() is None, "the probe app exited"
    odd_probe.log.clear()
    return odd_probe


class Targets:
    """Where the script aims, in screen pixels, from the probe's own widget positions."""

    def __init__(self, probe: Probe) -> None:
        x, y, w, h = probe.ready["entry"]
        self.entry_box = (x, y, x + w, y + h)
        self.entry = (x + w * 3 // 4, y + h // 2)  # right of centre: far from the origin
        self.panel_box = tuple(probe.ready["panel"])
        px0, py0, px1, py1 = self.panel_box
        self.drag_from = (WIDTH // 8, HEIGHT * 3 // 4)  # plain canvas, bottom left
        self.drag_to = ((px0 + px1) // 2 + 60, (py0 + py1) // 2 + 40)  # inside the panel
        self.canvas = (WIDTH * 9 // 10, HEIGHT * 9 // 10)  # plain canvas, bottom right


def relative(xy: Point) -> Point:
    """A screen pixel on a 1000-step frame (the ``tools`` grid, Qwen3-VL's 0-1000)."""
    return round(xy[0] * 1000 / WIDTH), round(xy[1] * 1000 / HEIGHT)


def sent_size(limits: PixelLimits) -> Point:
    """The (width, height) of the image a pixel dialect is sent for this screen."""
    height, width = smart_resize(HEIGHT, WIDTH, limits)
    return width, height


def image_pixel(xy: Point, size: Point) -> Point:
    """A screen pixel as a pixel of the resized image of ``size``."""
    return round(xy[0] * size[0] / WIDTH), round(xy[1] * size[1] / HEIGHT)


# ------------------------------------------------------------------ the scripts, per dialect


def tools_script(t: Targets) -> list[Reply]:
    """Native tool calls of the 3.5 action set on the 0-999 grid."""

    def at(xy: Point) -> dict[str, int]:
        gx, gy = relative(xy)
        return {"x": gx, "y": gy}

    (sx, sy), (ex, ey) = relative(t.drag_from), relative(t.drag_to)
    return [
        Reply.tool_calls(ToolCall("click", {**at(t.entry), "intent": "the name field"})),
        Reply.tool_calls(ToolCall("type", {"text": "Ada"})),
        Reply.tool_calls(ToolCall("hotkey", {"keys": ["ctrl", "a"]})),
        Reply.tool_calls(ToolCall("type", {"text": "Bob", "press_enter": True})),
        Reply.tool_calls(
            ToolCall("drag_and_drop", {"start_x": sx, "start_y": sy, "end_x": ex, "end_y": ey}),
            ToolCall("click", at(t.canvas)),
            content="Move the card into the panel, then click the canvas.",
        ),
        Reply.finish("Renamed to Bob and moved the card."),
    ]


def computer_use_script(t: Targets, to_model: Callable[[Point], Point]) -> list[Reply]:
    """Qwen's ``<tool_call>`` blocks of ``computer_use`` (Qwen3-VL and Qwen2.5-VL)."""

    def call(action: str, **args: Any) -> str:
        body = {"name": "computer_use", "arguments": {"action": action, **args}}
        return f"<tool_call>\n{json.dumps(body)}\n</tool_call>"

    def reply(thought: str, *calls: str) -> Reply:
        return Reply.text(f"Thought: {thought}\n" + "\n".join(calls))

    return [
        reply("Click the name field.", call("left_click", coordinate=list(to_model(t.entry)))),
        reply("Type the name.", call("type", text="Ada")),
        reply("Select it all.", call("key", keys=["ctrl", "a"])),
        reply("Replace it and submit.", call("type", text="Bob\n")),
        reply(
            "Move the card into the panel, then click the canvas.",
            call("mouse_move", coordinate=list(to_model(t.drag_from))),
            call("left_click_drag", coordinate=list(to_model(t.drag_to))),
            call("left_click", coordinate=list(to_model(t.canvas))),
        ),
        reply("Renamed to Bob and moved the card.", call("terminate", status="success")),
    ]


def ui_tars_script(t: Targets, size: Point) -> list[Reply]:
    """UI-TARS 1.5 ``Thought: ... Action: ...`` text in pixels of the image sent."""

    def box(xy: Point) -> str:
        x, y = image_pixel(xy, size)
        return f"<|box_start|>({x},{y})<|box_end|>"

    def reply(thought: str, action: str) -> Reply:
        return Reply.text(f"Thought: {thought}\nAction: {action}")

    return [
        reply("Click the name field.", f"click(start_box='{box(t.entry)}')"),
        reply("Type the name.", "type(content='Ada')"),
        reply("Select it all.", "hotkey(key='ctrl a')"),
        reply("Replace it and submit.", "type(content='Bob\\n')"),
        reply(
            "Move the card into the panel, then click the canvas.",
            f"drag(start_box='{box(t.drag_from)}', end_box='{box(t.drag_to)}')\n\n"
            f"click(start_box='{box(t.canvas)}')",
        ),
        reply("Done.", "finished(content='Renamed to Bob and moved the card.')"),
    ]


QWEN25_SIZE = sent_size(QWEN25_VL)
UI_TARS_SIZE = sent_size(UI_TARS)

DIALECTS: dict[str, tuple[str, Callable[[Targets], list[Reply]], Point]] = {
    "tools": ("local-tools-model", tools_script, (WIDTH, HEIGHT)),
    "qwen3-vl": (
        "qwen3-vl-8b-instruct",
        lambda t: computer_use_script(t, relative),
        (WIDTH, HEIGHT),
    ),
    "qwen2.5-vl": (
        "qwen2.5-vl-7b-instruct",
        lambda t: computer_use_script(t, lambda xy: image_pixel(xy, QWEN25_SIZE)),
        QWEN25_SIZE,
    ),
    "ui-tars": ("ui-tars-1.5-7b", lambda t: ui_tars_script(t, UI_TARS_SIZE), UI_TARS_SIZE),
}
"""dialect -> (model id, script from the targets, size of the image the model is sent)."""


def sizes_sent(server: OpenAIStandIn) -> set[Point]:
    """The sizes of every image in every request the stand-in received."""
    sizes = set()
    for request in server.requests:
        for data in request.images():
            with Image.open(io.BytesIO(data)) as image:
                sizes.add(image.size)
    return sizes


def near(event: dict[str, Any], want: Point) -> bool:
    """The event happened within :data:`TOLERANCE` pixels of ``want``."""
    x, y = int(event["x"]), int(event["y"])
    return abs(x - want[0]) <= TOLERANCE and abs(y - want[1]) <= TOLERANCE


def inside(event: dict[str, Any], box: tuple[int, ...]) -> bool:
    """The event happened inside ``box`` (x0, y0, x1, y1; right and bottom excluded)."""
    x0, y0, x1, y1 = box
    x, y = int(event["x"]), int(event["y"])
    return x0 <= x < x1 and y0 <= y < y1


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_each_dialect_lands_on_the_widgets_it_aims_at(
    dialect: str, probe_1021: Probe, tmp_path: Path
) -> None:
    """The whole agent on one dialect: every pointer event within 2 px of its target and
    inside the aimed widget; the text, Ctrl+A and Enter reach the entry."""
    probe = probe_1021
    assert probe.size == (WIDTH, HEIGHT) and WIDTH % 28 and HEIGHT % 28
    model, make_script, image_size = DIALECTS[dialect]
    t = Targets(probe)
    with OpenAIStandIn(make_script(t), models=model, max_images=2) as server:
        planner = OpenAICompatPlanner(server.base_url, model, dialect=dialect, max_retries=0)
        with VncUseAgent(
            vnc_server=probe.desktop.server,
            vnc_password=probe.desktop.password,
            planner=planner,
            keep_screenshots=2,
            runs_dir=tmp_path,
        ) as agent:
            result = agent.run(task="Rename the card to Bob and move it", thread_id=dialect)
        assert not server.violations and not server.exhausted and server.remaining == 0
        # pixel dialects: the smart-resized image every time; the others: the screenshot
        assert sizes_sent(server) == {image_size}
        assert max(len(r.images()) for r in server.requests) == 2  # keep_screenshots=2
    assert result.status == "done", result.error
    assert result.final_text == "Renamed to Bob and moved the card."
    assert [step["result"] for step in result.transcript] == ["ok"] * len(result.transcript)

    log = probe.log
    log.wait_for(
        lambda e: e["type"] == "release" and e["button"] == 1 and near(e, t.canvas),
        timeout=10,
        what="the last click's release",
    )
    presses = [e for e in log.events("press") if e["button"] == 1]
    releases = [e for e in log.events("release") if e["button"] == 1]
    assert len(presses) == len(releases) == 3, (presses, releases)
    click, drag_start, canvas_click = presses
    # the click: in the entry, where aimed
    assert inside(click, t.entry_box) and near(click, t.entry), (click, t.entry)
    # typing, Ctrl+A (select all in the entry) and typing over the selection, then Enter
    # (the entry may still hold an earlier test's text: Ctrl+A is what clears it)
    assert any(e["text"].endswith("Ada") for e in log.events("text"))
    combo = [e for e in log.events("key") if e["keysym"] == "a" and e["state"] & 4]
    assert combo, "Ctrl+A did not reach the probe"
    assert log.wait_type("submit")["text"] == "Bob"  # "AdaBob" had Ctrl+A missed
    # the drag: pressed on the canvas, moved with the button held, released in the panel
    assert near(drag_start, t.drag_from), (drag_start, t.drag_from)
    drop = releases[1]
    assert inside(drop, t.panel_box) and near(drop, t.drag_to), (drop, t.drag_to)
    held = [m for m in log.events("motion") if m["buttons"] & 1]
    assert held and near(held[-1], t.drag_to)
    # the last click: on the plain canvas, where aimed
    assert near(canvas_click, t.canvas), (canvas_click, t.canvas)


# ------------------------------------------------------------------ the newer families


def _family_steps(family: str) -> tuple[str, str]:
    """(typing "Ada" and Enter, the finish) in ``family``'s own format."""
    if family == "holo":
        write = {"tool_name": "write", "text": "Ada", "press_enter": True}
        done = {"tool_name": "answer", "text": "Typed Ada."}
        return (
            json.dumps({"note": None, "thought": "Type the name.", "tool_call": write}),
            json.dumps({"note": None, "thought": "Done.", "tool_call": done}),
        )
    if family == "ui-venus":
        return (
            "<think>Type the name.</think>\n<action>Type(content='Ada\\n')</action>",
            "<think>Done.</think>\n<action>Finished(content='Typed Ada.')</action>",
        )
    return (
        "## Thought:\nType the name.\n\n## Action:\nType Ada.\n\n## Code:\n```python\n"
        "pyautogui.write(message='Ada')\npyautogui.press('enter')\n```",
        "## Thought:\nTyped Ada.\n\n## Action:\nFinish.\n\n## Code:\n```python\n"
        "computer.terminate(status='success')\n```",
    )


NEW_FAMILIES = {
    "holo": ("Hcompany/Holo-3.1-35B-A3B", (WIDTH, HEIGHT)),
    "ui-venus": ("inclusionAI/UI-Venus-1.5-8B", (WIDTH, HEIGHT)),
    "opencua": ("xlangai/OpenCUA-7B", QWEN25_SIZE),
}
"""family -> (a model id the dialect is inferred from, size of the image the model is sent)."""


@pytest.mark.parametrize("family", list(NEW_FAMILIES))
def test_each_new_family_lands_within_two_pixels(
    family: str, probe_1021: Probe, tmp_path: Path
) -> None:
    """Holo, UI-Venus and OpenCUA answering in their exact format and convention (dialect
    inferred from the model id): both clicks land within 2 px of the aimed points, the
    typed text reaches the entry and the run ends with the family's finish."""
    probe = probe_1021
    model, image_size = NEW_FAMILIES[family]
    t = Targets(probe)
    type_ada, finish = _family_steps(family)
    script = [
        family_reply(family, t.entry, (WIDTH, HEIGHT), what="the name field"),
        Reply.text(type_ada),
        family_reply(family, t.canvas, (WIDTH, HEIGHT), what="the canvas"),
        Reply.text(finish),
    ]
    with OpenAIStandIn(script, models=model, max_images=2) as server:
        planner = OpenAICompatPlanner(server.base_url, model, max_retries=0)
        assert planner.dialect_name == family
        with VncUseAgent(
            vnc_server=probe.desktop.server,
            vnc_password=probe.desktop.password,
            planner=planner,
            runs_dir=tmp_path,
        ) as agent:
            result = agent.run(task="Type Ada into the name field", thread_id=family)
        assert not server.violations and server.remaining == 0
        assert sizes_sent(server) == {image_size}
    assert result.status == "done", result.error
    assert result.final_text == "Typed Ada."
    log = probe.log
    log.wait_for(
        lambda e: e["type"] == "release" and e["button"] == 1 and near(e, t.canvas),
        timeout=10,
        what="the last click's release",
    )
    presses = [e for e in log.events("press") if e["button"] == 1]
    assert len(presses) == 2, presses
    assert inside(presses[0], t.entry_box) and near(presses[0], t.entry), (presses[0], t.entry)
    assert near(presses[1], t.canvas), (presses[1], t.canvas)
    assert log.wait_type("submit")["text"].endswith("Ada")
