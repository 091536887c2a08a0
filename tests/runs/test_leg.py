"""``run.json`` has one writer (:func:`vnc_use.runs.leg.run_record_of`): a local run, an MCP
tool session (here), a served run (``tests/agent/test_server.py``) and a fleet run
(``tests/e2e/test_fleet.py``) write the same keys, ``kind`` saying which."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from vnc_use.desktops.target import ReachedDesktop
from vnc_use.mcp_server.session import DesktopSession
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.record.runs import list_runs
from vnc_use.runs import LocalExecutor, RunSpec
from vnc_use.runs.leg import RECORD_KEYS
from vnc_use.testing import FakeDesktop
from vnc_use.testing.gemini_standin import GeminiStandIn, Reply

from gemini_fixtures import DUMMY_API_KEY, FAST_RETRY


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[GeminiStandIn]:
    monkeypatch.setenv("GOOGLE_API_KEY", DUMMY_API_KEY)
    with GeminiStandIn() as server:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.root_url)
        yield server


def test_a_local_run_and_an_mcp_session_write_the_same_keys(
    standin: GeminiStandIn, tmp_path: Path
) -> None:
    standin.script([Reply.text("Done.")])
    runs = tmp_path / "runs"
    spec = RunSpec(runs_dir=str(runs), step_limit=7, confirm_actions=["type_text_at"])
    with LocalExecutor(
        runs, desktop=FakeDesktop(640, 400), planner=GeminiComputerUse(**FAST_RETRY)
    ) as executor:
        executor.start(spec, "look", "local-1")
    local = json.loads((runs / "local-1" / "run.json").read_text())
    assert set(local) == set(RECORD_KEYS) and local["kind"] == "local"
    # the settings given, and the ones resolved: the screenshot window is the planner's (3)
    assert local["step_limit"] == 7 and local["confirm_actions"] == ["type_text_at"]
    assert local["keep_screenshots"] == 3 and local["desktop"] == "FakeDesktop"

    session = DesktopSession(
        ReachedDesktop(server="127.0.0.1::5999"), runs, connect=lambda: FakeDesktop(64, 48)
    )
    session.screenshot()
    session.close()
    mcp = json.loads((runs / session.thread_id / "run.json").read_text())
    assert set(mcp) == set(RECORD_KEYS) and mcp["kind"] == "mcp-session"
    assert mcp["vnc_server"] == "127.0.0.1::5999" and mcp["model"] is None
    # and `vnc-use runs` reads both alike
    rows = {r.thread_id: r for r in list_runs(runs)}
    assert rows["local-1"].status == "done" and rows[session.thread_id].status == "done"


def test_recordable_is_a_capability_of_the_desktop() -> None:
    """What a leg records video from is named in the Desktop protocol: a VNC connection is
    Recordable, a FakeDesktop is not (its runs have no video, and import no VNC code)."""
    from vnc_use.desktops.base import Recordable, recordable
    from vnc_use.desktops.vnc import VNCController

    assert recordable(FakeDesktop(64, 48)) is None
    controller = VNCController()
    assert isinstance(controller, Recordable) and recordable(controller) is controller
