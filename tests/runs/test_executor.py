"""The executor in this process (:class:`~vnc_use.runs.executor.LocalExecutor`): its verbs
over real runs (the Gemini stand-in through the real SDK, on a FakeDesktop), a stop asked for
from another executor of the same runs folder, the run rules applied to each verb."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vnc_use.errors import ConfigError
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.runs import Executor, LocalExecutor, RunSpec
from vnc_use.status import RunStatus
from vnc_use.testing import FakeDesktop
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply

from gemini_fixtures import DUMMY_API_KEY, FAST_RETRY

CLICK = Reply.calls(FunctionCallSpec("click_at", x=500, y=500))
DONE = Reply.text("Done.")


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[GeminiStandIn]:
    monkeypatch.setenv("GOOGLE_API_KEY", DUMMY_API_KEY)
    with GeminiStandIn() as server:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.root_url)
        yield server


def _executor(runs: Path, desktop: FakeDesktop | None = None) -> LocalExecutor:
    return LocalExecutor(
        runs,
        desktop=desktop or FakeDesktop(640, 400),
        planner=GeminiComputerUse(**FAST_RETRY),
    )


def _events(runs: Path, tid: str) -> list[dict[str, Any]]:
    path = runs / tid / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _wait_for(condition: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_every_executor_class_answers_the_protocol() -> None:
    from vnc_use.fleet.executor import FleetExecutor
    from vnc_use.runs import ServedExecutor

    assert isinstance(LocalExecutor(), Executor)
    assert isinstance(ServedExecutor("http://127.0.0.1:9"), Executor)
    assert isinstance(FleetExecutor("postgresql://ann@127.0.0.1:1/fleet"), Executor)


def test_resume_of_a_run_waiting_for_approval_is_refused_and_it_stays_waiting(
    standin: GeminiStandIn, tmp_path: Path
) -> None:
    """One behaviour everywhere: resume refuses a run that waits for a person, in one line
    (it used to be kept pending locally, refused served and on the fleet)."""
    standin.script([CLICK, DONE])
    runs = tmp_path / "runs"
    spec = RunSpec(confirm_actions=["click_at"], runs_dir=str(runs))
    with _executor(runs) as executor:
        first = executor.start(spec, "click", "waits")
        assert first.status == RunStatus.AWAITING_APPROVAL
        with pytest.raises(ConfigError, match="waits for an approval") as refused:
            executor.resume("waits")
        assert "\n" not in str(refused.value)
        with pytest.raises(ConfigError, match="nothing to stop"):
            executor.stop("waits")
        assert len(standin.requests) == 1  # the refusals asked the model nothing
        # read from a new executor: no desktop, no model needed to see how a run stands
        reader = LocalExecutor(runs)
        assert reader.result("waits").status == RunStatus.AWAITING_APPROVAL
        done = executor.answer("waits", "approve")
        assert done.status == RunStatus.DONE
        with pytest.raises(ConfigError, match="not waiting for an approval"):
            executor.answer("waits", "deny")


def test_a_deny_keeps_the_reason_in_the_events(standin: GeminiStandIn, tmp_path: Path) -> None:
    standin.script([CLICK])
    runs = tmp_path / "runs"
    spec = RunSpec(confirm_actions=["click_at"], runs_dir=str(runs))
    with _executor(runs) as executor:
        executor.start(spec, "click", "denied")
        result = executor.answer("denied", "deny", reason="not on this machine")
    assert result.status == RunStatus.DENIED
    denied = [e for e in _events(runs, "denied") if e["event"] == "denied"]
    assert denied and denied[-1]["reason"] == "not on this machine"


def test_a_stop_asked_from_another_executor_ends_the_run_interrupted_and_resume_goes_on(
    standin: GeminiStandIn, tmp_path: Path
) -> None:
    """``stop`` from another executor of the same runs folder (as from another process):
    the run stops at its next step boundary, ``interrupted``, and resumes from there."""
    thinking, release = threading.Event(), threading.Event()

    def script(body: dict[str, Any], index: int) -> Reply:
        if index == 1:  # the second turn: hold the model until the stop was seen
            thinking.set()
            release.wait(60)
        return CLICK if index < 2 else DONE

    standin.script(script)
    runs = tmp_path / "runs"
    desktop = FakeDesktop(640, 400)
    spec = RunSpec(runs_dir=str(runs))
    outcome: dict[str, Any] = {}
    with _executor(runs, desktop) as executor:
        worker = threading.Thread(
            target=lambda: outcome.update(result=executor.start(spec, "click twice", "stopped"))
        )
        worker.start()
        try:
            assert thinking.wait(60), "the run never asked the model a second time"
            LocalExecutor(runs).stop("stopped")  # nothing open here but the storage
            _wait_for(
                lambda: any(e["event"] == "stop_requested" for e in _events(runs, "stopped")),
                "the run to see the stop",
            )
        finally:
            release.set()
            worker.join(60)
        stopped = outcome["result"]
        assert stopped.status == RunStatus.INTERRUPTED, stopped
        clicks = len(desktop.events_of("click"))
        assert clicks == 1  # the second turn's click waits for the resume
        with pytest.raises(ConfigError, match="no run with thread id 'nope'"):
            LocalExecutor(runs).stop("nope")
        resumed = executor.resume("stopped")
    assert resumed.status == RunStatus.DONE
    assert len(desktop.events_of("click")) == 2
