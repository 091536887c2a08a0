"""The run's video: ``video.mp4`` in the run folder, encoded with PyAV (H.264, yuv420p).

:class:`VideoRecorder` is a :class:`~vnc_use.desktops.frametap.FrameSink`: the VNC
connection's tap offers it frames (see :mod:`vnc_use.desktops.frametap`); it keeps a few in a
bounded queue and drops the rest, and encodes them in its own thread, off the agent's path.

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

import json
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from vnc_use.desktops.base import recordable
from vnc_use.desktops.frametap import MARK_SECONDS, InputMark, TapFrame

__all__ = [
    "DEFAULT_VIDEO_FPS",
    "INDEX_NAME",
    "VIDEO_NAME",
    "VideoRecorder",
    "VideoSegment",
    "read_segments",
    "record_desktop",
    "stop_recording",
]

log = logging.getLogger(__name__)

VIDEO_NAME = "video.mp4"
INDEX_NAME = "video.json"
DEFAULT_VIDEO_FPS = 10.0
QUEUE_FRAMES = 12
"""Frames waiting for the encoder at most (then frames are dropped, never queued)."""
_TIME_BASE = Fraction(1, 1000)
_STILL_EVERY = 1.0  # seconds between still frames after the screen stopped changing
_STILLS = 2  # still frames after a change: the fragment holding it reaches the file
_ENCODER = {"preset": "veryfast", "crf": "30", "bf": "0", "g": "300"}
_MUXER = {
    "movflags": "frag_keyframe+empty_moov+default_base_moof",
    "frag_duration": "1000000",
    "flush_packets": "1",
}
_NICE = 5
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
        self._queue: queue.Queue[TapFrame | None] = queue.Queue(maxsize=QUEUE_FRAMES)
        self._thread: threading.Thread | None = None
        self._t0 = time.monotonic()
        self._wall0 = time.time()
        self._segments: list[dict[str, Any]] = []
        self._index = -1
        self.file: Path | None = None
        self.frames = 0
        self.dropped = 0
        self.error: str | None = None
        self.cpu_seconds = 0.0
        """CPU time the encoder thread used (once it has ended)."""

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> VideoRecorder:
        """Open the next segment's file and start the encoder thread."""
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
        self._thread = threading.Thread(target=self._run, name="vnc-use video", daemon=True)
        self._thread.start()
        return self

    def offer(self, frame: TapFrame) -> bool:
        """Queue a frame for the encoder; False (dropped) when the queue is full."""
        if self._thread is None or self.error is not None:
            return False
        try:
            self._queue.put_nowait(frame)
        except queue.Full:
            self.dropped += 1
            return False
        return True

    def close(self, timeout: float = 10.0) -> None:
        """Encode what is queued, finish the file and record the segment's end (idempotent)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._queue.put(None)
        thread.join(timeout)
        seg = self._segments[self._index]
        seg.update(ended=round(time.time(), 3), frames=self.frames, dropped=self.dropped)
        seg["cpu_s"] = round(self.cpu_seconds, 3)
        if self.error:
            seg["error"] = self.error
        _write_index(self.folder, self._segments)

    def first_frame(self, t: float) -> None:
        """Encoder thread: the segment's time 0 is its first frame (taken at ``t``,
        monotonic); ``video.json`` gets its wall-clock time."""
        self._segments[self._index]["started"] = round(self._wall0 + (t - self._t0), 3)
        _write_index(self.folder, self._segments)

    def __enter__(self) -> VideoRecorder:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ encoder thread

    def _run(self) -> None:
        assert self.file is not None
        _lower_priority()  # the agent's threads go first when the machine is busy
        try:
            _Encoder(self.file, self.fps, self).loop(self._queue)
        except Exception as exc:  # the run goes on; the segment says why it stopped
            log.exception("the video encoder failed")
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.cpu_seconds = time.thread_time()


class _Encoder:
    """PyAV's container and stream of one segment (encoder thread only)."""

    def __init__(self, path: Path, fps: float, owner: VideoRecorder) -> None:
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
        canvas = _overlay(image, frame.pointer, self._marks, t)
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


def _lower_priority() -> None:
    """Give the encoder thread (and the threads it starts) a lower CPU priority (Linux)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _NICE)
    except (AttributeError, OSError):  # not Linux, or not allowed: encode at normal priority
        log.debug("could not lower the video encoder's priority", exc_info=True)


_ARROW = [(0, 0), (0, 17), (4, 13), (7, 20), (10, 19), (7, 12), (12, 12)]


def _overlay(
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
