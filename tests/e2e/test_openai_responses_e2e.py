"""OpenAI's GA computer tool end to end on a real 2880x1800 desktop, through the real SDK.

The Responses stand-in answers with ``computer_call`` batches whose pixels are computed from
the image it was actually sent (read back from each request), aimed at the probe app's own
widgets: a click, typing, the chord ``["CTRL","A"]``, Enter, a double click, a drag, scrolls
in pixels both ways, a middle (``wheel``) click and a Shift-held click must land where aimed.
Once at full size (5.2 MP, under ``detail: "original"``'s 10.24 MP) and once with the image
cap lowered so that every screenshot is downscaled and the model's pixels must be mapped back.
Then the approval gate (a pending safety check stops the whole batch until ``vnc-use approve``
from another process; a denial sends nothing), a refusal, and a SIGKILL mid-run resumed with no
action performed twice, all through the command line.
"""

from __future__ import annotations

import io
import json
import math
import os
import shlex
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from vnc_use import VncUseAgent
from vnc_use.providers.openai import OpenAIPlanner
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.openai_checks import decode_data_url
from vnc_use.testing.openai_responses_standin import OpenAIResponsesStandIn, Turn

from cli_tools import CLI, run_cli
from desktop_fixtures import Probe, start_probe
from doc_pages import blocks, page, section

pytestmark = pytest.mark.desktop

WIDTH, HEIGHT = 2880, 1800
KEY = "sk-test-openai-e2e-0123456789"
Point = tuple[int, int]


@pytest.fixture(scope="module")
def big_probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Probe]:
    """The probe app on a 2880x1800 desktop, for this module."""
    with TestDesktop(WIDTH, HEIGHT) as desk:
        yield start_probe(desk, str(tmp_path_factory.mktemp("probe") / "events.jsonl"))


@pytest.fixture
def probe(big_probe: Probe) -> Probe:
    assert big_probe.process.poll() is None, "the probe app exited"
    big_probe.log.clear()
    return big_probe


