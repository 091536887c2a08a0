"""``vnc-use calibrate`` end to end: the real CLI on a real 1366x850 desktop (no side a
multiple of 28 or 1000), the calibration window on its display, the OpenAI-compatible stand-in
clicking the targets each request names -- rightly, in resized-image pixels under a 0-1000
dialect, in 0-1000 under a pixel dialect, and with a constant offset."""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vnc_use.calibration.layout import SPOTS
from vnc_use.providers.openai_compat.dialects import dialect_for_model
from vnc_use.providers.openai_compat.resize import QWEN25_VL, smart_resize
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn
from vnc_use.testing.gemini_standin import Reply as GeminiReply
from vnc_use.testing.openai_families import TargetClicker, newest_label
from vnc_use.testing.openai_standin import OpenAIStandIn

from cli_tools import run_cli

pytestmark = pytest.mark.desktop

WIDTH, HEIGHT = 1366, 850
LABELS = [spot[0] for spot in SPOTS]
SENT_H, SENT_W = smart_resize(HEIGHT, WIDTH, QWEN25_VL)  # 840 x 1372: what qwen2.5-vl sends


@pytest.fixture(scope="module")
def odd_desktop() -> Iterator[TestDesktop]:
    """A 1366x850 desktop for this module (the window covers it; nothing else runs there)."""
    assert WIDTH % 28 and HEIGHT % 28 and WIDTH % 1000 and HEIGHT % 1000
    with TestDesktop(WIDTH, HEIGHT) as desk:
        yield desk


def calibrate(
    desk: TestDesktop, runs: Path, model: str, clicker: TargetClicker
) -> tuple[Any, dict[str, Any], OpenAIStandIn, float]:
    """Run ``vnc-use calibrate`` against a stand-in answering with ``clicker``."""
    with OpenAIStandIn(clicker, models=model) as server:
        started = time.monotonic()
        done = run_cli(
            [
                "calibrate",
                "--provider",
                "openai-compatible",
                "--base-url",
                server.base_url,
                "--model",
                model,
                "--vnc",
                desk.server,
                "--runs-dir",
                str(runs),
            ],
            desk,
            timeout=120,
            env={"DISPLAY": desk.display},
        )
        took = time.monotonic() - started
    files = list(runs.glob("*/calibration.json"))
    assert len(files) == 1, (done.stdout, done.stderr)
    return done, json.loads(files[0].read_text("utf-8")), server, took


def test_a_model_answering_in_its_dialect_is_fine(odd_desktop: TestDesktop, tmp_path: Path) -> None:
    """Right answers: every target within 2 px, verdict fine, exit 0, under a minute; each
    request names exactly one label, in turn; calibration.json keeps boxes and errors."""
    clicker = TargetClicker("qwen3-vl", tmp_path)
    done, record, server, took = calibrate(odd_desktop, tmp_path, "qwen3-vl-8b", clicker)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "verdict: fine" in done.stdout
    assert took < 60
    assert clicker.labels == LABELS  # the file was there before the first request
    for request, label in zip(server.requests, LABELS, strict=True):
        assert newest_label(request.body) == label
        text = json.dumps(request.body["messages"][-1])
        assert [other for other in LABELS if f"'{other}'" in text] == [label]
    assert record["screen"] == {"width": WIDTH, "height": HEIGHT}
    assert [t["label"] for t in record["targets"]] == LABELS
    assert all(t["error_px"] is not None and t["error_px"] <= 2 for t in record["targets"])
    assert record["result"]["verdict"] == "fine"
    assert record["result"]["dialects"]["qwen3-vl"]["verdict"] == "fine"
    sizes = {tuple(t["size"]) for t in record["targets"]}
    assert len(sizes) >= 10  # targets of different sizes


def test_resized_image_pixels_under_a_relative_dialect(
    odd_desktop: TestDesktop, tmp_path: Path
) -> None:
    """(a) Qwen2.5-style pixels under qwen3-vl: off by the resized size over 1000 per axis
    (1.372x across, 0.84x down), and qwen2.5-vl named as the dialect that fits."""
    clicker = TargetClicker("qwen3-vl", tmp_path, convention="qwen25-pixels")
    done, record, _, _ = calibrate(odd_desktop, tmp_path, "qwen3-vl-8b", clicker)
    assert done.returncode == 1, (done.stdout, done.stderr)
    result = record["result"]
    assert result["verdict"] == "scale", done.stdout
    sx, sy = result["scale"]
    assert sx == pytest.approx(SENT_W / 1000, rel=0.02)
    assert sy == pytest.approx(SENT_H / 1000, rel=0.02)
    assert result["dialect_that_fits"] == "qwen2.5-vl"
    assert "pixels of a resized image read as 0-1000: try `--dialect qwen2.5-vl`" in done.stdout


