"""Stall detection decodes each screenshot once per run (issue 43), not once per comparison:
comparing the newest screenshot with the recent ones used to load and decode both PNGs every
time, the largest part of a step's bookkeeping."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image

from vnc_use.agent.act import _same_screen
from vnc_use.agent.context import AgentContext, AgentSettings
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.record.folder import RunFolder
from vnc_use.store.journal import Journal, SqliteJournalStore
from vnc_use.testing import FakeDesktop

from gemini_fixtures import DUMMY_API_KEY


class CountingFolder(RunFolder):
    """A run folder that counts how often each screenshot is read back."""

    loads: dict[str, int]

    def load_screenshot(self, sha: str) -> bytes:
        self.loads[sha] = self.loads.get(sha, 0) + 1
        return super().load_screenshot(sha)


def _png(colour: tuple[int, int, int], box: tuple[int, int, int, int] | None = None) -> bytes:
    image = Image.new("RGB", (640, 400), (240, 240, 240))
    if box is not None:
        image.paste(colour, box)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def test_each_screenshot_is_decoded_once_for_all_its_comparisons(tmp_path: Path) -> None:
    folder = CountingFolder(tmp_path, "stall")
    folder.loads = {}
    ctx = AgentContext(
        desktop=FakeDesktop(640, 400),
        planner=GeminiComputerUse(api_key=DUMMY_API_KEY),
        run=folder,
        settings=AgentSettings(),
        journal=Journal(SqliteJournalStore(tmp_path / "vnc-use.sqlite"), "stall"),
    )
    plain = folder.put_screenshot(_png((0, 0, 0)))
    marked = folder.put_screenshot(_png((200, 0, 0), (100, 100, 400, 300)))
    again = folder.put_screenshot(_png((0, 0, 0), (0, 0, 1, 1)))  # one pixel: the same screen
    same = _same_screen(ctx)

    assert not same(plain, marked)
    assert same(plain, again)
    assert not same(marked, again)
    assert same(again, plain)

    assert folder.loads == {plain: 1, marked: 1, again: 1}
