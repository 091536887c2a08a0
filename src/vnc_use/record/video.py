"""The run's video: ``video.mp4`` in the run folder, encoded with PyAV (H.264, yuv420p).

:class:`VideoRecorder` is a :class:`~vnc_use.desktops.frametap.FrameSink`: the VNC
connection's tap offers it frames (see :mod:`vnc_use.desktops.frametap`). They are encoded in
a **child process** (:mod:`vnc_use.record.video_child`, at a lower CPU priority), never on the
agent's threads: a frame is pasted into one of a few slots of shared memory (about 0.5 ms
for 1440x900 on an idle machine), its time, pointer and marks beside it in the slot's own
header, and the slot is marked full last; the child looks for full slots on its own clock.
Nothing goes down a pipe per frame (issue 43: a line per frame cost the agent about 2 ms and
woke the child each time). When every slot is still waiting for the encoder, the frame is
dropped, never queued (encoding in a thread of the agent's process held its GIL about 9 ms a
frame). The child finishes the file when the recorder is closed, and also when the agent's
process dies (its pipe, which carries only the segment's and the memory's description, ends).

* **Variable frame rate**: each frame's time is when the tap took it (milliseconds); a still
  screen costs nothing. The cursor is the desktop's own, as the server draws it; a click is
  a ring at its point, a wheel notch an arrow, a named key (Return, ctrl...) a label, for
  :data:`~vnc_use.desktops.frametap.MARK_SECONDS`. Typed characters are never shown.
* **Crash-safe**: fragmented MP4 (a fragment at least every second while the screen moves,
  a few still frames after it stops so the last fragment is written), so a process killed at
  any moment leaves a file that plays up to about a second before.
* **Segments**: every leg of a run (a start, each resume/approve) is a segment of its own:
  ``video.mp4``, then ``video-2.mp4``... ``video.json`` lists them with their wall-clock start
  (the report maps each step's moment onto a segment and an offset). A person's part (the
  interactive view of a run taken over) is a segment too, marked ``"person": true``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import mmap
import os
import queue
import secrets
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import IO, Any, Protocol

from PIL import Image, ImageDraw

from vnc_use.desktops.base import recordable
from vnc_use.desktops.frametap import MARK_SECONDS, InputMark, TapFrame

__all__ = [
    "DEFAULT_VIDEO_FPS",
    "INDEX_NAME",
    "MAX_MARKS",
    "VIDEO_NAME",
    "Encoder",
    "EncoderOwner",
    "SharedSlots",
    "VideoRecorder",
    "VideoSegment",
    "frame_meta",
    "read_segments",
    "record_desktop",
    "stop_recording",
]

log = logging.getLogger(__name__)

VIDEO_NAME = "video.mp4"
INDEX_NAME = "video.json"
DEFAULT_VIDEO_FPS = 10.0
QUEUE_FRAMES = 12
"""Frames waiting for the encoder (in its process) at most."""
SLOTS = 4
"""Frames of shared memory between the agent and the encoder: a frame offered while all of
them wait for the encoder is dropped."""
_TIME_BASE = Fraction(1, 1000)
_STILL_EVERY = 1.0  # seconds between still frames after the screen stopped changing
_STILLS = 2  # still frames after a change: the fragment holding it reaches the file
_ENCODER = {"preset": "veryfast", "crf": "30", "bf": "0", "g": "300"}
_MUXER = {
    "movflags": "frag_keyframe+empty_moov+default_base_moof",
    "frag_duration": "1000000",
    "flush_packets": "1",
}
_NICE = 10
_MARK = (230, 30, 60)
_KEY = (30, 90, 220)


@dataclass(frozen=True)
class VideoSegment:
    """One segment of a run's video, as ``video.json`` lists it."""

    file: str
    started: float
    """Wall-clock time (epoch seconds) of the segment's time 0."""
    ended: float | None
    """When it was closed cleanly (None: still recording, or its process died)."""
    frames: int = 0
    dropped: int = 0
    person: bool = False
    """A person's part: recorded while a person held the run's desktop (a takeover)."""


