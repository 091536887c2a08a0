"""The divergence measure: how much of the screen differs from the recorded one.

Both screenshots are turned to greyscale and shrunk to the same :data:`GRID` of cells by area
averaging (screens of different sizes are compared cell for cell, as proportions of the
screen). A cell counts as changed when its average grey level is more than
:data:`CELL_THRESHOLD` levels (of 255) outside the range of the other screen's cell *and its
eight neighbours*, either way round: content that moved by a cell or less (the same layout on
a screen of another size, text of a fixed pixel size) is not a change, a window that opened is.
The difference is the percentage of changed cells, masked cells left out.

Averaging makes small changes small: a blinking text cursor changes two or three cells (0.03 %
of the screen), a clock a handful (about 0.1 %); the default tolerance,
:data:`DEFAULT_TOLERANCE` percent, lets both through and stops on a window that opened, moved
or closed, or a page that is not the one recorded (a white 80x24 xterm on a light grey
1440x900 screen is 12 %).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass

from PIL import Image, ImageChops, ImageDraw, ImageFilter

from vnc_use.desktops.region import ScreenRegion
from vnc_use.errors import ConfigError

__all__ = [
    "CELL_THRESHOLD",
    "DEFAULT_TOLERANCE",
    "GRID",
    "Mask",
    "changed_box",
    "difference",
    "parse_tolerance",
]

GRID = (160, 100)
"""Cells across and down that both screens are averaged into."""
CELL_THRESHOLD = 8
"""Grey levels (of 255) a cell's average must be outside its neighbourhood's to count."""
DEFAULT_TOLERANCE = 1.0
"""Percent of the screen that may differ before a replay stops (a cursor, a clock pass)."""


@dataclass(frozen=True)
class Mask:
    """A region known to change (a clock, a counter), as fractions of the screen."""

    left: float
    top: float
    right: float
    bottom: float

    @classmethod
    def parse(cls, text: str, screen: tuple[int, int]) -> Mask:
        """``WxH+X+Y`` in pixels of the recorded screen (``screen``), as fractions."""
        region = ScreenRegion.parse(text)
        w, h = screen
        right, bottom = region.x + region.width, region.y + region.height
        return cls(region.x / w, region.y / h, right / w, bottom / h)

    def box(self, size: tuple[int, int]) -> tuple[int, int, int, int]:
        """The mask's cells on a grid of ``size`` (every cell it touches)."""
        w, h = size
        return (
            math.floor(self.left * w),
            math.floor(self.top * h),
            math.ceil(self.right * w),
            math.ceil(self.bottom * h),
        )


def parse_tolerance(value: float | str | None) -> float | None:
    """A tolerance in percent (``2``, ``"2.5"``, ``"2%"``), or None for ``off`` / None."""
    if value is None:
        return None
    text = str(value).strip().lower().rstrip("%").strip()
    if text == "off":
        return None
    try:
        number = float(text)
    except ValueError:
        number = -1.0
    if not 0 <= number <= 100:
        raise ConfigError(
            f"tolerance {value!r}: give the percent of the screen that may differ (0-100, "
            f"e.g. {DEFAULT_TOLERANCE:g}) or off"
        )
    return number


def _cells(png: bytes) -> Image.Image:
    with Image.open(io.BytesIO(png)) as img:
        cells: Image.Image = img.convert("L").resize(GRID, Image.Resampling.BOX)
    return cells


def _unexplained(a: Image.Image, b: Image.Image, neighbours: bool = True) -> Image.Image:
    """Cells of ``a`` outside the range of ``b``'s cell and its neighbours (255), else 0;
    without ``neighbours``, outside ``b``'s cell alone."""
    high = b.filter(ImageFilter.MaxFilter(3)) if neighbours else b
    low = b.filter(ImageFilter.MinFilter(3)) if neighbours else b
    over = ImageChops.subtract(a, high).point(lambda v: 255 if v > CELL_THRESHOLD else 0)
    under = ImageChops.subtract(low, a).point(lambda v: 255 if v > CELL_THRESHOLD else 0)
    return ImageChops.lighter(over, under)


def changed_box(before: bytes, after: bytes) -> tuple[int, tuple[int, int, int, int] | None]:
    """How many cells differ between two PNGs, cell for cell (as ``difference`` with
    ``neighbours=False``), and the box that holds them all: ``(left, top, right, bottom)`` in
    cells of :data:`GRID`, right and bottom exclusive (None when no cell differs)."""
    a, b = _cells(before), _cells(after)
    changed = ImageChops.lighter(_unexplained(a, b, False), _unexplained(b, a, False))
    return changed.histogram()[255], changed.getbbox()


def difference(
    recorded: bytes, current: bytes, masks: Sequence[Mask] = (), *, neighbours: bool = True
) -> float:
    """Percent of the screen's cells (masked ones left out) that differ between two PNGs.

    ``neighbours=False`` compares each cell with the same cell only: content that moved by
    a cell counts too (stall detection asks whether an action changed anything at all, a
    counter's digit included; a replay asks whether the screen is the recorded one)."""
    a, b = _cells(recorded), _cells(current)
    changed = ImageChops.lighter(_unexplained(a, b, neighbours), _unexplained(b, a, neighbours))
    counted = Image.new("L", GRID, 255)
    if masks:
        draw = ImageDraw.Draw(counted)
        for mask in masks:
            x0, y0, x1, y1 = mask.box(GRID)
            draw.rectangle((x0, y0, x1 - 1, y1 - 1), fill=0)
    changed = ImageChops.multiply(changed, counted)
    total = counted.histogram()[255]
    if total == 0:
        return 0.0
    return 100.0 * changed.histogram()[255] / total