class Targets:
    """Where the scripts aim, in screen pixels, from the probe's own widget positions."""

    def __init__(self, probe: Probe) -> None:
        x, y, w, h = probe.ready["entry"]
        self.entry_box = (x, y, x + w, y + h)
        self.entry = (x + w * 3 // 4, y + h // 2)
        self.panel_box = tuple(probe.ready["panel"])
        px0, py0, px1, py1 = self.panel_box
        self.drag_from = (WIDTH // 8, HEIGHT * 3 // 4)
        self.drag_to = ((px0 + px1) // 2 + 60, (py0 + py1) // 2 + 40)
        self.double = (WIDTH * 9 // 10, HEIGHT * 9 // 10)
        self.scroll_at = (WIDTH // 3, HEIGHT // 2)
        self.middle = (WIDTH * 2 // 5, HEIGHT * 3 // 5)
        self.shift = (WIDTH * 7 // 10, HEIGHT * 7 // 10)


def last_image_size(body: Any) -> Point:
    """The size of the latest image a request carries (what the model's pixels refer to)."""
    urls: list[Any] = []
    for item in body["input"]:
        if item.get("type") == "computer_call_output":
            urls.append(item["output"]["image_url"])
        for part in item.get("content") or [] if isinstance(item.get("content"), list) else []:
            if part.get("type") == "input_image":
                urls.append(part["image_url"])
    data = decode_data_url(urls[-1])
    assert data is not None
    with Image.open(io.BytesIO(data)) as image:
        return image.size


def scripted(
    steps: list[Callable[[Callable[[Point], dict[str, int]]], Turn]],
    sizes: list[Point] | None = None,
) -> Callable[[Any, int], Turn]:
    """A stand-in script whose turn ``i`` is ``steps[i]`` given a screen-to-image mapper."""

    def script(body: Any, index: int) -> Turn:
        if index >= len(steps):
            return Turn.message("(script exhausted)")
        if index == 0 and not any(
            isinstance(i.get("content"), list)
            and any(p.get("type") == "input_image" for p in i["content"])
            for i in body["input"]
        ):
            return steps[0](lambda xy: {"x": 0, "y": 0})
        size = last_image_size(body)
        if sizes is not None:
            sizes.append(size)

        def at(xy: Point) -> dict[str, int]:
            return {"x": xy[0] * size[0] // WIDTH, "y": xy[1] * size[1] // HEIGHT}

        return steps[index](at)

    return script


def tolerance(size: Point) -> int:
    """Pixels: the image pixel (floor), the grid and the screen each round once."""
    return math.ceil(WIDTH / size[0]) + 2


def near(event: dict[str, Any], want: Point, tol: int) -> bool:
    return abs(int(event["x"]) - want[0]) <= tol and abs(int(event["y"]) - want[1]) <= tol


def inside(event: dict[str, Any], box: tuple[int, ...]) -> bool:
    x0, y0, x1, y1 = box
    return x0 <= int(event["x"]) < x1 and y0 <= int(event["y"]) < y1


def full_script(t: Targets) -> list[Callable[[Callable[[Point], dict[str, int]]], Turn]]:
    click = {"type": "click", "button": "left"}
    return [
        lambda at: Turn.call({"type": "screenshot"}),
        lambda at: Turn.call(
            {**click, **at(t.entry)},
            {"type": "type", "text": "Ada"},
            {"type": "keypress", "keys": ["CTRL", "A"]},
            {"type": "type", "text": "Bob"},
            {"type": "keypress", "keys": ["ENTER"]},
            text="Rename the card.",
        ),
        lambda at: Turn.call(
            {"type": "double_click", **at(t.double)},
            {"type": "drag", "path": [at(t.drag_from), at(t.drag_to)]},
        ),
        lambda at: Turn.call(
            {"type": "scroll", **at(t.scroll_at), "scroll_x": 0, "scroll_y": 300},
            {"type": "scroll", **at(t.scroll_at), "scroll_x": -200, "scroll_y": 0},
            {"type": "click", "button": "wheel", **at(t.middle)},
            {**click, **at(t.shift), "keys": ["SHIFT"]},
        ),
        lambda at: Turn.message("Renamed to Bob, moved the card."),
    ]


@pytest.mark.parametrize("max_pixels", [10_240_000, 1_300_000], ids=["original", "downscaled"])
def test_every_action_lands_on_the_widget_it_aims_at(
    max_pixels: int, probe: Probe, tmp_path: Path
) -> None:
    t = Targets(probe)
    sizes: list[Point] = []
    with OpenAIResponsesStandIn(scripted(full_script(t), sizes)) as server:
        planner = OpenAIPlanner(
            "gpt-5.5", api_key=KEY, base_url=server.base_url, max_retries=0, max_pixels=max_pixels
        )
        with VncUseAgent(
            vnc_server=probe.desktop.server,
            vnc_password=probe.desktop.password,
            planner=planner,
            runs_dir=tmp_path,
        ) as agent:
            result = agent.run(task="Rename the card to Bob and move it", thread_id="all")
        assert not server.violations and len(server.requests) == 5
        assert all(r.body["store"] is False for r in server.requests)
    assert result.status == "done", result.error
    assert result.final_text == "Renamed to Bob, moved the card."
    assert [s["result"] for s in result.transcript] == ["ok"] * len(result.transcript)
    size = sizes[-1]
    if max_pixels < WIDTH * HEIGHT:
        assert size[0] * size[1] <= max_pixels and size[0] < WIDTH  # downscaled, mapped back
    else:
        assert size == (WIDTH, HEIGHT)
    tol = tolerance(size)

    log = probe.log
    log.wait_for(
        lambda e: e["type"] == "release" and e["button"] == 1 and near(e, t.shift, tol),
        timeout=10,
        what="the Shift-click's release",
    )
    presses = [e for e in log.events("press") if e["button"] == 1]
    assert len(presses) == 5, presses  # entry, double click (2), drag start, Shift-click
    entry, dbl1, dbl2, drag_start, shift_click = presses
    assert inside(entry, t.entry_box) and near(entry, t.entry, tol), (entry, t.entry)
    assert any(e["text"].endswith("Ada") for e in log.events("text"))
    assert [e for e in log.events("key") if e["keysym"] == "a" and e["state"] & 4], "no Ctrl+A"
    assert log.wait_type("submit")["text"] == "Bob"  # "AdaBob" had the chord been split
    assert near(dbl1, t.double, tol) and near(dbl2, t.double, tol)
    assert [e for e in log.events("double") if near(e, t.double, tol)]
    assert near(drag_start, t.drag_from, tol)
    drop = [e for e in log.events("release") if e["button"] == 1][3]
    assert inside(drop, t.panel_box) and near(drop, t.drag_to, tol), (drop, t.drag_to)
    wheel = [(e["button"]) for e in log.events("wheel") if near(e, t.scroll_at, tol)]
    # 300 px down, 200 px left in the image's pixels, scaled to the screen; 100 px a click
    scale = WIDTH / size[0]
    notches = [5] * round(round(300 * scale) / 100) + [6] * round(round(200 * scale) / 100)
    assert wheel == notches, wheel
    assert notches[:3] == [5, 5, 5] and 5 <= len(notches) <= 10
    middle = [e for e in log.events("press") if e["button"] == 2]
    assert len(middle) == 1 and near(middle[0], t.middle, tol)
    assert near(shift_click, t.shift, tol) and shift_click["state"] & 1, shift_click
    assert not (entry["state"] & 1)  # the modifier was held for that click only


# ------------------------------------------------------------------ the command line


def _env(server: OpenAIResponsesStandIn, probe: Probe) -> dict[str, str]:
    return {
        "OPENAI_API_KEY": KEY,
        "OPENAI_BASE_URL": server.base_url,
        "VNC_PASSWORD": probe.desktop.password,
    }


def _run(thread: str, probe: Probe, tmp_path: Path, server: OpenAIResponsesStandIn) -> Any:
    return run_cli(
        [
            *("run", "--provider", "openai", "--model", "gpt-5.4", "--vnc", probe.desktop.server),
            *("--task", "Type in the name field", "--thread-id", thread),
            *("--runs-dir", str(tmp_path)),
        ],
        env=_env(server, probe),
        timeout=120,
    )


def _checked_batch(t: Targets) -> list[Callable[[Callable[[Point], dict[str, int]]], Turn]]:
    return [
        lambda at: Turn.call(
            {"type": "click", "button": "left", **at(t.entry)},
            {"type": "type", "text": "Checked"},
            checks=[
                {
                    "code": "malicious_instructions",
                    "message": "We've detected instructions that may cause your application "
                    "to perform malicious or unauthorized actions.",
                }
            ],
        ),
        lambda at: Turn.message("Typed after approval."),
    ]


def test_a_safety_check_waits_for_approve_from_another_process(
    probe: Probe, tmp_path: Path
) -> None:
    t = Targets(probe)
    with OpenAIResponsesStandIn(scripted(_checked_batch(t)), expected_api_key=KEY) as server:
        first = _run("checked", probe, tmp_path, server)
        assert first.returncode == 3, first.stdout + first.stderr
        said = first.stdout + first.stderr
        assert "malicious_instructions" in said and "Approving runs this whole batch" in said
        assert "type(text='Checked')" in said  # the person sees every action of the batch
        assert len(server.requests) == 1
        assert not probe.log.events("press") and not probe.log.events("text")  # nothing ran
        approved = run_cli(
            ["approve", "checked", "--runs-dir", str(tmp_path)],
            env=_env(server, probe),
            timeout=120,
        )
        assert approved.returncode == 0, approved.stdout + approved.stderr
        assert "Typed after approval." in approved.stdout
        assert not server.violations and len(server.requests) == 2
        (output,) = server.requests[1].outputs()
        assert output["acknowledged_safety_checks"] == server.pending_checks(output["call_id"])
    presses = probe.log.events("press")
    assert len(presses) == 1 and inside(presses[0], t.entry_box)
    assert any(e["text"].endswith("Checked") for e in probe.log.events("text"))
    run_json = json.loads((tmp_path / "checked" / "run.json").read_text())
    assert run_json["provider"] == "openai" and run_json["model"] == "gpt-5.4"
    written = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert KEY.encode() not in written and probe.desktop.password.encode() not in written


def test_a_denied_safety_check_sends_nothing_more(probe: Probe, tmp_path: Path) -> None:
    t = Targets(probe)
    with OpenAIResponsesStandIn(scripted(_checked_batch(t))) as server:
        first = _run("denied", probe, tmp_path, server)
        assert first.returncode == 3, first.stdout + first.stderr
        denied = run_cli(
            ["deny", "denied", "--runs-dir", str(tmp_path)], env=_env(server, probe), timeout=60
        )
        assert denied.returncode == 4, denied.stdout + denied.stderr
        assert len(server.requests) == 1 and not server.violations
    assert not probe.log.events("press") and not probe.log.events("text")


def test_a_refusal_ends_the_run_blocked(probe: Probe, tmp_path: Path) -> None:
    with OpenAIResponsesStandIn([Turn.refuse("I can't help with that.")]) as server:
        proc = _run("refused", probe, tmp_path, server)
        assert not server.violations
    assert proc.returncode == 6, proc.stdout + proc.stderr
    assert "I can't help with that." in proc.stdout + proc.stderr


def test_kill_9_mid_run_then_resume_performs_nothing_twice(probe: Probe, tmp_path: Path) -> None:
    t = Targets(probe)
    reached, release = threading.Event(), threading.Event()
    steps = [
        lambda at: Turn.call({"type": "click", "button": "left", **at(t.double)}),
        None,  # the second request: the process is killed while it waits
        lambda at: Turn.call({"type": "click", "button": "left", **at(t.shift)}),
        lambda at: Turn.message("finished after the crash"),
    ]
    inner = scripted([s or (lambda at: Turn.message("too late")) for s in steps])

    def script(body: Any, index: int) -> Turn:
        if index == 1:
            reached.set()
            release.wait(30)
        return inner(body, index)

    with OpenAIResponsesStandIn(script) as server:
        proc = subprocess.Popen(
            [
                *CLI,
                *("run", "--provider", "openai", "--vnc", probe.desktop.server),
                *("--task", "Click twice", "--thread-id", "crashy", "--runs-dir", str(tmp_path)),
            ],
            env={**os.environ, **_env(server, probe)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert reached.wait(60), "the CLI never asked the model a second time"
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        finally:
            release.set()
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == -signal.SIGKILL
        resumed = run_cli(
            ["resume", "crashy", "--runs-dir", str(tmp_path)], env=_env(server, probe), timeout=120
        )
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert "finished after the crash" in resumed.stdout
        assert not server.violations
    tol = tolerance((WIDTH, HEIGHT))
    probe.log.wait_for(lambda e: e["type"] == "press" and near(e, t.shift, tol), timeout=10)
    presses = probe.log.events("press")
    assert len(presses) == 2, presses
    assert near(presses[0], t.double, tol) and near(presses[1], t.shift, tol)


def test_the_readme_command_runs_against_the_stand_in(probe: Probe, tmp_path: Path) -> None:
    """The `vnc-use run --provider openai` line of docs/providers.md's OpenAI section, pointed
    at the stand-in with OPENAI_BASE_URL (as the page says), runs to `done`."""
    (line,) = [
        line
        for block in blocks(section(page("providers.md"), "## OpenAI"), "sh")
        for line in block.splitlines()
        if line.startswith("vnc-use run")
    ]
    argv = shlex.split(line)
    with OpenAIResponsesStandIn([Turn.message("Dark mode is on.")]) as server:
        proc = run_cli(
            [*argv[1:], "--vnc", probe.desktop.server, "--runs-dir", str(tmp_path)],
            env=_env(server, probe),
            timeout=120,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert [r.body["model"] for r in server.requests] == ["gpt-5.5"]
        assert not server.violations
    assert "Dark mode is on." in proc.stdout
