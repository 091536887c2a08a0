"""From clicks to a verdict (pure): per-target pixel errors, their mean and worst, and what
went wrong -- a scale (per axis, from the screen's top-left corner), a constant offset, no
clicks at all, or no simple pattern.

A run is **fine** when the mean error is within the targets' size (the mean of each target's
half smaller side): the model's clicks land inside what it aims at. Otherwise both a scale
through the origin (``click = s * target``, fitted per axis by least squares) and an offset
(``click = target + d``, the median shift: clicks a model could not place beyond the screen's
edge do not pull it) are fitted; the one with the smaller residual names the error when
that residual is itself within the targets' size.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from vnc_use.calibration.layout import Target

__all__ = ["Diagnosis", "Verdict", "diagnose", "pick_dialect"]

Verdict = Literal["fine", "scale", "offset", "not clicking", "scattered"]
Point = tuple[float, float]


@dataclass
class Diagnosis:
    """The verdict on one set of clicks (one per target; None: no click for it)."""

    verdict: Verdict
    errors: list[float | None]
    mean: float | None
    worst: float | None
    tolerance: float
    clicked: int
    scale: tuple[float, float] | None = None
    offset: tuple[float, float] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def fine(self) -> bool:
        """The clicks land within the targets' size on average (``calibrate`` exits 0)."""
        return self.verdict == "fine"


def _distance(a: Point, b: Point) -> float:
    return math.hypot(a[0] - b[0], a[1] - b[1])


def _scale_fit(pairs: Sequence[tuple[Point, Point]]) -> tuple[tuple[float, float], float]:
    factors = []
    for axis in (0, 1):
        den = sum(t[axis] ** 2 for t, _ in pairs)
        factors.append(sum(t[axis] * c[axis] for t, c in pairs) / den if den else 1.0)
    sx, sy = factors
    rms = math.sqrt(
        sum((c[0] - sx * t[0]) ** 2 + (c[1] - sy * t[1]) ** 2 for t, c in pairs) / len(pairs)
    )
    return (sx, sy), rms


def _offset_fit(pairs: Sequence[tuple[Point, Point]]) -> tuple[tuple[float, float], float]:
    n = len(pairs)
    dx = statistics.median(c[0] - t[0] for t, c in pairs)
    dy = statistics.median(c[1] - t[1] for t, c in pairs)
    rms = math.sqrt(sum((c[0] - t[0] - dx) ** 2 + (c[1] - t[1] - dy) ** 2 for t, c in pairs) / n)
    return (dx, dy), rms


def diagnose(targets: Sequence[Target], clicks: Sequence[Point | None]) -> Diagnosis:
    """The verdict for ``clicks[i]`` aimed at ``targets[i]``."""
    tolerance = sum(t.radius for t in targets) / len(targets)
    pairs = [(t.center, c) for t, c in zip(targets, clicks, strict=True) if c is not None]
    errors = [
        None if c is None else _distance(t.center, c) for t, c in zip(targets, clicks, strict=True)
    ]
    measured = [e for e in errors if e is not None]
    mean = sum(measured) / len(measured) if measured else None
    worst = max(measured) if measured else None
    diag = Diagnosis("not clicking", errors, mean, worst, tolerance, len(pairs))
    if len(pairs) * 2 < len(targets):
        return diag
    missed = len(targets) - len(pairs)
    if missed:
        diag.notes.append(f"no usable click for {missed} of {len(targets)} targets")
    if mean is not None and mean <= tolerance:
        diag.verdict = "fine"
        return diag
    scale, scale_rms = _scale_fit(pairs)
    offset, offset_rms = _offset_fit(pairs)
    if scale_rms <= offset_rms and scale_rms <= tolerance:
        diag.verdict, diag.scale = "scale", scale
    elif offset_rms <= tolerance:
        diag.verdict, diag.offset = "offset", offset
    else:
        diag.verdict = "scattered"
    return diag


def pick_dialect(candidates: dict[str, Diagnosis]) -> str | None:
    """The dialect whose reading of the model's answers is fine (every target clicked, the
    smallest mean error), or None."""
    fine = [
        (len(d.errors) - d.clicked, d.mean or 0.0, name) for name, d in candidates.items() if d.fine
    ]
    return min(fine)[2] if fine else None