def read_segments(run_dir: str | Path) -> list[VideoSegment]:
    """The video segments of a run (``video.json``), whose files exist; [] without any."""
    folder = Path(run_dir)
    try:
        data = json.loads((folder / INDEX_NAME).read_text("utf-8"))
    except (OSError, ValueError):
        return []
    out = []
    for s in data.get("segments", []) if isinstance(data, dict) else []:
        try:
            seg = VideoSegment(
                str(s["file"]),
                float(s["started"]),
                None if s.get("ended") is None else float(s["ended"]),
                int(s.get("frames", 0)),
                int(s.get("dropped", 0)),
                bool(s.get("person", False)),
            )
        except (KeyError, TypeError, ValueError):
            continue
        if "/" not in seg.file and (folder / seg.file).is_file():
            out.append(seg)
    return out


def record_desktop(
    desktop: Any, run_dir: str | Path, fps: float, *, person: bool = False
) -> VideoRecorder | None:
    """Start a segment fed by ``desktop``'s connection (a
    :class:`~vnc_use.desktops.base.Recordable` desktop); None for one that cannot be
    recorded. ``person``: the segment is a person's part (a takeover), marked so in
    ``video.json``."""
    found = recordable(desktop)
    if found is None:
        return None
    recorder = VideoRecorder(run_dir, fps, person=person).start()
    found.start_recording(recorder)
    return recorder


def stop_recording(desktop: Any, recorder: VideoRecorder | None) -> None:
    """Stop feeding ``recorder`` from ``desktop`` and finish its segment."""
    if recorder is None:
        return
    found = recordable(desktop)
    try:
        if found is not None:
            found.stop_recording()
    finally:
        recorder.close()


def _segment_name(n: int) -> str:
    return VIDEO_NAME if n == 1 else f"video-{n}.mp4"


def _write_index(folder: Path, segments: list[dict[str, Any]]) -> None:
    tmp = folder / f".{INDEX_NAME}.{os.getpid()}.{threading.get_ident()}.tmp"
    tmp.write_text(json.dumps({"segments": segments}, indent=1), "utf-8")
    os.replace(tmp, folder / INDEX_NAME)


