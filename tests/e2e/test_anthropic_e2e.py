"""Claude's computer tools end to end on a real 2880x1800 desktop, through the real
``anthropic`` SDK and the stand-in.

The desktop is larger than every Claude model's image limits, so each screenshot is resized
before it is sent (2420x1512 for the toolset and Opus 4.7, 1356x847 for earlier models) and a
point mapped back through the wrong size misses. One script per tool version (toolset,
``computer_20251124``, ``computer_20250124``), written in pixels of the image the model is
sent: a click, typing, Ctrl+A, Return, a double click, a drag, a scroll and a shift-held click
must land on the probe's widgets. Then through the CLI: a refusal exits 6, and a run killed
with SIGKILL mid-batch is resumed with no action performed twice and no secret written.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from vnc_use import VncUseAgent
from vnc_use.providers.anthropic.planner import AnthropicPlanner
from vnc_use.providers.anthropic.versions import choose, fit
from vnc_use.testing.anthropic_standin import Action, AnthropicStandIn, Reply
from vnc_use.testing.desktop import TestDesktop

from cli_tools import CLI, run_cli
from desktop_fixtures import Probe, start_probe

pytestmark = pytest.mark.desktop

WIDTH, HEIGHT = 2880, 1800
TOLERANCE = 3
"""Pixels: the 0-999 grid is 2.9 screen pixels a step here; the image point, the grid and the
screen each round once. Mapping through the screen size instead of the image's misses by
hundreds of pixels."""
API_KEY = "sk-ant-api03-e2e-SECRET-key-0123456789"

Point = tuple[int, int]

VERSIONS = {
    "computer_toolset_20260801": "claude-sonnet-5-5",
    "computer_20251124": "claude-opus-4-7",
    "computer_20250124": "claude-haiku-4-5",
}
"""Tool version -> a model the table gives it."""


@pytest.fixture(scope="module")
def big_probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Probe]:
    """The probe app on a 2880x1800 desktop, for this module."""
    with TestDesktop(WIDTH, HEIGHT) as desk:
        yield start_probe(desk, str(tmp_path_factory.mktemp("probe") / "events.jsonl"))


@pytest.fixture
def probe_2880(big_probe: Probe) -> Probe:
    assert big_probe.process.poll() is None, "the probe app exited"
    big_probe.log.clear()
    return big_probe


class Targets:
    """Where the scripts aim, in screen pixels, from the probe's widget positions."""

    def __init__(self, probe: Probe) -> None:
        x, y, w, h = probe.ready["entry"]
        self.entry_box = (x, y, x + w, y + h)
        self.entry = (x + w * 3 // 4, y + h // 2)
        self.panel_box = tuple(probe.ready["panel"])
        px0, py0, px1, py1 = self.panel_box
        self.double = (WIDTH * 6 // 10, HEIGHT * 6 // 10)
        self.drag_from = (WIDTH // 8, HEIGHT * 3 // 4)
        self.drag_to = ((px0 + px1) // 2 + 60, (py0 + py1) // 2 + 40)
        self.scroll = (WIDTH * 7 // 10, HEIGHT * 2 // 3)
        self.shift_click = (WIDTH * 9 // 10, HEIGHT * 9 // 10)


def to_image(xy: Point, size: Point) -> list[int]:
    """A screen pixel as a pixel of the image of ``size`` sent to the model."""
    return [round(xy[0] * size[0] / WIDTH), round(xy[1] * size[1] / HEIGHT)]


def script(t: Targets, size: Point) -> list[Reply]:
    """Two batches and an answer, in pixels of the image sent."""
    return [
        Reply.act(
            Action("left_click", {"coordinate": to_image(t.entry, size)}),
            Action("type", {"text": "Ada"}),
            Action("key", {"text": "ctrl+a"}),
            Action("type", {"text": "Bob"}),
            Action("key", {"text": "Return"}),
            text="Rename the card.",
        ),
        Reply.act(
            Action("double_click", {"coordinate": to_image(t.double, size)}),
            Action(
                "left_click_drag",
                {
                    "start_coordinate": to_image(t.drag_from, size),
                    "coordinate": to_image(t.drag_to, size),
                },
            ),
            Action(
                "scroll",
                {
                    "coordinate": to_image(t.scroll, size),
                    "scroll_direction": "down",
                    "scroll_amount": 3,
                },
            ),
            Action("left_click", {"coordinate": to_image(t.shift_click, size), "text": "shift"}),
            Action("screenshot"),
        ),
        Reply.done("Renamed to Bob and moved the card."),
    ]


def near(event: dict[str, Any], want: Point) -> bool:
    return abs(int(event["x"]) - want[0]) <= TOLERANCE and abs(int(event["y"]) - want[1]) <= (
        TOLERANCE
    )


def inside(event: dict[str, Any], box: tuple[int, ...]) -> bool:
    x0, y0, x1, y1 = box
    return x0 <= int(event["x"]) < x1 and y0 <= int(event["y"]) < y1


def image_sizes(server: AnthropicStandIn) -> set[Point]:
    sizes = set()
    for request in server.requests:
        for data in request.images():
            with Image.open(io.BytesIO(data)) as image:
                sizes.add(image.size)
    return sizes


@pytest.mark.parametrize("version", list(VERSIONS))
def test_each_tool_version_lands_on_the_widgets(
    version: str, probe_2880: Probe, tmp_path: Path
) -> None:
    probe = probe_2880
    model = VERSIONS[version]
    choice = choose(model)
    assert choice.version == version
    size = fit(WIDTH, HEIGHT, choice.limits)
    assert size != (WIDTH, HEIGHT)
    t = Targets(probe)
    with AnthropicStandIn(script(t, size), expected_api_key=API_KEY) as server:
        planner = AnthropicPlanner(model, api_key=API_KEY, base_url=server.base_url, max_retries=0)
        with VncUseAgent(
            vnc_server=probe.desktop.server,
            vnc_password=probe.desktop.password,
            planner=planner,
            runs_dir=tmp_path,
        ) as agent:
            result = agent.run(task="Rename the card to Bob and move it", thread_id=version)
        assert not server.violations and server.remaining == 0
        assert image_sizes(server) == {size}
        tools = [r.tools for r in server.requests]
        if version == "computer_toolset_20260801":
            assert all(tool == [{"type": version}] for tool in tools)
            assert all(not r.betas for r in server.requests)
            assert {b["toolset_name"] for b in server.requests[1].tool_results()} == {"computer"}
        else:
            (entry,) = tools[0]
            assert (entry["display_width_px"], entry["display_height_px"]) == size
            assert all(r.betas == [choice.beta] for r in server.requests)
        # every block of a batch answered, in order, the screenshot on the last one
        results = server.requests[1].tool_results()
        assert [r.get("is_error") for r in results] == [None] * 5
        assert results[-1]["content"][-1]["type"] == "image"
    assert result.status == "done", result.error
    assert all(step["result"] == "ok" for step in result.transcript)

    log = probe.log
    log.wait_for(
        lambda e: e["type"] == "release" and e["button"] == 1 and near(e, t.shift_click),
        timeout=10,
        what="the shift-click's release",
    )
    presses = [e for e in log.events("press") if e["button"] == 1]
    click, double_1, double_2, drag, shift_click = presses
    assert inside(click, t.entry_box) and near(click, t.entry), (click, t.entry)
    assert any(e["text"].endswith("Ada") for e in log.events("text"))
    assert [e for e in log.events("key") if e["keysym"] == "a" and e["state"] & 4], "no Ctrl+A"
    assert log.wait_type("submit")["text"] == "Bob"
    assert near(double_1, t.double) and near(double_2, t.double)
    assert [e for e in log.events("double") if near(e, t.double)]
    assert near(drag, t.drag_from)
    drop = [e for e in log.events("release") if e["button"] == 1][3]
    assert inside(drop, t.panel_box) and near(drop, t.drag_to), (drop, t.drag_to)
    wheel = log.events("wheel")
    assert [e["button"] for e in wheel] == [5, 5, 5] and all(near(e, t.scroll) for e in wheel)
    assert near(shift_click, t.shift_click) and shift_click["state"] & 1, shift_click
    assert not click["state"] & 1 and not drag["state"] & 1  # shift held for that click only


# ---------------------------------------------------------------------- through the CLI


def cli_env(server: AnthropicStandIn, probe: Probe) -> dict[str, str]:
    return {
        "ANTHROPIC_API_KEY": API_KEY,
        "ANTHROPIC_BASE_URL": server.base_url,
        "VNC_PASSWORD": probe.desktop.password,
    }


def test_refusal_exits_6_with_its_category(probe_2880: Probe, tmp_path: Path) -> None:
    probe = probe_2880
    refusal = Reply.refuse("cyber", "This looks like an attack on a system.")
    with AnthropicStandIn([refusal], expected_api_key=API_KEY) as server:
        proc = run_cli(
            [
                *("run", "--model", "claude-opus-9", "--task", "Break in"),
                *("--vnc", probe.desktop.server, "--runs-dir", str(tmp_path)),
            ],
            env=cli_env(server, probe),
        )
    assert proc.returncode == 6, proc.stdout + proc.stderr
    assert "cyber" in proc.stdout + proc.stderr
    # an id the table does not know: the toolset, and a warning naming the assumption
    assert "'claude-opus-9'" in proc.stderr and "--tool-version" in proc.stderr
    assert not probe.log.events("press")
    (settings,) = [json.loads(p.read_text()) for p in tmp_path.glob("*/run.json")]
    assert settings["provider"] == "anthropic"  # inferred from claude-
    assert settings["tool_version"] == "computer_toolset_20260801"


def test_killed_mid_batch_resumes_without_repeating_an_action(
    probe_2880: Probe, tmp_path: Path
) -> None:
    """SIGKILL once "Ada" is typed; ``vnc-use resume`` finishes the batch: the click, the
    typing and Return each happened once. The key and the VNC password are in no file."""
    probe = probe_2880
    t = Targets(probe)
    size = fit(WIDTH, HEIGHT, choose("claude-opus-4-7").limits)
    runs = tmp_path / "runs"
    with AnthropicStandIn(script(t, size)[:1], expected_api_key=API_KEY) as server:
        server.extend(Reply.done("Renamed."))
        env = {**os.environ, **cli_env(server, probe)}
        child = subprocess.Popen(
            [
                *CLI,
                *("run", "--provider", "anthropic", "--model", "claude-opus-4-7"),
                *("--task", "Rename the card", "--thread-id", "k1", "--no-hitl"),
                *("--vnc", probe.desktop.server, "--runs-dir", str(runs)),
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            probe.log.wait_for(
                lambda e: e["type"] == "text" and e["text"].endswith("Ada"), timeout=60
            )
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.communicate(timeout=30)
        assert child.returncode == -signal.SIGKILL
        proc = run_cli(["resume", "k1", "--runs-dir", str(runs)], env=cli_env(server, probe))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert not server.violations
    log = probe.log
    assert log.wait_type("submit", timeout=10)["text"] == "Bob"
    presses = [e for e in log.events("press") if e["button"] == 1]
    assert len(presses) == 1 and inside(presses[0], t.entry_box)
    assert not [e for e in log.events("text") if "AdaAda" in e["text"] or "BobBob" in e["text"]]
    assert len(log.events("submit")) == 1
    settings = json.loads((runs / "k1" / "run.json").read_text())
    assert (settings["provider"], settings["model"]) == ("anthropic", "claude-opus-4-7")
    assert settings["tool_version"] == "computer_20251124"
    for path in runs.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert API_KEY.encode() not in data, path
            assert probe.desktop.password.encode() not in data, path
