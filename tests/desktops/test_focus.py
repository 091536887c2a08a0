"""Keys that follow a click reach the window the click focused (issue 15, item 1).

A window manager (openbox, the local desktop's) moves the keyboard focus only when it has
seen the click. Sent in one burst with the click, the keys reach the window that had the focus
before. This desktop runs openbox and two probe windows, A and B: with B focused, a model's
``type_text_at`` into A must put its text and Enter into A, every time.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from vnc_use.actions import GEMINI_25_TABLE, ValidatedAction
from vnc_use.actions.execute import ActionContext, execute
from vnc_use.desktops.vnc import VNCController
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.probe import ProbeLog

pytestmark = pytest.mark.desktop

WIDTH, HEIGHT = 1024, 768
RUNS = 20


@dataclass
class Window:
    """One probe window: its log and where its entry's centre is on the screen."""

    log: ProbeLog
    entry: tuple[int, int]

    def focused(self) -> bool:
        focus = self.log.events("focus")
        return bool(focus) and bool(focus[-1]["on"])


def _launch_window(desk: TestDesktop, folder: Path, name: str, geometry: str) -> Window:
    out = folder / f"{name}.jsonl"
    desk.launch(
        [sys.executable, "-m", "vnc_use.testing.probe", "--out", str(out), "--window", geometry]
    )
    log = ProbeLog(out)
    ready = log.wait_type("ready", timeout=20)
    (ox, oy), (x, y, w, h) = ready["origin"], ready["entry"]
    return Window(log, (ox + x + w // 2, oy + y + h // 2))


def _wait_until(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout:g} s")
        time.sleep(0.01)


@pytest.fixture(scope="module")
def two_windows(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[TestDesktop, Window, Window]]:
    folder = tmp_path_factory.mktemp("focus")
    with TestDesktop(WIDTH, HEIGHT) as desk:
        openbox = shutil.which("openbox")
        assert openbox, "openbox is missing: run ./scripts/install.sh"
        desk.launch([openbox, "--sm-disable"])

        def wm_ready() -> bool:
            out = subprocess.run(
                ["xprop", "-root", "_NET_SUPPORTING_WM_CHECK"],
                env=desk.env,
                capture_output=True,
                text=True,
                check=False,
            ).stdout
            return "window id" in out

        _wait_until(wm_ready, "openbox's start")
        a = _launch_window(desk, folder, "a", "460x300+20+60")
        b = _launch_window(desk, folder, "b", "460x300+540+60")
        yield desk, a, b


def _type_text_at(text: str, x: int, y: int) -> ValidatedAction:
    action = GEMINI_25_TABLE.validate(
        "type_text_at", {"x": x, "y": y, "text": text, "press_enter": True}
    )
    assert isinstance(action, ValidatedAction), action
    return action


def test_type_text_at_reaches_the_clicked_window_not_the_focused_one(
    two_windows: tuple[TestDesktop, Window, Window],
) -> None:
    desk, a, b = two_windows
    wrong: list[str] = []
    with VNCController(timeout=10.0).connect(desk.server, desk.password) as vnc:
        ctx = ActionContext(hands=vnc, width=WIDTH, height=HEIGHT)
        for run in range(RUNS):
            # B has the focus (clicked, and openbox has handed it the focus).
            vnc.click(*b.entry)
            _wait_until(b.focused, "the focus on window B")
            a.log.clear()
            b.log.clear()
            text = f"run{run}"
            gx, gy = (
                round(v * 1000 / size) for v, size in zip(a.entry, (WIDTH, HEIGHT), strict=True)
            )
            execute(_type_text_at(text, gx, gy), ctx)
            # Either window may have got the text: wait for one of them to see the Enter.
            _wait_until(
                lambda: bool(a.log.events("submit") or b.log.events("submit")),
                f"the Enter of run {run}",
            )
            submitted = [e["text"] for e in a.log.events("submit")]
            if submitted != [text] or b.log.events("key"):
                wrong.append(f"run {run}: A got {submitted}, B got {len(b.log.events('key'))} keys")
    assert wrong == [], f"{len(wrong)}/{RUNS} runs typed into the wrong window: {wrong}"
