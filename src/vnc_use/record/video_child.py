"""The video encoder's own process (issue 43): ``python -m vnc_use.record.video_child``.

:class:`~vnc_use.record.video.VideoRecorder` starts it for each segment, at a lower CPU
priority, and talks to it through its standard input: a first line with the segment (file,
frame rate, clocks, the ``video.json`` list), then one line naming the shared memory
(:class:`~vnc_use.record.video.SharedSlots`), then one line per frame (its slot, time,
pointer and marks). A reader thread copies each frame out of its slot (freeing the slot) into
a bounded queue; the :class:`~vnc_use.record.video.Encoder` encodes from that queue, as it did
in a thread before. The end of the input (the recorder closed, or the agent's process died)
finishes the file; the last line on standard output is the result: frames encoded, CPU
seconds, the first frame's wall-clock time and an error, if any.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from vnc_use.desktops.frametap import InputMark, TapFrame
from vnc_use.record.video import Encoder, SharedSlots, _write_index


class _Segment:
    """The child's side of a segment: writes ``video.json``'s start at the first frame."""

    def __init__(self, hello: dict[str, Any]) -> None:
        self.folder = Path(hello["file"]).parent
        self.t0 = float(hello["t0"])
        self.wall0 = float(hello["wall0"])
        self.segments: list[dict[str, Any]] = list(hello["segments"])
        self.index = int(hello["index"])
        self.frames = 0
        self.started: float | None = None

    def first_frame(self, t: float) -> None:
        self.started = round(self.wall0 + (t - self.t0), 3)
        self.segments[self.index]["started"] = self.started
        _write_index(self.folder, self.segments)


def _frame(slots: SharedSlots, message: dict[str, Any]) -> TapFrame:
    marks = tuple(
        InputMark(float(t), str(k), int(x), int(y), str(lb)) for t, k, x, y, lb in message["marks"]
    )
    pointer = message.get("pointer")
    image = slots.take(int(message["slot"]))
    return TapFrame(float(message["t"]), image, tuple(pointer) if pointer else None, marks)


def _read(stream: IO[bytes], frames: queue.Queue[TapFrame | None], failed: list[str]) -> None:
    """Reader thread: frames from the pipe and the shared memory into ``frames``."""
    slots: SharedSlots | None = None
    try:
        for raw in stream:
            message = json.loads(raw)
            if "shm" in message:
                slots = SharedSlots(
                    str(message["shm"]),
                    (int(message["width"]), int(message["height"])),
                    int(message["slots"]),
                    create=False,
                )
                slots.unlink()  # mapped on both sides: no name is left behind
            elif slots is not None:
                frames.put(_frame(slots, message))
    except Exception as exc:  # a broken line or memory: the segment ends with what it has
        failed.append(f"{type(exc).__name__}: {exc}")
    finally:
        frames.put(None)


def main() -> int:
    """Encode one segment from standard input; the result goes to standard output."""
    stdin, stdout = sys.stdin.buffer, sys.stdout
    hello = json.loads(stdin.readline() or b"{}")
    if not hello:
        return 2
    # not Linux, or not allowed: encode at normal priority
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, 0, int(hello.get("nice", 10)))
    segment = _Segment(hello)
    frames: queue.Queue[TapFrame | None] = queue.Queue(maxsize=int(hello.get("queue", 12)))
    failed: list[str] = []
    reader = threading.Thread(target=_read, args=(stdin, frames, failed), daemon=True)
    reader.start()
    error = None
    try:
        Encoder(Path(hello["file"]), float(hello["fps"]), segment).loop(frames)
    except Exception as exc:  # the run goes on; the segment says why it stopped
        error = f"{type(exc).__name__}: {exc}"
    result = {
        "frames": segment.frames,
        "cpu_s": round(time.process_time(), 3),
        "started": segment.started,
        "error": error or (failed[0] if failed else None),
    }
    stdout.write(json.dumps(result) + "\n")
    stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
