"""``vnc-use stop ID``: a stop at the next step boundary, asked for from another process; the
run rules refuse a run that is not running, in one line (exit 2)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.runs import LocalExecutor, RunSpec
from vnc_use.status import RunStatus
from vnc_use.store.storage import open_storage
from vnc_use.testing import FakeDesktop
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply

from cli_tools import run_cli
from gemini_fixtures import DUMMY_API_KEY, FAST_RETRY

CLICK = Reply.calls(FunctionCallSpec("click_at", x=500, y=500))


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[GeminiStandIn]:
    monkeypatch.setenv("GOOGLE_API_KEY", DUMMY_API_KEY)
    with GeminiStandIn() as server:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.root_url)
        yield server


def _stop(runs: Path, tid: str) -> Any:
    return run_cli(["stop", tid, "--runs-dir", str(runs)], env={"VNC_USE_DATABASE_URL": ""})


def test_stop_refuses_a_run_that_is_not_running_and_records_one_for_a_run_that_is(
    standin: GeminiStandIn, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    executor = LocalExecutor(
        runs, desktop=FakeDesktop(640, 400), planner=GeminiComputerUse(**FAST_RETRY)
    )

    def script(body: dict[str, Any], index: int) -> Reply:
        if index == 0:
            executor.request_stop()  # the run stops mid-way, as Ctrl-C does
        return CLICK if index < 2 else Reply.text("Done.")

    standin.script(script)
    with executor:
        waiting = executor.start(
            RunSpec(runs_dir=str(runs), confirm_actions=["drag_and_drop"]), "click", "mid"
        )
        assert waiting.status == RunStatus.INTERRUPTED
        refused = _stop(runs, "nope")
        assert refused.returncode == 2 and "no run with thread id 'nope'" in refused.stderr
        asked = _stop(runs, "mid")
        assert asked.returncode == 0, asked.stdout + asked.stderr
        assert "stop requested: run mid" in asked.stdout
        storage = open_storage(None, runs)
        try:
            assert storage.journal("mid").stop_requests() == 1
        finally:
            storage.close()
        # a request made before a leg began does not stop it: the resume runs to the end
        done = executor.resume("mid")
        assert done.status == RunStatus.DONE, done
        finished = _stop(runs, "mid")
        assert finished.returncode == 2, finished.stdout + finished.stderr
        lines = finished.stderr.strip().splitlines()
        assert lines == ["vnc-use: run 'mid' is not running (done): nothing to stop"]
    events = [json.loads(x) for x in (runs / "mid" / "events.jsonl").read_text().splitlines()]
    assert not any(e["event"] == "stop_requested" for e in events)