class VideoRecorder:
    """One segment of a run's video (see the module docstring); a frame sink."""

    def __init__(
        self, run_dir: str | Path, fps: float = DEFAULT_VIDEO_FPS, *, person: bool = False
    ) -> None:
        if not fps > 0:
            raise ValueError(f"the video's frame rate must be positive, got {fps}")
        self.fps = float(fps)
        self.folder = Path(run_dir)
        self.person = person
        """This segment is a person's part (``"person": true`` in ``video.json``)."""
        self._proc: subprocess.Popen[bytes] | None = None
        self._pipe: IO[bytes] | None = None
        self._lock = threading.Lock()  # the pipe: the tap's offers and close()
        self._shm: SharedSlots | None = None
        self._slot_size: tuple[int, int] = (0, 0)
        self._t0 = time.monotonic()
        self._wall0 = time.time()
        self._segments: list[dict[str, Any]] = []
        self._index = -1
        self.file: Path | None = None
        self.frames = 0
        """Frames handed to the encoder so far; once the segment is closed, frames encoded
        (a still screen's repeated frames included)."""
        self.dropped = 0
        self.error: str | None = None
        self.cpu_seconds = 0.0
        """CPU time the encoder's process used (once the segment is closed)."""

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> VideoRecorder:
        """Open the next segment's file and start the encoder's process."""
        self._segments = [
            {
                "file": s.file,
                "started": s.started,
                "ended": s.ended,
                "frames": s.frames,
                "dropped": s.dropped,
                **({"person": True} if s.person else {}),
            }
            for s in read_segments(self.folder)
        ]
        n = len(self._segments) + 1
        while (self.folder / _segment_name(n)).exists():
            n += 1
        self.file = self.folder / _segment_name(n)
        self._t0, self._wall0 = time.monotonic(), time.time()
        segment: dict[str, Any] = {"file": self.file.name, "started": round(self._wall0, 3)}
        if self.person:
            segment["person"] = True
        self._segments.append(segment)
        self._index = len(self._segments) - 1
        _write_index(self.folder, self._segments)
        hello = {
            "file": str(self.file),
            "fps": self.fps,
            "t0": self._t0,
            "wall0": self._wall0,
            "segments": self._segments,
            "index": self._index,
            "nice": _NICE,
            "queue": QUEUE_FRAMES,
        }
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "vnc_use.record.video_child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        self._pipe = self._proc.stdin
        self._send(hello)
        return self

    def offer(self, frame: TapFrame) -> bool:
        """Paste a frame into a free slot for the encoder; False (dropped) when none is free
        or the encoder has stopped. Never blocks."""
        if self._pipe is None or self.error is not None:
            return False
        image = frame.image
        if self._shm is None and not self._open_slots(image.size):
            return False
        shm = self._shm
        assert shm is not None
        slot = shm.free_slot()
        if slot is None:
            self.dropped += 1
            proc = self._proc
            if proc is not None and proc.poll() is not None:  # no encoder frees them any more
                self.error = self.error or "the video encoder stopped"
            return False
        if image.size != self._slot_size:  # the desktop was resized: scale into the stream
            image = image.resize(self._slot_size)
        shm.put(slot, image, frame)
        self.frames += 1
        return True

    def close(self, timeout: float = 10.0) -> None:
        """Encode what is waiting, finish the file and record the segment's end (idempotent)."""
        with self._lock:
            proc, pipe, self._pipe = self._proc, self._pipe, None
            self._proc = None
        if proc is None:
            return
        if self._shm is None:  # no frame was ever offered: nothing to encode or finish
            proc.kill()
        if pipe is not None:
            try:
                pipe.close()  # end of frames: the child encodes what it holds and finishes
            except OSError:  # a killed child's pipe
                log.debug("the video encoder's pipe was already closed", exc_info=True)
            proc.stdin = None  # closed: communicate() only reads
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            self.error = self.error or f"the video encoder did not finish within {timeout:g} s"
        if self._shm is not None:
            self._read_result(out)
        self._free_slots()
        seg = self._segments[self._index]
        seg.update(ended=round(time.time(), 3), frames=self.frames, dropped=self.dropped)
        seg["cpu_s"] = round(self.cpu_seconds, 3)
        if self.error:
            seg["error"] = self.error
        _write_index(self.folder, self._segments)

    def __enter__(self) -> VideoRecorder:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals

    def _open_slots(self, size: tuple[int, int]) -> bool:
        """The shared memory for :data:`SLOTS` frames of ``size`` (the first frame's)."""
        width, height = size[0] // 2 * 2, size[1] // 2 * 2  # yuv420p: even sizes
        if width <= 0 or height <= 0:
            return False
        try:
            shm = SharedSlots.create((width, height), SLOTS)
        except OSError as exc:
            self.error = f"no shared memory for the video: {exc}"
            return False
        self._shm, self._slot_size = shm, (width, height)
        return self._send({"shm": shm.name, "width": width, "height": height, "slots": SLOTS})

    def _send(self, message: dict[str, Any]) -> bool:
        """One line to the encoder; False (and the recorder stops) when it is gone."""
        line = json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n"
        with self._lock:
            pipe = self._pipe
            if pipe is None:
                return False
            try:
                pipe.write(line)
                pipe.flush()
            except (OSError, ValueError):  # the child died: its result says why
                self.error = self.error or "the video encoder stopped"
                return False
        return True

    def _read_result(self, out: bytes) -> None:
        """The child's last line: frames, CPU, the first frame's time, its error."""
        lines = [line for line in out.decode("utf-8", "replace").splitlines() if line.strip()]
        try:
            result = json.loads(lines[-1]) if lines else {}
        except ValueError:
            result = {}
        if not isinstance(result, dict) or "frames" not in result:
            self.error = self.error or "the video encoder ended without a result"
            return
        self.frames = int(result.get("frames", 0))
        self.cpu_seconds = float(result.get("cpu_s", 0.0))
        if result.get("started") is not None:
            self._segments[self._index]["started"] = float(result["started"])
        if result.get("error"):
            self.error = str(result["error"])

    def _free_slots(self) -> None:
        shm, self._shm = self._shm, None
        if shm is None:
            return
        shm.close()


