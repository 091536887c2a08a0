"""The screenshot encoder and the downscale rule, and coordinates on a downscaled screenshot."""

from __future__ import annotations

import io
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw

from vnc_use import VncUseAgent
from vnc_use.agent import AgentSettings
from vnc_use.desktops.png import PngEncoder, encode_png, encode_screenshot, screen_size_of
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.testing.gemini_standin import (
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    require_confirmation,
)

from desktop_fixtures import Probe
from gemini_fixtures import FAST_RETRY


def decode(png: bytes) -> Image.Image:
    with Image.open(io.BytesIO(png)) as img:
        img.load()
        return img.copy()


def desktop_like(width: int, height: int, seed: int = 1) -> Image.Image:
    """Flat areas, text-like strokes and a noisy patch."""
    rng = random.Random(seed)
    image = Image.new("RGB", (width, height), "#f4f4f4")
    draw = ImageDraw.Draw(image)
    for y in range(0, height, 16):
        draw.text((rng.randrange(20), y), "vnc use " * rng.randrange(1, 20), fill="#202020")
    image.paste(Image.effect_noise((width // 4, height // 4), 60).convert("RGB"), (10, 10))
    return image


@pytest.mark.parametrize("size", [(1, 1), (17, 1), (3, 33), (640, 480), (1440, 900)])
def test_lossless_for_any_size(size: tuple[int, int]) -> None:
    image = Image.effect_noise(size, 70).convert("RGB")
    png = encode_png(image)
    assert decode(png).tobytes() == image.tobytes()
    assert screen_size_of(png) == size


def test_other_modes_are_converted_to_rgb() -> None:
    rgba = Image.new("RGBA", (40, 30), (10, 200, 30, 128))
    out = decode(encode_png(rgba))
    assert out.mode == "RGB" and out.getpixel((5, 5)) == (10, 200, 30)


def test_single_thread_and_parallel_give_the_same_bytes() -> None:
    image = desktop_like(1440, 900)
    assert encode_png(image, threads=1) == encode_png(image, threads=4)


def test_encoder_reuses_unchanged_bands_and_stays_exact() -> None:
    """Successive frames with small changes: only changed bands are compressed again, and
    the bytes equal a fresh encode of the same frame."""
    encoder = PngEncoder(band_rows=32)
    frame = desktop_like(1024, 768)
    assert decode(encoder.encode(frame)).tobytes() == frame.tobytes()
    assert encoder.reused == 0
    rng = random.Random(5)
    for _ in range(8):
        frame = frame.copy()
        x, y = rng.randrange(1000), rng.randrange(740)
        ImageDraw.Draw(frame).rectangle((x, y, x + 12, y + 12), fill=(rng.randrange(256), 0, 0))
        png = encoder.encode(frame)
        assert decode(png).tobytes() == frame.tobytes()
        assert png == encode_png(frame)
        assert encoder.reused >= 24 - 2  # 24 bands; a 13-pixel square touches one or two
    other = desktop_like(800, 600, seed=2)  # a new size: nothing to reuse
    assert decode(encoder.encode(other)).tobytes() == other.tobytes()
    assert encoder.reused == 0


def test_full_size_unless_configured_or_too_big() -> None:
    image = desktop_like(1440, 900)
    plain = encode_screenshot(image)
    assert plain.size == plain.screen_size == (1440, 900) and not plain.downscaled

    boxed = encode_screenshot(image, max_size=(1024, 1024))
    assert boxed.size == (1024, 640) and boxed.screen_size == (1440, 900)
    assert decode(boxed.png).size == (1024, 640)
    assert screen_size_of(boxed.png) == (1440, 900)

    small = encode_screenshot(image, max_bytes=60_000)
    assert small.downscaled and small.screen_size == (1440, 900)
    assert len(small.png) <= 60_000
    width, height = small.size
    assert abs(width / height - 1.6) < 0.01  # the aspect ratio is kept
    assert screen_size_of(small.png) == (1440, 900)

    fits = encode_screenshot(image, max_size=(2000, 2000), max_bytes=10**9)
    assert fits.size == (1440, 900)


def test_screen_size_of_a_png_without_the_chunk() -> None:
    buf = io.BytesIO()
    Image.new("RGB", (30, 20)).save(buf, format="PNG")
    assert screen_size_of(buf.getvalue()) == (30, 20)


# ------------------------------------------------------------ coordinates when downscaled


@pytest.fixture
def downscaling_agent(probe: Probe, gemini: GeminiStandIn, tmp_path: Path) -> Iterator[Any]:
    agents: list[VncUseAgent] = []

    def make() -> VncUseAgent:
        agent = VncUseAgent(
            vnc_server=probe.desktop.server,
            vnc_password=probe.desktop.password,
            runs_dir=tmp_path / "runs",
            planner=GeminiComputerUse(**FAST_RETRY),
            settings=AgentSettings(screenshot_max_size=(720, 720)),
        )
        agents.append(agent)
        return agent

    yield make
    for agent in agents:
        agent.close()


@pytest.mark.desktop
def test_grid_maps_to_the_real_screen_when_the_model_sees_a_smaller_image(
    probe: Probe, gemini: GeminiStandIn, downscaling_agent: Any
) -> None:
    """The model sees 720x450 images of the 1440x900 desktop. It aims at pixel (100, 50) of
    what it sees, i.e. grid (139, 111); the click lands at the real (200, 100)."""
    gemini.script(
        Reply.calls(FunctionCallSpec("click_at", x=139, y=111)),
        Reply.calls(
            FunctionCallSpec(
                "click_at", x=500, y=500, safety_decision=require_confirmation("Really?")
            )
        ),
        Reply.text("done"),
    )
    agent = downscaling_agent()
    paused = agent.run(task="Click twice", thread_id="scaled")
    assert paused.status == "awaiting_approval", paused.error
    assert [decode(img).size for r in gemini.requests for img in r.image_parts()] == [
        (720, 450),
        (720, 450),
        (720, 450),
    ]
    press = probe.log.wait_type("press")
    assert (press["x"], press["y"]) == (200, 100)
    assert paused.transcript[0]["pixels"] == {"x": 200, "y": 100}
    assert tuple(paused.transcript[0]["screen_size"]) == (1440, 900)
    assert paused.pending_call is not None
    assert paused.pending_call["pixels"] == {"x": 720, "y": 450}  # the real centre
    result = downscaling_agent().approve("scaled")  # a fresh agent, from the checkpoint
    assert result.status == "done", result.error
    second = probe.log.wait_type("press", x=720, y=450)
    assert second["button"] == 1
    assert not gemini.violations
