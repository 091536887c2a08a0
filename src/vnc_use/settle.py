"""Wait for the screen to stop changing before showing it to the model.

Instead of a fixed sleep after every action, frames are captured until two consecutive ones
are identical (the screen has settled), with a minimum and a maximum wait. A screen that
never settles (a clock, a video) is captured when the maximum wait runs out, and the caller
is told so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from PIL import Image

from vnc_use.png import encode_png


class FrameSource(Protocol):
    """Anything that returns the current frame as a Pillow image."""

    def screenshot(self) -> Image.Image: ...


@dataclass(frozen=True)
class Settled:
    """A captured PNG and how it was obtained."""

    png: bytes
    size: tuple[int, int]
    settled: bool
    frames: int
    waited_ms: float


def capture_settled(
    source: FrameSource, *, min_wait: float = 0.0, max_wait: float = 1.0, interval: float = 0.02
) -> Settled:
    """Capture frames until two in a row are identical (after ``min_wait``), or ``max_wait``."""
    start = time.monotonic()
    frame = source.screenshot()
    frames = 1
    settled = False
    while True:
        elapsed = time.monotonic() - start
        if elapsed >= max_wait:
            break
        pause = max(interval, min_wait - elapsed) if elapsed < min_wait else interval
        time.sleep(min(pause, max(0.0, max_wait - elapsed)))
        nxt = source.screenshot()
        frames += 1
        same = nxt.size == frame.size and nxt.tobytes() == frame.tobytes()
        frame = nxt
        if same and time.monotonic() - start >= min_wait:
            settled = True
            break
    waited = (time.monotonic() - start) * 1000
    return Settled(encode_png(frame), frame.size, settled, frames, round(waited, 1))
