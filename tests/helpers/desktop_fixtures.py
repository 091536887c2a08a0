"""Pytest fixtures for real VNC desktops (star-imported by ``tests/conftest.py``).

* ``desktop`` (session): a 1440x900 TigerVNC desktop; ``small_desktop`` (session): 1024x768.
* ``probe`` / ``small_probe``: the probe app running full-screen on that desktop, with its
  event log marked, so ``probe.log.events()`` holds only what this test caused.
* ``vnc`` / ``small_vnc``: a :class:`VNCController` connected to that desktop for one test.

A missing Xvnc fails these fixtures (with the install command); it never skips.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from subprocess import Popen
from typing import Any

import pytest

from vnc_use.desktops.vnc import VNCController
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.probe import ProbeLog

__all__ = [
    "Probe",
    "desktop",
    "probe",
    "session_probe",
    "session_small_probe",
    "small_desktop",
    "small_probe",
    "small_vnc",
    "start_probe",
    "vnc",
]


@dataclass
class Probe:
    """A running probe app: its desktop, process and event log (read with ``log``)."""

    desktop: TestDesktop
    process: Popen[bytes]
    log: ProbeLog
    ready: dict[str, Any] = field(default_factory=dict)

    @property
    def size(self) -> tuple[int, int]:
        """The screen size the probe covers."""
        return int(self.ready["width"]), int(self.ready["height"])

    @property
    def entry_center(self) -> tuple[int, int]:
        """The centre of the probe's text entry."""
        x, y, w, h = self.ready["entry"]
        return int(x + w // 2), int(y + h // 2)

    def canvas_point(self) -> tuple[int, int]:
        """A point on the plain canvas, away from the entry and the status line."""
        width, height = self.size
        return width * 3 // 4, height // 2


def start_probe(desktop: TestDesktop, log_path: str, timeout: float = 20.0) -> Probe:
    """Launch the probe on ``desktop`` and wait until it reports ``ready``."""
    process = desktop.launch([sys.executable, "-m", "vnc_use.testing.probe", "--out", log_path])
    log = ProbeLog(log_path)
    try:
        ready = log.wait_type("ready", timeout=timeout)
    except TimeoutError as exc:
        raise RuntimeError(
            f"the probe did not become ready (exit code {process.poll()}): {exc}"
        ) from None
    return Probe(desktop, process, log, ready)


def _desktop(width: int, height: int) -> Iterator[TestDesktop]:
    desk = TestDesktop(width, height)
    desk.start()
    try:
        yield desk
    finally:
        desk.stop()


@pytest.fixture(scope="session")
def desktop() -> Iterator[TestDesktop]:
    """A 1440x900 TigerVNC desktop for the whole session."""
    yield from _desktop(1440, 900)


@pytest.fixture(scope="session")
def small_desktop() -> Iterator[TestDesktop]:
    """A 1024x768 TigerVNC desktop for the whole session."""
    yield from _desktop(1024, 768)


@pytest.fixture(scope="session")
def session_probe(desktop: TestDesktop, tmp_path_factory: pytest.TempPathFactory) -> Probe:
    """The probe app on ``desktop``, started once (use ``probe`` in tests)."""
    return start_probe(desktop, str(tmp_path_factory.mktemp("probe") / "events.jsonl"))


@pytest.fixture(scope="session")
def session_small_probe(
    small_desktop: TestDesktop, tmp_path_factory: pytest.TempPathFactory
) -> Probe:
    """The probe app on ``small_desktop``, started once (use ``small_probe`` in tests)."""
    return start_probe(small_desktop, str(tmp_path_factory.mktemp("probe") / "events.jsonl"))


def _fresh(probe: Probe) -> Probe:
    if probe.process.poll() is not None:
        raise RuntimeError(f"the probe app exited with code {probe.process.returncode}")
    probe.log.clear()
    return probe


@pytest.fixture
def probe(session_probe: Probe) -> Probe:
    """The probe on ``desktop``, its log marked so this test sees only its own events."""
    return _fresh(session_probe)


@pytest.fixture
def small_probe(session_small_probe: Probe) -> Probe:
    """The probe on ``small_desktop``, its log marked for this test."""
    return _fresh(session_small_probe)


@pytest.fixture
def vnc(desktop: TestDesktop) -> Iterator[VNCController]:
    """A controller connected to ``desktop`` for one test."""
    with VNCController(timeout=10.0, connect_timeout=5.0).connect(
        desktop.server, desktop.password
    ) as controller:
        yield controller


@pytest.fixture
def small_vnc(small_desktop: TestDesktop) -> Iterator[VNCController]:
    """A controller connected to ``small_desktop`` for one test."""
    with VNCController(timeout=10.0, connect_timeout=5.0).connect(
        small_desktop.server, small_desktop.password
    ) as controller:
        yield controller
