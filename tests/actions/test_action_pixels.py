"""The one grid-to-pixel mapping: every action with points lands on the same pixels everywhere.

For every action of both tables that has a place on the screen, in every spelling of its
arguments (Gemini 3.5's ``drag_and_drop`` and ``scroll`` have two), on a screen whose size is
not round, the approval prompt, the progress line, the report's markers (for an executed, a
pending and a denied call) and the input the executor really sends agree, and match the
mapping written out here by hand: ``round(grid / 1000 * size)``.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from vnc_use.actions import (
    TABLES,
    ActionSpec,
    ActionTable,
    Points,
    Spelling,
    ValidatedAction,
    call_pixels,
    pixel_targets,
)
from vnc_use.actions.execute import ActionContext, execute
from vnc_use.agent.nodes import _pixels_of
from vnc_use.cli.progress import LineFormatter, plain
from vnc_use.record.folder import RunFolder
from vnc_use.record.report.markers import marker_for
from vnc_use.record.report.model import StepView, load_run
from vnc_use.testing.fake import FakeDesktop

WIDTH, HEIGHT = 1021, 767  # not round: a rounding slip shows

# Values for every argument an action with points has (grid values chosen off round pixels).
SAMPLE: dict[str, Any] = {
    "x": 333,
    "y": 667,
    "destination_x": 999,
    "destination_y": 1,
    "start_x": 123,
    "start_y": 877,
    "end_x": 0,
    "end_y": 999,
    "direction": "left",
    "magnitude": 457,
    "magnitude_in_pixels": 120,
    "text": "hello",
    "press_enter": False,
    "clear_before_typing": True,
    "intent": "why",
}

WITH_POINTS = [
    pytest.param(table, spec, spelling, id=f"{table.family}:{spec.name}:{n}")
    for table in TABLES
    for spec in table.specs.values()
    for n, spelling in enumerate(spec.spellings)
    if spelling.points != Points()
]


def by_hand(gx: int, gy: int) -> tuple[int, int]:
    """The mapping as the docs state it, written out independently of the code under test."""
    return min(round(gx * WIDTH / 1000), WIDTH - 1), min(round(gy * HEIGHT / 1000), HEIGHT - 1)


def sent_points(events: list[dict[str, Any]]) -> dict[str, int]:
    """The pixels the desktop received: the pointer event's point (and a drag's end)."""
    (pointer,) = [e for e in events if "x" in e]
    keys = ("x", "y", "destination_x", "destination_y")
    return {k: pointer[k] for k in keys if k in pointer}


def args_for(spelling: Spelling) -> dict[str, Any]:
    return {name: SAMPLE[name] for name in spelling.args_model.model_fields}


def expected_points(points: Points, args: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    if points.at:
        out["x"], out["y"] = by_hand(*(args[a] for a in points.at))
    if points.to:
        out["destination_x"], out["destination_y"] = by_hand(*(args[a] for a in points.to))
    return out


def marker_points(step: StepView) -> dict[str, int]:
    marker = marker_for(step)
    assert marker is not None and marker.point is not None
    out = {"x": marker.point[0], "y": marker.point[1]}
    if marker.drag_to is not None:
        out["destination_x"], out["destination_y"] = marker.drag_to
    return out


def report_steps(
    tmp_path: Path, name: str, args: dict[str, Any], pixels: dict[str, int]
) -> list[Any]:
    """A run folder with the call executed, then asked again and denied, then pending."""
    folder = RunFolder(tmp_path, "pixels")
    buf = io.BytesIO()
    Image.new("RGB", (WIDTH, HEIGHT)).save(buf, format="PNG")
    shot = folder.put_screenshot(buf.getvalue())
    call = {"name": name, "args": args}
    folder.write_json("run.json", {"thread_id": "pixels", "task": "t"})
    folder.event("run_started", thread_id="pixels", task="t", vnc_server="h::1")
    folder.event("observe", screenshot=shot, width=WIDTH, height=HEIGHT)
    folder.event("model_response", n=1, text="", calls=[call, call])
    folder.event(
        "action",
        step=1,
        name=name,
        args=args,
        pixels=pixels,
        screen_size=[WIDTH, HEIGHT],
        screenshot=shot,
    )
    pending = {"step": 2, "name": name, "args": args, "screenshot": shot}  # no pixels: computed
    folder.event("run_paused", status="awaiting_approval", pending_call=pending)
    folder.event("denied", step=2, name=name, by="person", explanation="no")
    folder.event("model_response", n=2, text="", calls=[call])
    folder.event("run_paused", status="awaiting_approval", pending_call={**pending, "step": 3})
    folder.event("run_ended", status="awaiting_approval", steps=1, pending_call=pending)
    return load_run(folder.path).items


@pytest.mark.parametrize(("table", "spec", "spelling"), WITH_POINTS)
def test_approval_report_progress_and_executor_agree(
    table: ActionTable, spec: ActionSpec[Any], spelling: Spelling, tmp_path: Path
) -> None:
    args = args_for(spelling)
    action = table.validate(spec.name, args)
    assert isinstance(action, ValidatedAction), action
    assert spec.spelling_of(action.args) == spelling
    expected = expected_points(spelling.points, args)
    assert expected  # every action here has a place on the screen

    desktop = FakeDesktop(WIDTH, HEIGHT)
    reported = execute(action, ActionContext(hands=desktop, width=WIDTH, height=HEIGHT))
    assert sent_points(desktop.events) == expected
    assert {k: v for k, v in reported.items() if k != "magnitude"} == expected

    approval = _pixels_of(
        {"name": spec.name, "args": args, "safety_decision": None}, (WIDTH, HEIGHT)
    )
    assert approval == expected

    event = {"event": "action", "step": 1, "name": spec.name, "args": args, "pixels": reported}
    line = plain(LineFormatter()(event) or [])
    ends = [(expected["x"], expected["y"])]
    if "destination_x" in expected:
        ends.append((expected["destination_x"], expected["destination_y"]))
    assert "-> px " + " to ".join(f"({x}, {y})" for x, y in ends) in line

    distance = spelling.points.distance
    if distance is not None:  # a scroll: its distance in pixels, reported as sent
        (scroll,) = [e for e in desktop.events if e["kind"] in ("scroll", "scroll_at")]
        value = args[distance.arg]
        assert reported["magnitude"] == scroll["magnitude"]
        assert scroll["magnitude"] == (by_hand(value, 0)[0] if distance.on_grid else value)

    kinds: dict[str, dict[str, int]] = {}
    for step in report_steps(tmp_path, spec.name, args, reported):
        if isinstance(step, StepView):
            kinds[step.kind] = marker_points(step)
    assert kinds == {"action": expected, "denied": expected, "pending": expected}


ALL_POINTS = [
    spelling.points
    for table in TABLES
    for spec in table.specs.values()
    for spelling in spec.spellings
]
grid = st.integers(min_value=0, max_value=999)
side = st.integers(min_value=1, max_value=20_000)


@given(
    points=st.sampled_from(ALL_POINTS),
    values=st.lists(grid, min_size=5, max_size=5),
    direction=st.sampled_from(["up", "down", "left", "right"]),
    width=side,
    height=side,
)
def test_every_target_lands_on_the_screen(
    points: Points, values: list[int], direction: str, width: int, height: int
) -> None:
    names = [*(points.at or ()), *(points.to or ())]
    args: dict[str, Any] = dict(zip(names, values, strict=False))
    if points.distance is not None:
        args[points.distance.arg] = values[4]
        args[points.distance.direction] = direction
    targets = pixel_targets(points, args, width, height)
    for pixel in (targets.point, targets.end):
        if pixel is not None:
            assert 0 <= pixel[0] < width and 0 <= pixel[1] < height
    if points.distance is not None and points.distance.on_grid:
        assert targets.distance is not None
        assert 0 <= targets.distance < (height if direction in ("up", "down") else width)
    recorded = call_pixels(args, (width, height), TABLES)
    assert recorded == targets.points()
    assert all(0 <= recorded[k] < width for k in ("x", "destination_x") if k in recorded)
    assert all(0 <= recorded[k] < height for k in ("y", "destination_y") if k in recorded)
