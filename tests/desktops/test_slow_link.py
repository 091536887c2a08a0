"""Screenshots after an action show it, also behind a link with a long round trip (issue 15,
item 2).

The probe runs with ``--no-status --animate 15 --animate-delay 20``: a click first draws only
its 12x12 square (a cursor-sized change, which the settle rule ignores), then 20 ms later
the animation panel turns grey and 15 ms after that a colour that differs for every click.
Behind :class:`~vnc_use.testing.delay_proxy.DelayProxy` each step clicks and takes the
screenshot the agent would return (``capture_settled`` with the agent's default policy);
it must show the click's final colour. Before the fix the square used up the outstanding
update request and the panel was never fetched.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from PIL import Image

from vnc_use.agent import AgentSettings
from vnc_use.desktops.settle import capture_settled
from vnc_use.desktops.vnc import VNCController
from vnc_use.testing.delay_proxy import DelayProxy
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.probe import ProbeLog, animation_color

pytestmark = pytest.mark.desktop

STEPS = 20


@dataclass
class PanelProbe:
    desktop: TestDesktop
    log: ProbeLog
    ready: dict[str, Any]

    @property
    def panel_centre(self) -> tuple[int, int]:
        x0, y0, x1, y1 = self.ready["panel"]
        return (x0 + x1) // 2, (y0 + y1) // 2


@pytest.fixture(scope="module")
def panel_probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PanelProbe]:
    with TestDesktop(800, 600) as desk:
        out = tmp_path_factory.mktemp("slow-link") / "probe.jsonl"
        argv = [sys.executable, "-m", "vnc_use.testing.probe", "--out", str(out)]
        desk.launch([*argv, "--no-status", "--animate", "15", "--animate-delay", "20"])
        log = ProbeLog(out)
        yield PanelProbe(desk, log, log.wait_type("ready", timeout=20))


def _stale_steps(probe: PanelProbe, server: str) -> list[str]:
    """Click ``STEPS`` times through ``server``; the steps whose screenshot missed the click."""
    defaults = AgentSettings()
    stale = []
    with VNCController(timeout=10.0).connect(server, probe.desktop.password) as vnc:
        capture_settled(vnc)  # the run's first screenshot (a full refresh)
        for step in range(STEPS):
            probe.log.clear()
            vnc.click(60 + (step * 37) % 300, 200 + (step * 53) % 300)
            shot = capture_settled(
                vnc,
                min_wait=defaults.settle_min_s,
                max_wait=defaults.settle_max_s,
                quiet=defaults.settle_quiet_s,
                max_bytes=None,
            )
            n = probe.log.wait_type("animation")["n"]
            probe.log.wait_type("animated", n=n)  # the colour was drawn (at the server)
            seen = Image.open(io.BytesIO(shot.png)).convert("RGB").getpixel(probe.panel_centre)
            if seen != animation_color(n):
                stale.append(f"step {step}: panel {seen}, wanted {animation_color(n)}")
    return stale


@pytest.mark.parametrize("delay_ms", [0, 50, 200])
def test_the_screenshot_after_a_click_shows_it_behind_a_slow_link(
    panel_probe: PanelProbe, delay_ms: int
) -> None:
    with DelayProxy(panel_probe.desktop.port, delay_ms) as proxy:
        stale = _stale_steps(panel_probe, proxy.server)
    assert stale == [], f"+{delay_ms} ms each way: {len(stale)}/{STEPS} stale screenshots: {stale}"


def test_the_proxy_delays_and_stops_cleanly(panel_probe: PanelProbe) -> None:
    """The proxy really adds its delay (a round trip takes at least twice it) and, once
    stopped, accepts nothing more."""
    import socket
    import time

    proxy = DelayProxy(panel_probe.desktop.port, 100).start()
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
            sent = time.monotonic()
            greeting = sock.recv(12)  # the server speaks first: the delay is one way
            one_way = time.monotonic() - sent
        assert greeting.startswith(b"RFB ")
        assert one_way >= 0.1
    finally:
        proxy.stop()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=1).close()
