"""Fast lossless PNG encoding of screenshots, and the downscale rule.

Screenshots go to the model as PNG (the API accepts no other format) once per action, so their
encoding sits on the hot path of every step (``benchmarks/step_overhead.py`` measures it
against Pillow's levels and, when installed, other encoders).

How it is fast, with the standard library only:

* rows use PNG filter 0 (none) and zlib level 1: on desktop frames (flat areas, text) this
  is as small as Pillow's adaptive filtering, whose per-row filter search costs most of its
  time;
* frames are cut into bands of 32 rows, each a raw deflate stream ended with a sync flush,
  joined into one zlib stream with the combined Adler-32 (the way ``pigz`` works; any PNG
  decoder reads the result). Bands run on several threads when there is much to compress
  (``zlib`` releases the GIL), and a :class:`PngEncoder` does not compress again the bands
  that did not change since its previous frame: after a click, usually most of them.

Every PNG carries a ``tEXt`` chunk ``Screen-Size`` = ``WIDTHxHEIGHT``: the size of the real
screen it shows, which differs from the image size when the frame was downscaled
(:func:`screen_size_of` reads it back).
"""

from __future__ import annotations

import io
import os
import struct
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from PIL import Image

__all__ = [
    "DEFAULT_MAX_PNG_BYTES",
    "SCREEN_SIZE_KEY",
    "Encoded",
    "PngEncoder",
    "encode_png",
    "encode_screenshot",
    "screen_size_of",
]

#: ``tEXt`` keyword of the chunk that holds the real screen size.
SCREEN_SIZE_KEY = "Screen-Size"
#: Screenshots bigger than this are downscaled before they go to the model (very large inline
#: images make the API answer 503). A busy 1440x900 desktop encodes to about 0.35 MB, a busy
#: 4K one to about 3 MB.
DEFAULT_MAX_PNG_BYTES = 4_000_000

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_BAND_ROWS = 32  # rows per independently compressed band (costs about 2% in size)
_PARALLEL_MIN_BYTES = 1 << 20  # below this much to compress, one thread is as fast
_ADLER_BASE = 65521
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _png_chunk(tag: bytes, payload: bytes) -> bytes:
    crc = zlib.crc32(tag + payload)
    return struct.pack(">I", len(payload)) + tag + payload + struct.pack(">I", crc)


def _workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_workers(), thread_name_prefix="vnc-use-png")
        return _pool


def _adler32_combine(adler1: int, adler2: int, len2: int) -> int:
    """Adler-32 of ``a + b`` from the checksums of ``a`` and ``b`` (zlib's adler32_combine)."""
    rem = len2 % _ADLER_BASE
    sum1 = adler1 & 0xFFFF
    sum2 = (rem * sum1) % _ADLER_BASE
    sum1 += (adler2 & 0xFFFF) + _ADLER_BASE - 1
    sum2 += (adler1 >> 16) + (adler2 >> 16) + _ADLER_BASE - rem
    sum1 %= _ADLER_BASE
    sum2 %= _ADLER_BASE
    return sum1 | (sum2 << 16)


_Band = tuple[bytes, int, int]
"""A compressed band: raw-deflate bytes, Adler-32 and length of the filtered rows."""


def _compress_bands(
    raw: bytes, stride: int, height: int, band_rows: int, indexes: list[int]
) -> list[_Band]:
    """Compress bands ``indexes`` (rows ``i * band_rows`` ...), each on its own (caller thread)."""
    view = memoryview(raw)
    last_band = (height - 1) // band_rows
    out = []
    for i in indexes:
        first, last = i * band_rows, min(height, (i + 1) * band_rows)
        data = b"\0".join([b"", *(view[r * stride : (r + 1) * stride] for r in range(first, last))])
        comp = zlib.compressobj(1, zlib.DEFLATED, -15)
        flush = zlib.Z_FINISH if i == last_band else zlib.Z_SYNC_FLUSH
        out.append((comp.compress(data) + comp.flush(flush), zlib.adler32(data), len(data)))
    return out


