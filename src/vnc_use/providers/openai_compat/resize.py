"""The Qwen2-VL family's image resize rule (Qwen2.5-VL, UI-TARS 1.5), on the client.

Pixel dialects answer in pixels of the image *as the model's processor resized it*. vnc-use
resizes the screenshot itself with the same rule before sending it, so the model sees exactly
the image it was sent, and maps the model's pixels back through the size it sent.

:func:`smart_resize` follows ``smart_resize`` of Qwen's ``qwen-vl-utils``
(``QwenLM/Qwen2-VL``, ``qwen-vl-utils/src/qwen_vl_utils/vision_process.py`` @ 487a12d6:
``IMAGE_FACTOR = 28``, ``MIN_PIXELS = 4 * 28 * 28``, ``MAX_PIXELS = 16384 * 28 * 28``,
``MAX_RATIO = 200``; its ``fetch_image`` then calls PIL's ``image.resize((w, h))``, bicubic).
UI-TARS 1.5 uses the same rule with ``min_pixels = 100 * 28 * 28`` (``bytedance/UI-TARS``
``README_coordinates.md``; PyPI ``ui-tars`` ``MIN_PIXELS``).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

from PIL import Image

from vnc_use.desktops.png import encode_png

__all__ = [
    "MAX_RATIO",
    "QWEN25_VL",
    "UI_TARS",
    "PixelLimits",
    "png_size",
    "resize_png",
    "smart_resize",
]

MAX_RATIO = 200
"""The longest side may be at most this many times the shortest (Qwen's ``MAX_RATIO``)."""


@dataclass(frozen=True)
class PixelLimits:
    """A family's resize rule: sides a multiple of ``factor``, area within the limits."""

    factor: int = 28
    min_pixels: int = 4 * 28 * 28
    max_pixels: int = 16384 * 28 * 28


QWEN25_VL = PixelLimits(factor=28, min_pixels=4 * 28 * 28, max_pixels=16384 * 28 * 28)
"""Qwen2.5-VL's processor defaults (qwen-vl-utils ``MIN_PIXELS`` / ``MAX_PIXELS``)."""

UI_TARS = PixelLimits(factor=28, min_pixels=100 * 28 * 28, max_pixels=16384 * 28 * 28)
"""UI-TARS 1.5's limits (``README_coordinates.md``: ``min_pixels=100*28*28``)."""


def smart_resize(height: int, width: int, limits: PixelLimits = QWEN25_VL) -> tuple[int, int]:
    """The ``(height, width)`` the processor turns a ``height`` x ``width`` image into.

    Height first, as in Qwen's code. Raises ``ValueError`` for an empty image or an aspect
    ratio above :data:`MAX_RATIO`. Python's ``round`` (half to even) is the processor's too.
    """
    if height <= 0 or width <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    if max(height, width) / min(height, width) > MAX_RATIO:
        raise ValueError(f"absolute aspect ratio must be smaller than {MAX_RATIO}")
    factor = limits.factor
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > limits.max_pixels:
        beta = math.sqrt((height * width) / limits.max_pixels)
        h_bar = math.floor(height / beta / factor) * factor
        w_bar = math.floor(width / beta / factor) * factor
    elif h_bar * w_bar < limits.min_pixels:
        beta = math.sqrt(limits.min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def png_size(png: bytes) -> tuple[int, int]:
    """``(width, height)`` of a PNG, read from its header."""
    with Image.open(io.BytesIO(png)) as image:
        width, height = image.size
    return int(width), int(height)


def resize_png(png: bytes, limits: PixelLimits) -> tuple[bytes, tuple[int, int]]:
    """The screenshot as the model will see it: resized by the family's rule (bicubic, as
    PIL's default in Qwen's ``fetch_image``), and the ``(width, height)`` sent. A screenshot
    already of that size is returned unchanged. Encoded with the screenshots' own fast PNG
    encoder (lossless; on a busy 1440x900 desktop about 16 ms and 510 KB, against 88 ms and
    720 KB for Pillow's default level)."""
    with Image.open(io.BytesIO(png)) as image:
        width, height = image.size
        new_h, new_w = smart_resize(height, width, limits)
        if (new_w, new_h) == (width, height):
            return png, (width, height)
        resized = image.convert("RGB").resize((new_w, new_h), Image.Resampling.BICUBIC)
    return encode_png(resized), (new_w, new_h)
