"""The journal's record of an action's completion is written while the screen settles, not
after it (issue 43), and stays before the step's checkpoint.

The probe's ticker (F9) changes a 240x40 box every 25 ms: the screen never settles, so the
step that switches it on waits the whole ``settle_max_s`` (1 s). The action's ``done`` record
must be written near the start of that wait (as soon as the server has handled the key),
well before the screenshot that ends it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vnc_use import VncUseAgent
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.store.journal import call_key
from vnc_use.store.storage import open_storage
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.probe import ProbeLog

from gemini_fixtures import DUMMY_API_KEY, FAST_RETRY

pytestmark = pytest.mark.desktop


@pytest.fixture(scope="module")
def ticker_desktop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestDesktop]:
    with TestDesktop(800, 600) as desk:
        out = tmp_path_factory.mktemp("ticker") / "probe.jsonl"
        desk.launch([sys.executable, "-m", "vnc_use.testing.probe", "--out", str(out), "--ticker"])
        ProbeLog(out).wait_type("ready", timeout=20)
        yield desk


def test_the_done_record_is_written_during_the_settle_wait(
    ticker_desktop: TestDesktop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", DUMMY_API_KEY)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    runs = tmp_path / "runs"
    with GeminiStandIn() as api:
        api.script(
            Reply.calls(FunctionCallSpec("key_combination", keys="F9")),  # the ticker: on
            Reply.calls(FunctionCallSpec("key_combination", keys="F9")),  # and off again
            Reply.text("done"),
        )
        with VncUseAgent(
            vnc_server=ticker_desktop.server,
            vnc_password=ticker_desktop.password,
            runs_dir=runs,
            planner=GeminiComputerUse(**FAST_RETRY),
            video=False,
        ) as agent:
            result = agent.run(task="Switch the ticker on and off", thread_id="overlap")
    assert result.status == "done", result.error

    journal = open_storage(None, runs).journal("overlap")
    (done,) = [r for r in journal.records(call_key(1, 0)) if r["state"] == "done"]
    events = result_events(runs)
    (step1,) = [e for e in events if e["event"] == "action" and e["step"] == 1]
    # the screenshot after step 1: the ticker ran the whole wait
    (first,) = [
        e for e in events if e["event"] == "screenshot" and e["screenshot"] == step1["screenshot"]
    ]
    assert not first["settled"] and first["waited_ms"] >= 900
    # written as soon as the key was handled, not once the second-long wait had ended
    assert done["ts"] < first["ts"] - 0.5, (done["ts"], first["ts"])


def result_events(runs: Path) -> list[dict[str, Any]]:
    import json

    lines = (runs / "overlap" / "events.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines]
