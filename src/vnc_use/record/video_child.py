"""The video encoder's own process (issue 43): ``python -m vnc_use.record.video_child``.

:class:`~vnc_use.record.video.VideoRecorder` starts it for each segment, at a lower CPU
priority, and talks to it through its standard input: a first line with the segment (file,
frame rate, clocks, the ``video.json`` list), then one line naming the shared memory
(:class:`~vnc_use.record.video.SharedSlots`). The frames themselves never travel down the
pipe: the recorder pastes each into a free slot with its time, pointer and marks, and marks the
slot full last. A poller thread here looks at the slots' state bytes on the frame clock (twice
per frame interval of the segment's frame rate), copies each full slot out, oldest frame first,
frees it, and puts the frame into a bounded queue; the
:class:`~vnc_use.record.video.Encoder` encodes from that queue. A listener thread reads the
pipe: its end (the recorder closed, or the agent's process died) makes the poller take what
the slots still hold and finish the file; the last line on standard output is the result:
frames encoded, CPU seconds, the first frame's wall-clock time and an error, if any.
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

from vnc_use.desktops.frametap import TapFrame
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


class _Pipe:
    """What the pipe said: the shared memory, once named, and whether it has ended."""

    def __init__(self) -> None:
        self.slots: SharedSlots | None = None
        self.ended = threading.Event()
        self.failed: list[str] = []


def _listen(stream: IO[bytes], pipe: _Pipe) -> None:
    """Listener thread: the control lines, until the pipe ends."""
    try:
        for raw in stream:
            message = json.loads(raw)
            if "shm" in message and pipe.slots is None:
                slots = SharedSlots(
                    str(message["shm"]),
                    (int(message["width"]), int(message["height"])),
                    int(message["slots"]),
                    create=False,
                )
                slots.unlink()  # mapped on both sides: no name is left behind
                pipe.slots = slots
    except Exception as exc:  # a broken line or memory: the segment ends with what it has
        pipe.failed.append(f"{type(exc).__name__}: {exc}")
    finally:
        pipe.ended.set()


def _poll(pipe: _Pipe, frames: queue.Queue[TapFrame | None], every: float) -> None:
    """Poller thread: the full slots' frames, oldest first, into ``frames``; once the pipe
    has ended, what the slots still hold, then the end (None)."""
    try:
        while True:
            ended = pipe.ended.is_set()  # before looking: a frame put before the end is seen
            slots = pipe.slots
            if slots is not None:
                for _, slot in slots.full_slots():
                    frames.put(slots.take(slot))
            if ended:
                break
            pipe.ended.wait(every)
    except Exception as exc:  # a slot that cannot be read: the segment ends with what it has
        pipe.failed.append(f"{type(exc).__name__}: {exc}")
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
    fps = float(hello["fps"])
    frames: queue.Queue[TapFrame | None] = queue.Queue(maxsize=int(hello.get("queue", 12)))
    pipe = _Pipe()
    threading.Thread(target=_listen, args=(stdin, pipe), daemon=True).start()
    threading.Thread(target=_poll, args=(pipe, frames, 0.5 / fps), daemon=True).start()
    error = None
    try:
        Encoder(Path(hello["file"]), fps, segment).loop(frames)
    except Exception as exc:  # the run goes on; the segment says why it stopped
        error = f"{type(exc).__name__}: {exc}"
    result = {
        "frames": segment.frames,
        "cpu_s": round(time.process_time(), 3),
        "started": segment.started,
        "error": error or (pipe.failed[0] if pipe.failed else None),
    }
    stdout.write(json.dumps(result) + "\n")
    stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