_HEADER = 64
"""Bytes before the slots in the shared memory: one state byte per slot (0 free, 1 full)."""
_META = 4096
"""Bytes at the head of each slot for its frame's time, pointer and marks (a length, then
JSON); the frame's pixels follow."""
MAX_MARKS = 32
"""Marks a frame carries to the encoder at most (the newest; it draws those of the last
:data:`~vnc_use.desktops.frametap.MARK_SECONDS` only)."""
_LABEL = 32  # characters of a mark's label kept (a key's name)
_LENGTH = struct.Struct("<I")
_SHM_DIR = Path("/dev/shm")


def frame_meta(frame: TapFrame) -> bytes:
    """A frame's time, pointer and marks as a slot's header holds them (at most
    :data:`_META` bytes: the oldest marks give way)."""
    marks = [[m.t, m.kind, m.x, m.y, m.label[:_LABEL]] for m in frame.marks[-MAX_MARKS:]]
    pointer = list(frame.pointer) if frame.pointer is not None else None
    while True:
        data = json.dumps({"t": frame.t, "pointer": pointer, "marks": marks}).encode("utf-8")
        if _LENGTH.size + len(data) <= _META or not marks:
            return data
        marks = marks[1:]


class SharedSlots:
    """Frames in POSIX shared memory (a file of ``/dev/shm``), between the agent's process
    and the encoder's: a state byte per slot, then the slots, each a header (the frame's time,
    pointer and marks: :func:`frame_meta`) and the frame (RGBX, 4 bytes a pixel).

    The agent fills a free slot, header and pixels, and sets its state byte last; the encoder
    reads the byte, then the slot, and clears the byte when it has copied the frame out (on
    x86-64 the stores of one thread reach the other process in the order they were made).
    The encoder removes the file's name as soon as it has opened it (and the agent at close),
    so a process killed at any moment leaves nothing behind in ``/dev/shm``.
    """

    def __init__(self, name: str, size: tuple[int, int], slots: int, *, create: bool) -> None:
        if not 0 < slots <= _HEADER:
            raise ValueError(f"between 1 and {_HEADER} slots, not {slots}")
        self.name = name
        self.size = size
        self.slots = slots
        self.frame_bytes = size[0] * size[1] * 4
        self._stride = _META + self.frame_bytes
        length = _HEADER + slots * self._stride
        path = _SHM_DIR / name
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(path, flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, length)
            self._map = mmap.mmap(fd, length)
        finally:
            os.close(fd)
        self._view = memoryview(self._map)

    @classmethod
    def create(cls, size: tuple[int, int], slots: int) -> SharedSlots:
        name = f"vnc-use-video-{os.getpid()}-{secrets.token_hex(6)}"
        return cls(name, size, slots, create=True)

    def unlink(self) -> None:
        """Remove the name (the memory stays until both processes have closed it)."""
        with contextlib.suppress(OSError):  # already removed by the other side
            os.unlink(_SHM_DIR / self.name)

    def free_slot(self) -> int | None:
        """A slot the encoder is done with, if any."""
        return next((i for i in range(self.slots) if self._view[i] == 0), None)

    def _slot_image(self, slot: int) -> Image.Image:
        offset = _HEADER + slot * self._stride + _META
        view = self._view[offset : offset + self.frame_bytes]
        buffer: Any = view  # a writable buffer (Pillow's stubs name only bytes)
        return Image.frombuffer("RGBX", self.size, buffer, "raw", "RGBX", 0, 1)

    def put(self, slot: int, image: Image.Image, frame: TapFrame) -> None:
        """Paste ``image`` (the slots' size) and ``frame``'s time, pointer and marks into
        ``slot``, then mark it full."""
        source = image if image.mode == "RGB" else image.convert("RGB")
        target = self._slot_image(slot)
        target.readonly = 0  # write into the shared memory itself, not into a copy of it
        # Pillow keeps RGB as 4 bytes a pixel: its core copies RGB into RGBX row by row
        # (0.4 ms for 1440x900; Image.paste converts first, 8 ms)
        target.im.paste(source.im, (0, 0, *self.size))
        del target
        meta = frame_meta(frame)
        offset = _HEADER + slot * self._stride
        self._view[offset : offset + _LENGTH.size + len(meta)] = _LENGTH.pack(len(meta)) + meta
        self._view[slot] = 1  # last: the encoder never sees a slot half written

    def full_slots(self) -> list[tuple[float, int]]:
        """The slots waiting for the encoder, oldest frame first: (frame time, slot). A slot
        whose header cannot be read is freed (that frame is lost, not the video)."""
        waiting = []
        for slot in range(self.slots):
            if self._view[slot] != 1:
                continue
            try:
                waiting.append((float(self._meta(slot)["t"]), slot))
            except (KeyError, TypeError, ValueError):
                log.debug("video frame in slot %d has an unreadable header", slot, exc_info=True)
                self.free(slot)
        return sorted(waiting)

    def _meta(self, slot: int) -> dict[str, Any]:
        offset = _HEADER + slot * self._stride
        (length,) = _LENGTH.unpack_from(self._view, offset)
        if length > _META - _LENGTH.size:
            raise ValueError(f"a video frame's header says {length} bytes")
        start = offset + _LENGTH.size
        meta = json.loads(bytes(self._view[start : start + length]))
        if not isinstance(meta, dict):
            raise ValueError("a video frame's header is not an object")
        return meta

    def take(self, slot: int) -> TapFrame:
        """A copy of the frame in ``slot`` (RGB, with its time, pointer and marks), which is
        then free again."""
        meta = self._meta(slot)
        image = self._slot_image(slot).convert("RGB")
        self._view[slot] = 0
        marks = tuple(
            InputMark(float(t), str(k), int(x), int(y), str(lb))
            for t, k, x, y, lb in meta.get("marks") or ()
        )
        pointer = meta.get("pointer")
        where = (int(pointer[0]), int(pointer[1])) if pointer else None
        return TapFrame(float(meta["t"]), image, where, marks)

    def free(self, slot: int) -> None:
        """Give ``slot`` back without reading it (its frame could not be read)."""
        self._view[slot] = 0

    def close(self) -> None:
        self.unlink()
        self._view.release()
        try:
            self._map.close()
        except BufferError:  # an image still maps it: the memory goes with the process
            log.debug("the video's shared memory is still in use", exc_info=True)


