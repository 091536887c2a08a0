"""Where the calibration targets go: a dozen labelled boxes of different sizes, at the four
corners, the middle of each edge, the centre and three places in between (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["MARGIN", "SPOTS", "Target", "layout"]

MARGIN = 3
"""Pixels between a target and the screen's edge."""

SPOTS: tuple[tuple[str, float, float, int, int], ...] = (
    ("K7", 0.0, 0.0, 44, 30),
    ("M3", 0.5, 0.0, 90, 40),
    ("Q9", 1.0, 0.0, 36, 36),
    ("T4", 0.0, 0.5, 60, 60),
    ("W2", 0.5, 0.5, 120, 64),
    ("F8", 1.0, 0.5, 40, 90),
    ("H5", 0.0, 1.0, 100, 34),
    ("P6", 0.5, 1.0, 48, 32),
    ("R1", 1.0, 1.0, 70, 50),
    ("V3", 0.27, 0.22, 34, 28),
    ("X8", 0.74, 0.71, 80, 44),
    ("Z5", 0.31, 0.79, 52, 52),
)
"""Label, where its centre aims (fractions of the screen), width and height in pixels."""


@dataclass(frozen=True)
class Target:
    """One target: its label and its pixel box (``right``/``bottom`` exclusive)."""

    label: str
    left: int
    top: int
    width: int
    height: int

    @property
    def center(self) -> tuple[float, float]:
        """The centre of the box in pixels (the middle of its pixels)."""
        return self.left + (self.width - 1) / 2, self.top + (self.height - 1) / 2

    @property
    def box(self) -> tuple[int, int, int, int]:
        """``(left, top, right, bottom)``, right and bottom exclusive."""
        return self.left, self.top, self.left + self.width, self.top + self.height

    @property
    def radius(self) -> float:
        """Half the smaller side: a click this close to the centre is inside the target."""
        return min(self.width, self.height) / 2

    def to_json(self) -> dict[str, Any]:
        """The target in ``calibration.json``."""
        return {
            "label": self.label,
            "box": list(self.box),
            "center": list(self.center),
            "size": [self.width, self.height],
        }


def _place(fraction: float, extent: int, size: int) -> int:
    start = round(fraction * extent - size / 2)
    return max(MARGIN, min(extent - size - MARGIN, start))


def layout(width: int, height: int) -> list[Target]:
    """The targets on a ``width`` x ``height`` screen (ValueError when it is too small)."""
    if width < 400 or height < 300:
        raise ValueError(f"a {width}x{height} screen is too small to calibrate (400x300 at least)")
    return [
        Target(label, _place(fx, width, w), _place(fy, height, h), w, h)
        for label, fx, fy, w, h in SPOTS
    ]