class PngEncoder:
    """A lossless PNG encoder for successive frames of one screen.

    Rows use filter 0 (none) and zlib level 1, in bands of 32 rows compressed independently
    (each ended with a sync flush) and joined into one zlib stream with the combined Adler-32,
    the way ``pigz`` works; any PNG decoder reads it. Bands that are byte-identical to the
    previous frame's are not compressed again (a click usually changes a few bands), and the
    others are compressed on up to 4 threads when there is enough to do (``zlib`` releases
    the GIL). Thread-safe; the output does not depend on what was encoded before.
    """

    def __init__(self, *, threads: int | None = None, band_rows: int = _BAND_ROWS) -> None:
        if band_rows < 1:
            raise ValueError(f"band_rows must be positive, got {band_rows}")
        self.threads = threads or _workers()
        self.band_rows = band_rows
        self.reused = 0
        """Bands taken from the previous frame by the last :meth:`encode`."""
        self._lock = threading.Lock()
        self._size: tuple[int, int] | None = None
        self._raw = b""
        self._bands: list[_Band] = []

    def encode(self, image: Image.Image, *, screen_size: tuple[int, int] | None = None) -> bytes:
        """PNG bytes of ``image`` (RGB); ``screen_size`` goes into the ``Screen-Size`` chunk."""
        rgb = image if image.mode == "RGB" else image.convert("RGB")
        width, height = rgb.size
        raw = rgb.tobytes()
        stride, rows = 3 * width, self.band_rows
        count = -(-height // rows)
        with self._lock:
            same = self._size == (width, height)
            prev = self._raw
            todo = [
                i
                for i in range(count)
                if not (
                    same
                    and raw[i * rows * stride : (i + 1) * rows * stride]
                    == prev[i * rows * stride : (i + 1) * rows * stride]
                )
            ]
            fresh = self._compress(raw, stride, height, todo)
            bands = list(self._bands) if same else [(b"", 0, 0)] * count
            for i, band in zip(todo, fresh, strict=True):
                bands[i] = band
            self.reused = count - len(todo)
            self._size, self._raw, self._bands = (width, height), raw, bands
        adler = 1
        for _, band_adler, size in bands:
            adler = _adler32_combine(adler, band_adler, size)
        # zlib header for deflate with a 32 KB window at the fastest level: 0x78 0x01
        idat = b"".join([b"\x78\x01", *(b[0] for b in bands), struct.pack(">I", adler)])
        sw, sh = screen_size or (width, height)
        return b"".join(
            (
                _SIGNATURE,
                _png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)),
                _png_chunk(b"tEXt", f"{SCREEN_SIZE_KEY}\0{sw}x{sh}".encode("ascii")),
                _png_chunk(b"IDAT", idat),
                _png_chunk(b"IEND", b""),
            )
        )

    def _compress(self, raw: bytes, stride: int, height: int, todo: list[int]) -> list[_Band]:
        rows = self.band_rows
        groups = min(self.threads, len(todo), len(todo) * rows * stride // _PARALLEL_MIN_BYTES)
        if groups <= 1:
            return _compress_bands(raw, stride, height, rows, todo)
        cuts = [len(todo) * g // groups for g in range(groups + 1)]
        pool = _executor()
        futures = [
            pool.submit(_compress_bands, raw, stride, height, rows, todo[cuts[g] : cuts[g + 1]])
            for g in range(groups)
        ]
        return [band for f in futures for band in f.result()]


_shared = PngEncoder()


def encode_png(
    image: Image.Image, *, screen_size: tuple[int, int] | None = None, threads: int | None = None
) -> bytes:
    """Encode an image as a lossless 8-bit RGB PNG, fast (see :class:`PngEncoder`).

    ``screen_size`` (the real screen's size, default the image's) is stored in a
    ``Screen-Size`` text chunk; ``threads`` caps the compression threads (1: the caller's
    only). Measured on a busy 1440x900 desktop frame (2 cores): about 12 ms and 340 KB,
    against 30 ms / 347 KB for Pillow ``compress_level=1`` and 48 ms / 507 KB for Pillow's
    default. Stateless: use a :class:`PngEncoder` to skip unchanged bands.
    """
    return PngEncoder(threads=threads).encode(image, screen_size=screen_size)


def screen_size_of(png: bytes) -> tuple[int, int]:
    """The real screen size a PNG shows: its ``Screen-Size`` chunk, else its image size."""
    with Image.open(io.BytesIO(png)) as img:
        text = str(img.info.get(SCREEN_SIZE_KEY, ""))
        width, height = img.size
    w, sep, h = text.partition("x")
    if sep and w.isdigit() and h.isdigit():
        return int(w), int(h)
    return width, height


@dataclass(frozen=True)
class Encoded:
    """A screenshot as it goes to the model."""

    png: bytes
    size: tuple[int, int]
    """Size of the PNG image (smaller than ``screen_size`` when downscaled)."""
    screen_size: tuple[int, int]
    """Size of the real screen: what grid coordinates are scaled to."""

    @property
    def downscaled(self) -> bool:
        """Whether the image is smaller than the screen."""
        return self.size != self.screen_size


def _fit(size: tuple[int, int], box: tuple[int, int]) -> tuple[int, int]:
    width, height = size
    scale = min(1.0, box[0] / width, box[1] / height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def encode_screenshot(
    image: Image.Image,
    *,
    max_size: tuple[int, int] | None = None,
    max_bytes: int | None = DEFAULT_MAX_PNG_BYTES,
    encoder: PngEncoder | None = None,
) -> Encoded:
    """Encode a frame for the model, downscaled only when configured or too big.

    The rule: the frame is encoded at full size unless ``max_size`` is set and the frame does
    not fit in it (then it is scaled to fit, keeping the aspect ratio), or the PNG is larger
    than ``max_bytes`` (then it is scaled by the square root of the excess, with a margin,
    until it fits; at most 4 tries, never below 320 px wide). The model's 0-999 grid is
    relative to the image it saw, so coordinates map to the real screen as
    ``grid / 1000 * screen_size`` whatever the image size; :attr:`Encoded.screen_size` and the
    PNG's ``Screen-Size`` chunk keep the real size. ``encoder`` defaults to one shared by
    the process (it skips the bands unchanged since the frame it encoded before).
    """
    encoder = encoder or _shared
    rgb = image if image.mode == "RGB" else image.convert("RGB")
    screen = rgb.size
    target = _fit(screen, max_size) if max_size else screen
    frame = rgb if target == screen else rgb.resize(target, Image.Resampling.LANCZOS)
    png = encoder.encode(frame, screen_size=screen)
    for _ in range(4):
        if max_bytes is None or len(png) <= max_bytes or frame.size[0] <= 320:
            break
        width = max(320, int(frame.size[0] * (max_bytes / len(png)) ** 0.5 * 0.9))
        target = (width, max(1, round(screen[1] * width / screen[0])))
        frame = rgb.resize(target, Image.Resampling.LANCZOS)
        png = encoder.encode(frame, screen_size=screen)
    return Encoded(png, frame.size, screen)
