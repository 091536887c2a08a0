"""x11vnc's ``-ncache`` framebuffer is refused; ``--screen-region`` picks the screen out of a
framebuffer that holds more (issue 15, item 3).

A real x11vnc with ``-ncache 10`` serves a 1024x768 Xvfb screen as a 1024x9216 framebuffer
(the screen, then the pixel cache). Connecting without a region must fail with one line that
names the cause and ``-noncache``; with a region, screenshots are the region, the 0-999 grid
maps into it and clicks land on the right pixel of the probe app.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from vnc_use.actions import GEMINI_25_TABLE, ValidatedAction, denorm
from vnc_use.actions.execute import ActionContext, execute
from vnc_use.desktops.region import ScreenRegion, check_framebuffer
from vnc_use.desktops.settle import capture_settled
from vnc_use.desktops.vnc import VNCController
from vnc_use.desktops.xserver import display_free, free_port, port_open
from vnc_use.errors import ConfigError
from vnc_use.testing.gemini_standin import (
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    require_confirmation,
)
from vnc_use.testing.probe import ProbeLog

pytestmark = pytest.mark.desktop

WIDTH, HEIGHT = 1024, 768
VNC_USE = str(Path(sys.executable).parent / "vnc-use")


@dataclass
class NcacheDesktop:
    server: str
    log: ProbeLog
    ready: dict[str, Any]


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _wait(condition: Any, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout:g} s")
        time.sleep(0.02)


@pytest.fixture(scope="module")
def ncache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NcacheDesktop]:
    """Xvfb with the probe, served by ``x11vnc -ncache 10`` on 127.0.0.1 (no password)."""
    xvfb, x11vnc = shutil.which("Xvfb"), shutil.which("x11vnc")
    assert xvfb and x11vnc, "Xvfb or x11vnc is missing: run ./scripts/install.sh"
    folder = tmp_path_factory.mktemp("ncache")
    number = next(n for n in range(470, 570) if display_free(n))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with open(folder / "Xvfb.log", "wb") as out:
            procs.append(
                subprocess.Popen(
                    [
                        xvfb,
                        f":{number}",
                        "-screen",
                        "0",
                        f"{WIDTH}x{HEIGHT}x24",
                        "-nolisten",
                        "tcp",
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
        _wait(lambda: Path(f"/tmp/.X11-unix/X{number}").exists(), "Xvfb did not start")
        env = {**os.environ, "DISPLAY": f":{number}"}
        events = folder / "probe.jsonl"
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "vnc_use.testing.probe", "--out", str(events)], env=env
            )
        )
        log = ProbeLog(events)
        ready = log.wait_type("ready", timeout=20)
        port = free_port()
        x11vnc_options = ["-localhost", "-noipv6", "-nopw", "-forever", "-shared", "-ncache", "10"]
        with open(folder / "x11vnc.log", "wb") as out:
            procs.append(
                subprocess.Popen(
                    [x11vnc, "-display", f":{number}", "-rfbport", str(port), *x11vnc_options],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
        _wait(lambda: port_open(port), "x11vnc did not listen")
        yield NcacheDesktop(f"127.0.0.1::{port}", log, ready)
    finally:
        for proc in reversed(procs):
            _stop(proc)


def test_the_region_syntax_is_checked_with_one_line() -> None:
    assert ScreenRegion.parse("1280x800+0+0") == ScreenRegion(1280, 800, 0, 0)
    assert str(ScreenRegion.parse(" 640x480+10+20 ")) == "640x480+10+20"
    for bad in ("1280x800", "1280x800+0", "-1x800+0+0", "axb+0+0", "8x8+0+0", ""):
        with pytest.raises(ConfigError) as err:
            ScreenRegion.parse(bad)
        assert len(str(err.value).splitlines()) == 1 and "WIDTHxHEIGHT+X+Y" in str(err.value)
    with pytest.raises(ConfigError, match="does not fit the 1024x768 framebuffer"):
        check_framebuffer("h::1", 1024, 768, ScreenRegion(800, 600, 300, 0))


def test_portrait_and_stacked_monitors_are_not_refused() -> None:
    for width, height in ((1080, 1920), (1440, 2560), (1920, 2160), (1080, 2160)):
        check_framebuffer("h::1", width, height, None)  # nothing raised
    with pytest.raises(ConfigError, match="-noncache"):
        check_framebuffer("h::1", 1280, 3200, None)  # x11vnc -ncache 2 on 1280x800


def test_cli_refuses_a_bad_region_before_anything_starts(tmp_path: Path) -> None:
    proc = subprocess.run(
        [VNC_USE, "run", "--vnc", "127.0.0.1::1", "--screen-region", "1280x800", "--task", "x"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "GOOGLE_API_KEY": "AIzaStandInDummyKey-0123456789abcdef"},
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("vnc-use: bad screen region '1280x800'") and "+X+Y" in line


def test_an_ncache_framebuffer_is_refused_with_one_line(ncache: NcacheDesktop) -> None:
    with pytest.raises(ConfigError) as err:
        VNCController().connect(ncache.server)
    message = str(err.value)
    assert len(message.splitlines()) == 1
    assert f"1024x{HEIGHT * 12} framebuffer" in message
    assert "-ncache" in message and "-noncache" in message and "--screen-region" in message


def test_cli_run_refuses_an_ncache_server(ncache: NcacheDesktop, tmp_path: Path) -> None:
    proc = subprocess.run(
        [VNC_USE, "run", "--vnc", ncache.server, "--task", "look", "--runs-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "GOOGLE_API_KEY": "AIzaStandInDummyKey-0123456789abcdef"},
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "-noncache" in line and "Traceback" not in proc.stderr


@pytest.mark.parametrize("region", ["1024x768+0+0", "512x384+256+192"])
def test_with_a_region_the_grid_maps_into_it(ncache: NcacheDesktop, region: str) -> None:
    r = ScreenRegion.parse(region)
    vnc = VNCController()
    vnc.screen_region = r
    with vnc.connect(ncache.server):
        assert vnc.screen_size() == (r.width, r.height)
        shot = capture_settled(vnc, max_bytes=None)
        assert shot.screen_size == (r.width, r.height)
        ctx = ActionContext(hands=vnc, width=r.width, height=r.height)
        for gx, gy in ((500, 500), (100, 900), (999, 0)):
            ncache.log.clear()
            action = GEMINI_25_TABLE.validate("click_at", {"x": gx, "y": gy})
            assert isinstance(action, ValidatedAction)
            pixels = execute(action, ctx)
            px, py = denorm(gx, gy, r.width, r.height)
            assert (pixels["x"], pixels["y"]) == (px, py)
            press = ncache.log.wait_type("press", timeout=10)
            assert (press["x"], press["y"]) == (r.x + px, r.y + py)
        # The screenshot is the region of the screen: the first click's mark (12x12, drawn by
        # the probe at root pixels) shows at its region pixels (looked at up-left of the
        # point: x11vnc paints the pointer below-right of it). x11vnc finds changes by
        # scanning the screen, so a small one may take a few frames to come.
        px, py = denorm(500, 500, r.width, r.height)
        background = (244, 244, 244)
        image = vnc.screenshot()
        deadline = time.monotonic() + 10
        while image.getpixel((px - 4, py - 4)) == background and time.monotonic() < deadline:
            image = capture_settled_image(vnc)
        assert image.size == (r.width, r.height)
        assert image.getpixel((px - 4, py - 4)) != background
        assert image.getpixel((px - 20, py - 20)) == background


def capture_settled_image(vnc: VNCController) -> Image.Image:
    """The settled screenshot the agent would send, as an image."""
    return Image.open(io.BytesIO(capture_settled(vnc, max_bytes=None).png)).convert("RGB")


def test_run_records_the_region_and_approve_reuses_it(
    ncache: NcacheDesktop, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """``run --screen-region`` pauses for an approval; ``approve`` (no region given) reaches
    the same server, which it could not without the recorded region, and clicks in it."""
    region = ScreenRegion.parse("512x384+256+192")
    gemini.script(
        Reply.calls(
            FunctionCallSpec(
                "click_at", x=600, y=600, safety_decision=require_confirmation("Submits it.")
            )
        ),
        Reply.text("Clicked."),
    )
    base = ["--vnc", ncache.server, "--runs-dir", str(tmp_path)]
    cli = [sys.executable, "-m", "vnc_use.cli"]
    run = subprocess.run(
        [
            *cli,
            "run",
            *base,
            "--task",
            "click",
            "--thread-id",
            "reg",
            "--screen-region",
            str(region),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 3, run.stdout + run.stderr  # awaiting approval
    saved = json.loads((tmp_path / "reg" / "run.json").read_text())
    assert saved["screen_region"] == "512x384+256+192"
    ncache.log.clear()
    approve = subprocess.run(
        [*cli, "approve", "reg", "--runs-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert approve.returncode == 0, approve.stdout + approve.stderr
    press = ncache.log.wait_type("press", timeout=10)
    px, py = denorm(600, 600, region.width, region.height)
    assert (press["x"], press["y"]) == (region.x + px, region.y + py)
    shots = [
        json.loads(line)
        for line in (tmp_path / "reg" / "events.jsonl").read_text().splitlines()
        if '"screenshot"' in line
    ]
    sizes = {tuple(e["screen_size"]) for e in shots if e.get("event") == "screenshot"}
    assert sizes == {(region.width, region.height)}


def test_the_agent_checks_its_region_at_once(tmp_path: Path) -> None:
    from vnc_use.agent import VncUseAgent

    with pytest.raises(ConfigError, match="bad screen region '640x480'"):
        VncUseAgent(vnc_server="127.0.0.1::1", runs_dir=tmp_path, screen_region="640x480")
    agent = VncUseAgent(vnc_server="127.0.0.1::1", runs_dir=tmp_path, screen_region="640x480+0+0")
    try:
        assert agent.screen_region == ScreenRegion(640, 480, 0, 0)
    finally:
        agent.close()
