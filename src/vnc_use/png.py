"""Fast lossless PNG encoding of screenshots.

Screenshots go to the model as PNG (the API accepts no other format) once per action, so their
encoding sits on the hot path of every step: ``benchmarks/hands.py`` measures it.
"""

from __future__ import annotations

import struct
import zlib

from PIL import Image

__all__ = ["encode_png"]


def _png_chunk(tag: bytes, payload: bytes) -> bytes:
    crc = zlib.crc32(tag + payload)
    return struct.pack(">I", len(payload)) + tag + payload + struct.pack(">I", crc)


def encode_png(image: Image.Image) -> bytes:
    """Encode an image as a lossless 8-bit RGB PNG, fast.

    Rows use PNG filter 0 (none) and zlib level 1. Measured on a 1440x900 desktop-like
    frame: 13 ms and 332 KB, against 33 ms / 342 KB for Pillow ``compress_level=1`` (whose
    per-row adaptive filtering costs most of its time) and 45 ms / 502 KB for Pillow's
    default. Any PNG decoder reads it.
    """
    rgb = image if image.mode == "RGB" else image.convert("RGB")
    width, height = rgb.size
    raw = memoryview(rgb.tobytes())
    stride = 3 * width
    rows = b"\0".join([b"", *(raw[i * stride : (i + 1) * stride] for i in range(height))])
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"".join(
        (
            b"\x89PNG\r\n\x1a\n",
            _png_chunk(b"IHDR", header),
            _png_chunk(b"IDAT", zlib.compress(rows, 1)),
            _png_chunk(b"IEND", b""),
        )
    )
