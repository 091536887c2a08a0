"""The screenshot the model is asked about: taken once the calibration window shows."""

from __future__ import annotations

import io
import time
from collections.abc import Sequence

from PIL import Image

from vnc_use.calibration.layout import Target
from vnc_use.calibration.window import COLORS
from vnc_use.desktops.base import CaptureRule, Desktop
from vnc_use.errors import VncUseError

__all__ = ["wait_for_window"]

SHOW_TIMEOUT_S = 10.0


def _hex(color: str) -> tuple[int, int, int]:
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


def _shows(png: bytes, targets: Sequence[Target]) -> bool:
    """Whether every target's fill colour is on the screen, one pixel in from its corner."""
    with Image.open(io.BytesIO(png)) as image:
        rgb = image.convert("RGB")
        for i, target in enumerate(targets):
            pixel = rgb.getpixel((target.left + 2, target.top + 2))
            if pixel != _hex(COLORS[i % len(COLORS)]):
                return False
    return True


def wait_for_window(desktop: Desktop, targets: Sequence[Target]) -> bytes:
    """A full-size PNG of the screen once every target shows (VncUseError after 10 s)."""
    rule = CaptureRule(max_bytes=None)
    deadline = time.monotonic() + SHOW_TIMEOUT_S
    while True:
        shot = desktop.capture(rule)
        if shot.size == desktop.screen_size() and _shows(shot.png, targets):
            return shot.png
        if time.monotonic() > deadline:
            raise VncUseError(
                "the calibration window did not show on the VNC desktop within "
                f"{SHOW_TIMEOUT_S:g} s; is DISPLAY the display that VNC server shows?"
            )
