"""The calibration's pure parts: where the targets go, and the diagnosis of clicks."""

from __future__ import annotations

import random

import pytest

from vnc_use.calibration.analysis import Diagnosis, diagnose, pick_dialect
from vnc_use.calibration.layout import layout
from vnc_use.calibration.report import verdict_line

W, H = 1366, 850


def test_a_dozen_targets_of_different_sizes_reach_corners_and_edges() -> None:
    targets = layout(W, H)
    assert len(targets) == 12 and len({t.label for t in targets}) == 12
    assert len({(t.width, t.height) for t in targets}) == 12
    for t in targets:
        left, top, right, bottom = t.box
        assert left >= 0 and right <= W and top >= 0 and bottom <= H
    lefts = sorted(t.left for t in targets)
    rights = sorted(t.box[2] for t in targets)
    assert lefts[0] <= 3 and rights[-1] >= W - 3  # both side edges
    assert min(t.top for t in targets) <= 3 and max(t.box[3] for t in targets) >= H - 3
    with pytest.raises(ValueError):
        layout(300, 200)


def test_clicks_on_the_targets_are_fine() -> None:
    targets = layout(W, H)
    rng = random.Random(7)
    clicks = [(t.center[0] + rng.uniform(-2, 2), t.center[1] + rng.uniform(-2, 2)) for t in targets]
    diag = diagnose(targets, clicks)
    assert diag.fine and diag.mean is not None and diag.mean <= 3
    assert "fine" in verdict_line(diag, "qwen3-vl", None)


@pytest.mark.parametrize("scale", [(1.372, 0.84), (0.71, 0.71), (0.729, 1.19)])
def test_a_scale_is_measured_per_axis(scale: tuple[float, float]) -> None:
    targets = layout(W, H)
    clicks = [
        (t.center[0] * scale[0], t.center[1] * scale[1])
        if t.center[0] * scale[0] < W and t.center[1] * scale[1] < H
        else None
        for t in targets
    ]
    diag = diagnose(targets, clicks)
    assert diag.verdict == "scale" and diag.scale is not None
    assert diag.scale == pytest.approx(scale, rel=0.01)
    line = verdict_line(diag, "qwen3-vl", "qwen2.5-vl")
    assert "pixels of a resized image read as 0-1000: try `--dialect qwen2.5-vl`" in line


def test_an_offset_is_measured() -> None:
    targets = layout(W, H)
    clicks = [(t.center[0] - 30, t.center[1] + 18) for t in targets]
    diag = diagnose(targets, clicks)
    assert diag.verdict == "offset" and diag.offset == pytest.approx((-30, 18))
    assert "-30 px across and +18 px down" in verdict_line(diag, None, None)


def test_no_clicks_and_random_clicks() -> None:
    targets = layout(W, H)
    assert diagnose(targets, [None] * 12).verdict == "not clicking"
    assert diagnose(targets, [None] * 7 + [t.center for t in targets[7:]]).verdict == (
        "not clicking"
    )
    rng = random.Random(1)
    scattered = diagnose(targets, [(rng.uniform(0, W), rng.uniform(0, H)) for _ in targets])
    assert scattered.verdict == "scattered"


def test_the_dialect_that_fits_clicks_every_target() -> None:
    targets = layout(W, H)
    full = diagnose(targets, [t.center for t in targets])
    partial = diagnose(targets, [None] + [t.center for t in targets[1:]])
    off = diagnose(targets, [(t.center[0] + 80, t.center[1]) for t in targets])
    assert isinstance(full, Diagnosis)
    assert pick_dialect({"a": partial, "b": full, "c": off}) == "b"
    assert pick_dialect({"c": off}) is None
