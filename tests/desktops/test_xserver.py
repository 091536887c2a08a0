"""Picking an X display and a port when another process may take the same free number at the
same moment (two runs at once, two test workers): a server is ours only when the display's
lock names our process and our process holds the port (``vnc_use.desktops.xserver``)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from vnc_use.desktops.xserver import display_owner, listens_on, wait_for_xvnc
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.x11vnc import X11vncDesktop

pytestmark = pytest.mark.desktop


@pytest.fixture(scope="module")
def taken() -> Iterator[TestDesktop]:
    """A desktop of "another process": its display and port are taken."""
    with TestDesktop(640, 480) as desk:
        yield desk


def test_a_display_and_port_that_answer_are_ours_only_if_our_process_holds_them(
    taken: TestDesktop,
) -> None:
    number = int(taken.display[1:])
    assert taken.pid is not None
    assert display_owner(number) == taken.pid
    assert listens_on(taken.pid, taken.port)
    # a process that holds neither: the display and port answer, but they are not its own
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not listens_on(other.pid, taken.port)
        outcome = wait_for_xvnc(number, taken.port, other.pid, lambda: True, timeout=0.3)
        assert outcome == "timeout"
        outcome = wait_for_xvnc(number, taken.port, taken.pid, lambda: True, timeout=5)
        assert outcome == "ready"
    finally:
        other.kill()
        other.wait()


class _LostRace(X11vncDesktop):
    """An x11vnc desktop that first picks ``lost`` (found free a moment before another
    process took it), then picks as usual."""

    def __init__(self, lost: int) -> None:
        super().__init__(800, 600)
        self.lost = lost

    def _pick_display(self, attempt: int) -> int:
        return self.lost if attempt == 0 else super()._pick_display(attempt)


def test_a_desktop_that_lost_the_race_for_a_display_takes_another(taken: TestDesktop) -> None:
    number = int(taken.display[1:])
    with _LostRace(number) as desk:
        assert desk.display != taken.display
        own = int(desk.display[1:])
        assert desk._xvfb is not None and display_owner(own) == desk._xvfb.pid
        assert desk.pid is not None and listens_on(desk.pid, desk.port)
        # the screen it serves is its own (800x600), not the other desktop's (640x480)
        out = subprocess.run(
            ["xdpyinfo", "-display", desk.display],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
        assert "dimensions:    800x600 pixels" in out
    assert display_owner(number) == taken.pid  # the other desktop is untouched