class EncoderOwner(Protocol):
    """Who learns what :class:`Encoder` did: the first frame's time, the frames encoded."""

    frames: int

    def first_frame(self, t: float) -> None: ...


class Encoder:
    """PyAV's container and stream of one segment (in the encoder's process,
    :mod:`vnc_use.record.video_child`)."""

    def __init__(self, path: Path, fps: float, owner: EncoderOwner) -> None:
        import av  # PyAV is imported here only

        self._av = av
        self._path = path
        self._fps = fps
        self._t0 = 0.0  # the first frame's time: the segment's time 0
        self._owner = owner
        self._container: Any = None
        self._stream: Any = None
        self._size: tuple[int, int] | None = None
        self._last_pts = -1
        self._last: TapFrame | None = None
        self._marks: list[InputMark] = []

    def loop(self, frames: queue.Queue[TapFrame | None]) -> None:
        stills = 0
        try:
            while True:
                try:
                    frame = frames.get(timeout=_STILL_EVERY)
                except queue.Empty:
                    if self._last is not None and stills < _STILLS:
                        stills += 1
                        self._encode(self._last, time.monotonic())
                    continue
                if frame is None:
                    break
                stills = 0
                self._last = frame
                self._encode(frame, frame.t)
            if self._last is not None:  # the segment lasts until it was closed
                self._encode(self._last, time.monotonic())
        finally:
            self._finish()

    def _open(self, size: tuple[int, int]) -> None:
        av = self._av
        self._container = av.open(str(self._path), "w", format="mp4", options=dict(_MUXER))
        stream = self._container.add_stream("libx264", rate=max(1, round(self._fps)))
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        stream.codec_context.time_base = _TIME_BASE
        stream.options = dict(_ENCODER)
        stream.codec_context.thread_count = 1  # one core at most, never a pool of threads
        self._stream = stream
        self._size = size

    def _encode(self, frame: TapFrame, t: float) -> None:
        image = frame.image
        size = (image.width // 2 * 2, image.height // 2 * 2)  # yuv420p: even sizes
        if self._size is None:
            self._open(size)
            self._t0 = t
            self._owner.first_frame(t)
        pts = max(self._last_pts + 1, round((t - self._t0) * 1000))
        self._marks = [m for m in self._marks if t - m.t < MARK_SECONDS] + [
            m for m in frame.marks if t - m.t < MARK_SECONDS
        ]
        canvas = overlay(image, frame.pointer, self._marks, t)
        if canvas.size != self._size:  # the desktop was resized: scale into the stream
            canvas = canvas.resize(self._size or size)
        vf = self._av.VideoFrame.from_image(canvas).reformat(format="yuv420p")  # type: ignore[no-untyped-call]
        vf.pts, vf.time_base = pts, _TIME_BASE
        for packet in self._stream.encode(vf):
            self._container.mux(packet)
        self._last_pts = pts
        self._owner.frames += 1

    def _finish(self) -> None:
        if self._container is None:
            return
        try:
            for packet in self._stream.encode(None):
                self._container.mux(packet)
        finally:
            self._container.close()


_ARROW = [(0, 0), (0, 17), (4, 13), (7, 20), (10, 19), (7, 12), (12, 12)]


def overlay(
    image: Image.Image, pointer: tuple[int, int] | None, marks: list[InputMark], t: float
) -> Image.Image:
    """The frame as the video shows it: the marks (on a copy: the frame's own image stays as
    the screen was, for the still frames that repeat it). ``pointer`` is not drawn: the
    desktop's own cursor is in the screen the server sends (vnc-use's client asks for no
    cursor shapes), and an arrow drawn here too showed two pointers (issue 38)."""
    if not marks:
        return image if image.mode == "RGB" else image.convert("RGB")
    canvas = image.convert("RGB") if image.mode != "RGB" else image.copy()
    draw = ImageDraw.Draw(canvas)
    keys = [m.label or "key" for m in marks if m.kind == "key"]
    for m in marks:
        fade = max(0.0, 1.0 - (t - m.t) / MARK_SECONDS)
        r = round(14 + 10 * (1 - fade))
        if m.kind == "click":
            draw.ellipse((m.x - r, m.y - r, m.x + r, m.y + r), outline=_MARK, width=4)
        elif m.kind == "scroll":
            dy = -14 if "up" in m.label else 14
            draw.line((m.x, m.y, m.x, m.y + dy * 2), fill=_MARK, width=4)
            draw.polygon([(m.x - 7, m.y + dy), (m.x + 7, m.y + dy), (m.x, m.y + dy * 2)], _MARK)
    if keys:
        text = " ".join(dict.fromkeys(keys[-6:]))
        w = 12 + 7 * len(text)
        draw.rectangle((8, canvas.height - 34, 8 + w, canvas.height - 8), fill=_KEY)
        draw.text((14, canvas.height - 28), text, fill=(255, 255, 255))
    return canvas
