"""The video is encoded in a child process (issue 43): the agent's process only pastes each
frame into shared memory, the file is complete, nothing is left in ``/dev/shm``, and a
recorder whose agent process dies still leaves a file that plays."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

import av
from PIL import Image

from vnc_use.desktops.frametap import InputMark, TapFrame
from vnc_use.record.video import MAX_MARKS, SharedSlots, VideoRecorder, read_segments

SIZE = (1440, 900)


def _screens(n: int) -> list[Image.Image]:
    """``n`` screens whose top left corner changes colour."""
    out = []
    for i in range(n):
        image = Image.new("RGB", SIZE, (250, 250, 240))
        image.paste((i * 9 % 256, 40, 200 - i), (0, 0, 400, 300))
        out.append(image)
    return out


def _frame(image: Image.Image, i: int) -> TapFrame:
    """A frame taken now, with a click mark."""
    t = time.monotonic()
    return TapFrame(t, image, (50 + i, 60), (InputMark(t, "click", 50 + i, 60),))


def _shm_names(pid: int) -> set[str]:
    """The shared memory the recorders of process ``pid`` made (other tests' recorders may run
    beside this one, in another worker)."""
    return {name for name in os.listdir("/dev/shm") if name.startswith(f"vnc-use-video-{pid}-")}


def _decoded(path: Path) -> int:
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


def test_frames_are_encoded_in_another_process_and_cost_the_agent_little(tmp_path: Path) -> None:
    before = _shm_names(os.getpid())
    screens = _screens(30)
    recorder = VideoRecorder(tmp_path, 10).start()
    agent_cpu = 0.0  # this process's CPU time in the offers (not in waiting for a free slot)
    taken = 0
    for i, screen in enumerate(screens):
        deadline = time.monotonic() + 30
        while True:
            cpu0 = time.process_time()
            offered = recorder.offer(_frame(screen, i))
            agent_cpu += time.process_time() - cpu0
            if offered:
                break
            assert time.monotonic() < deadline, "the encoder never freed a slot"
            time.sleep(0.01)  # all slots busy: wait for the encoder
        taken += 1
    recorder.close()

    assert recorder.error is None
    assert taken == 30 and recorder.frames >= 30
    assert _decoded(tmp_path / "video.mp4") == recorder.frames
    # the encoder's CPU is spent in its own process, not in this one (with the encoder in a
    # thread of this process, this process's CPU time included all of it)
    assert recorder.cpu_seconds > 0
    assert agent_cpu < 0.5 * recorder.cpu_seconds, (agent_cpu, recorder.cpu_seconds)
    (segment,) = read_segments(tmp_path)
    assert segment.frames == recorder.frames and segment.ended is not None
    assert _shm_names(os.getpid()) == before


CHILD = """
import sys, time
from pathlib import Path
from PIL import Image
from vnc_use.desktops.frametap import TapFrame
from vnc_use.record.video import VideoRecorder
recorder = VideoRecorder(Path(sys.argv[1]), 10).start()
for i in range(10):
    image = Image.new("RGB", (640, 480), (i * 20, 90, 160))
    while not recorder.offer(TapFrame(time.monotonic(), image, None, ())):
        time.sleep(0.01)
    time.sleep(0.05)
print("offered", flush=True)
time.sleep(600)
"""


def test_a_killed_agent_process_leaves_a_finished_file_and_no_shared_memory(
    tmp_path: Path,
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "offered"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    # the encoder sees its pipe end, encodes what it holds and closes the file
    deadline = time.monotonic() + 60
    index = tmp_path / "video.json"
    while True:
        started = json.loads(index.read_text("utf-8"))["segments"][0]["started"]
        try:
            frames = _decoded(tmp_path / "video.mp4")
        except (av.error.InvalidDataError, OSError):  # type: ignore[attr-defined]
            frames = 0
        if frames >= 10:
            break
        assert time.monotonic() < deadline, f"only {frames} frames decoded"
        time.sleep(0.2)
    assert started > 0
    assert _shm_names(proc.pid) == set()


def test_a_segment_without_frames_ends_at_once_with_none(tmp_path: Path) -> None:
    """A leg that showed nothing (its desktop never sent a frame) does not wait for the
    encoder's process to start: the segment is closed with no frames and no error."""
    recorder = VideoRecorder(tmp_path, 10).start()
    recorder.close()
    assert recorder.error is None and recorder.frames == 0
    index = json.loads((tmp_path / "video.json").read_text("utf-8"))
    assert index["segments"][0]["frames"] == 0 and index["segments"][0]["ended"]
    assert not (tmp_path / "video.mp4").exists()