def test_relative_values_under_a_pixel_dialect(odd_desktop: TestDesktop, tmp_path: Path) -> None:
    """(b) 0-1000 answers under qwen2.5-vl: off by 1000 over the resized size per axis, and
    qwen3-vl named as the dialect that fits."""
    clicker = TargetClicker("qwen2.5-vl", tmp_path, convention="relative")
    done, record, _, _ = calibrate(odd_desktop, tmp_path, "qwen2.5-vl-7b", clicker)
    assert done.returncode == 1, (done.stdout, done.stderr)
    result = record["result"]
    assert result["verdict"] == "scale", done.stdout
    sx, sy = result["scale"]
    assert sx == pytest.approx(1000 / SENT_W, rel=0.02)
    assert sy == pytest.approx(1000 / SENT_H, rel=0.02)
    assert result["dialect_that_fits"] == "qwen3-vl"
    assert "try `--dialect qwen3-vl`" in done.stdout


def test_a_constant_offset(odd_desktop: TestDesktop, tmp_path: Path) -> None:
    """(c) Holo answering 40 px right and 25 px up of every target: an offset, measured."""
    clicker = TargetClicker("holo", tmp_path, offset=(40, -25))
    done, record, _, _ = calibrate(odd_desktop, tmp_path, "holo3-1-35b-a3b", clicker)
    assert done.returncode == 1, (done.stdout, done.stderr)
    result = record["result"]
    assert result["verdict"] == "offset", done.stdout
    dx, dy = result["offset"]
    assert dx == pytest.approx(40, rel=0.02)
    assert dy == pytest.approx(-25, rel=0.02)
    assert "off by an offset" in done.stdout


DOCS = Path(__file__).resolve().parents[2] / "docs" / "calibrate.md"


def docs_commands() -> list[list[str]]:
    """Every ``vnc-use calibrate`` command docs/calibrate.md shows (code blocks and inline)."""
    text = DOCS.read_text("utf-8")
    found = re.findall(r"^(?:[A-Z]+=\S+ )?vnc-use calibrate[^\n`]*", text, re.M)
    found += re.findall(r"`(?:[A-Z]+=\S+ )?(vnc-use calibrate[^`]*)`", text)
    commands = []
    for line in found:
        words = shlex.split(line)
        words = words[words.index("vnc-use") + 1 :]
        if "--vnc" in words:  # the test gives its own desktop: the same command
            i = words.index("--vnc")
            words = words[:i] + words[i + 2 :]
        if words not in commands:
            commands.append(words)
    return commands


def _swap(words: list[str], option: str, value: str) -> list[str]:
    if option in words:
        i = words.index(option)
        return [*words[:i], *words[i + 2 :], option, value]
    return [*words, option, value]


def gemini_clicker(runs: Path, labels: list[str]) -> Any:
    """A Gemini stand-in script clicking, on the 0-999 grid, the target each request names."""

    def click(body: Any, index: int) -> GeminiReply:
        newest = json.dumps(body["contents"][-1])
        label = re.search(r"labelled '([A-Za-z0-9]+)'", newest)
        assert label, newest[:300]
        labels.append(label.group(1))
        layout = json.loads(next(runs.glob("*/calibration.json")).read_text("utf-8"))
        target = next(t for t in layout["targets"] if t["label"] == label.group(1))
        x, y = target["center"]
        gx, gy = round(x * 1000 / WIDTH), round(y * 1000 / HEIGHT)
        return GeminiReply.calls(FunctionCallSpec("click_at", x=gx, y=gy))

    return click


@pytest.mark.parametrize("words", docs_commands(), ids=" ".join)
def test_every_command_of_the_docs_is_fine_with_a_right_model(
    words: list[str], odd_desktop: TestDesktop, tmp_path: Path
) -> None:
    """docs/calibrate.md's commands, against a stand-in of their provider answering rightly
    (OpenAI-compatible: in the family's own format; Gemini, the default: on the 0-999 grid):
    fine, exit 0; the Gemini run re-reads no dialect."""
    words = _swap(_swap(words, "--vnc", odd_desktop.server), "--runs-dir", str(tmp_path))
    env = {"DISPLAY": odd_desktop.display}
    labels: list[str] = []
    if "openai-compatible" in words:
        model = words[words.index("--model") + 1]
        dialect = words[words.index("--dialect") + 1] if "--dialect" in words else None
        family = dialect or dialect_for_model(model)
        server: Any = OpenAIStandIn(TargetClicker(family, tmp_path), models=model)
    else:
        server = GeminiStandIn(gemini_clicker(tmp_path, labels))
        env.update(GOOGLE_API_KEY="dummy-key", GEMINI_API_KEY="")
    with server:
        if "openai-compatible" in words:
            words = _swap(words, "--base-url", server.base_url)
        else:
            env["GOOGLE_GEMINI_BASE_URL"] = server.root_url
        done = run_cli(words, odd_desktop, timeout=120, env=env)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "verdict: fine" in done.stdout
    record = json.loads(next(tmp_path.glob("*/calibration.json")).read_text("utf-8"))
    assert all(t["error_px"] <= 2 for t in record["targets"])
    if "openai-compatible" not in words:
        assert labels == LABELS
        assert record["provider"] == "gemini" and record["result"]["dialects"] == {}