# -- frames reach the encoder through the shared memory alone ---------------------------------


def _encoder_pid(parent: int) -> int:
    """The encoder process this process started (the newest, by process id order)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and b"vnc_use.record.video_child" in cmdline:
            found.append(int(entry))
    assert found, "no encoder process"
    return max(found)


def _unread(pid: int) -> int:
    """Bytes waiting in the encoder's standard input (its pipe), read nowhere."""
    fd = os.open(f"/proc/{pid}/fd/0", os.O_RDONLY | os.O_NONBLOCK)  # the pipe itself
    try:
        return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    finally:
        os.close(fd)


def _wait_for(what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_frame_is_handed_over_without_a_word_down_the_pipe(tmp_path: Path) -> None:
    """With the encoder stopped (SIGSTOP), frames still go into its free slots, and the pipe
    stays empty: each frame's time, pointer and marks travel in its slot (before, a line per
    frame waited in the pipe). Once every slot is full a frame is dropped, never queued, and
    the encoder, let go on, encodes the frames it holds."""
    screens = _screens(8)
    recorder = VideoRecorder(tmp_path, 10).start()
    pid = _encoder_pid(os.getpid())
    assert recorder.offer(_frame(screens[0], 0))
    _wait_for("the encoder read the pipe's lines", lambda: _unread(pid) == 0)
    os.kill(pid, signal.SIGSTOP)
    try:
        offered = [recorder.offer(_frame(screen, i)) for i, screen in enumerate(screens[1:], 1)]
        assert _unread(pid) == 0
    finally:
        os.kill(pid, signal.SIGCONT)
    assert offered.count(True) in (3, 4), offered  # the slots (one may still hold frame 0)
    assert offered[-1] is False and recorder.dropped == offered.count(False)
    recorder.close()
    assert recorder.error is None
    assert _decoded(tmp_path / "video.mp4") == recorder.frames >= 1 + offered.count(True)


def test_the_slots_carry_each_frames_time_pointer_and_marks_oldest_first() -> None:
    size = (64, 48)
    agent = SharedSlots.create(size, 4)
    encoder = SharedSlots(agent.name, size, 4, create=False)  # as the encoder maps it
    try:
        keys = tuple(
            InputMark(10.0 + i / 100, "key", 5, 6, f"key{i}-" + "x" * 60) for i in range(50)
        )
        frames = {
            0: TapFrame(3.0, Image.new("RGB", size, (200, 0, 0)), (7, 8), keys),
            1: TapFrame(1.0, Image.new("RGB", size, (0, 200, 0)), None, ()),
            2: TapFrame(2.0, Image.new("RGB", size, (0, 0, 200)), (1, 2), (keys[0],)),
        }
        for slot in (0, 1, 2):  # filled out of time order
            assert agent.free_slot() == slot
            agent.put(slot, frames[slot].image, frames[slot])
        assert agent.free_slot() == 3
        assert encoder.full_slots() == [(1.0, 1), (2.0, 2), (3.0, 0)]
        taken = [encoder.take(slot) for _, slot in encoder.full_slots()]
        assert [f.t for f in taken] == [1.0, 2.0, 3.0] and encoder.full_slots() == []
        assert [f.image.getpixel((5, 5)) for f in taken] == [(0, 200, 0), (0, 0, 200), (200, 0, 0)]
        assert (taken[0].pointer, taken[0].marks) == (None, ())
        assert taken[1].pointer == (1, 2) and taken[1].marks[0].label == keys[0].label[:32]
        # a frame carries its newest marks, as many as the slot's header holds
        assert taken[2].pointer == (7, 8)
        assert len(taken[2].marks) == MAX_MARKS
        assert [m.t for m in taken[2].marks] == [m.t for m in keys[-MAX_MARKS:]]
        assert agent.free_slot() == 0
    finally:
        encoder.close()
        agent.close()


def test_a_slot_with_an_unreadable_header_is_freed_and_the_others_are_taken() -> None:
    size = (32, 24)
    agent = SharedSlots.create(size, 2)
    encoder = SharedSlots(agent.name, size, 2, create=False)
    try:
        for slot in (0, 1):
            agent.put(
                slot,
                Image.new("RGB", size),
                TapFrame(float(slot), Image.new("RGB", size), None, ()),
            )
        with open(f"/dev/shm/{agent.name}", "r+b") as shm:  # slot 0's header: a huge length
            shm.seek(64)
            shm.write(b"\xff\xff\xff\xff")
        assert encoder.full_slots() == [(1.0, 1)]
        assert agent.free_slot() == 0
        assert encoder.take(1).t == 1.0
    finally:
        encoder.close()
        agent.close()
