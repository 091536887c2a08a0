"""``summary.json``: the run folder keeps what the runs list shows as it writes each event, and
a reader trusts it only while it covers the whole ``events.jsonl`` (see vnc_use.record.tally)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from vnc_use import VncUseAgent
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.record.folder import RunFolder
from vnc_use.record.runs import RunSummary, summarize
from vnc_use.record.tally import EVENTS, SUMMARY, Tally
from vnc_use.testing import FakeDesktop
from vnc_use.testing.gemini_standin import (
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    require_confirmation,
)


def _read_again(run_dir: Path) -> RunSummary | None:
    """The summary as reading every event gives it (no summary.json)."""
    kept = run_dir / SUMMARY
    saved = kept.read_bytes() if kept.exists() else None
    kept.unlink(missing_ok=True)
    try:
        return summarize(run_dir)
    finally:
        if saved is not None:
            kept.write_bytes(saved)


def _a_run(folder: RunFolder, status: str = "error") -> None:
    folder.write_json("run.json", {"thread_id": folder.thread_id, "task": "t", "model": "m"})
    folder.event("run_started", task="t")
    folder.event("model_request", n=1)
    folder.event("model_response", n=1, run_cost_usd=0.25)
    folder.event("action", step=1, name="click_at")
    folder.event("action", step=2, name="type_text_at")
    folder.event("run_ended", status=status, steps=2, final_text="", error="boom")


def test_the_run_folder_keeps_a_summary_of_its_events_as_it_writes_them(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path, "r1")
    _a_run(folder)
    kept = json.loads((folder.path / SUMMARY).read_text())
    assert kept["events_bytes"] == (folder.path / EVENTS).stat().st_size
    assert (kept["status"], kept["steps"], kept["cost_usd"], kept["error"]) == (
        "error",
        2,
        0.25,
        "boom",
    )
    summary = summarize(folder.path)
    assert summary is not None and summary == _read_again(folder.path)
    assert (summary.status, summary.steps, summary.cost_usd, summary.priced) == (
        "error",
        2,
        0.25,
        True,
    )


def test_a_current_summary_is_what_the_list_reads(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path, "r1")
    _a_run(folder)
    # the events are not read while the summary covers them all (here it says otherwise, to
    # tell which one was read)
    tally = Tally.of_file(folder.path)
    tally.status = "done"
    tally.write(folder.path)
    summary = summarize(folder.path)
    assert summary is not None and summary.status == "done"


def test_events_the_summary_does_not_cover_are_read(tmp_path: Path) -> None:
    """An older version resumed the run (it appends without keeping the summary): the list
    reads the events, and the next writer that keeps it takes them in."""
    folder = RunFolder(tmp_path, "r1")
    _a_run(folder)
    with (folder.path / EVENTS).open("a") as fh:
        fh.write(json.dumps({"ts": 1_800_000_000, "event": "resumed"}) + "\n")
    summary = summarize(folder.path)
    assert summary is not None and summary.status == "unfinished"
    again = RunFolder(tmp_path, "r1")  # a resume by this version, in a new process
    again.event("action", step=3, name="click_at")
    again.event("run_ended", status="done", steps=3)
    kept = json.loads((folder.path / SUMMARY).read_text())
    assert kept["events_bytes"] == (folder.path / EVENTS).stat().st_size
    summary = summarize(folder.path)
    assert summary is not None and (summary.status, summary.steps) == ("done", 3)
    assert summary == _read_again(folder.path)


def test_two_writers_of_one_run_leave_a_list_that_is_right(tmp_path: Path) -> None:
    """The agent and an ``approve`` from another terminal write the same run's events."""
    one, two = RunFolder(tmp_path, "r1"), RunFolder(tmp_path, "r1")
    one.write_json("run.json", {"thread_id": "r1", "task": "t"})
    one.event("run_started", task="t")
    one.event("run_paused", status="awaiting_approval", steps=1)
    two.event("approved", step=1)
    one.event("action", step=2, name="click_at")
    summary = summarize(one.path)
    assert summary is not None and (summary.status, summary.steps) == ("unfinished", 2)
    two.event("run_ended", status="done", steps=2)
    summary = summarize(one.path)
    assert summary is not None and (summary.status, summary.steps) == ("done", 2)
    assert summary == _read_again(one.path)


def test_a_broken_or_foreign_summary_is_not_trusted(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path, "r1")
    _a_run(folder, status="denied")
    for text in ("{not json", "[]", json.dumps({"version": 99, "status": "done"})):
        (folder.path / SUMMARY).write_text(text)
        summary = summarize(folder.path)
        assert summary is not None and summary.status == "denied"


# -- summary.json once a step (issue 43) ------------------------------------------------------


class _Renames:
    """Counts the renames onto each run's ``summary.json`` (how :meth:`Tally.write` writes
    it) and onto anything else, by wrapping the real ``os.replace``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.summaries = 0
        real = os.replace

        def counting(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
            if Path(dst).name == SUMMARY:
                self.summaries += 1
            real(src, dst, *args, **kwargs)

        monkeypatch.setattr(os, "replace", counting)


def _current(run_dir: Path) -> dict[str, Any]:
    kept: dict[str, Any] = json.loads((run_dir / SUMMARY).read_text())
    assert kept["events_bytes"] == (run_dir / EVENTS).stat().st_size
    return kept


def test_a_steps_events_wait_for_keep_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    renames = _Renames(monkeypatch)
    folder = RunFolder(tmp_path, "r1")
    folder.event("run_started", task="t")  # a change of status: written at once
    assert renames.summaries == 1
    for step in (1, 2, 3):
        folder.event("model_request", n=step)
        folder.event("model_response", n=step, run_cost_usd=0.1 * step)
        folder.event("action", step=step, name="click_at")
        folder.event("screenshot", screenshot="0" * 64)
    assert renames.summaries == 1
    summary = summarize(folder.path)  # the file is behind: the events are read
    assert summary is not None and summary.steps == 3 and summary == _read_again(folder.path)
    folder.keep_summary()
    assert renames.summaries == 2 and _current(folder.path)["steps"] == 3
    folder.keep_summary()  # nothing new: not written again
    assert renames.summaries == 2
    folder.event("run_paused", status="awaiting_approval", steps=3)
    assert renames.summaries == 3 and _current(folder.path)["status"] == "awaiting_approval"


def _run_on_fake(tmp_path: Path, task: str, thread_id: str) -> Any:
    """The agent's run of ``task`` on a fake desktop, the Gemini stand-in answering."""
    planner = GeminiComputerUse(retry_initial_delay=0.01, retry_max_delay=0.05)
    with VncUseAgent(
        desktop=FakeDesktop(640, 400), planner=planner, runs_dir=tmp_path / "runs"
    ) as agent:
        return agent.run(task=task, thread_id=thread_id)


def test_a_run_of_many_steps_writes_its_summary_once_a_step_and_ends_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gemini: GeminiStandIn
) -> None:
    steps = 8
    gemini.script(
        *[Reply.calls(FunctionCallSpec("click_at", x=100 + 50 * i, y=300)) for i in range(steps)],
        Reply.text("done"),
    )
    renames = _Renames(monkeypatch)
    result = _run_on_fake(tmp_path, "click along", "many")
    assert result.status == "done", result.error
    run_dir = Path(result.run_dir)
    events = (run_dir / EVENTS).read_text().splitlines()
    assert len(events) > 4 * steps  # several events a step ...
    # ... and the summary about once a step (the model's calls), plus the run's start and end
    assert renames.summaries <= steps + 4, (renames.summaries, len(events))
    kept = _current(run_dir)
    assert (kept["status"], kept["steps"]) == ("done", steps)


def test_a_paused_run_leaves_a_current_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gemini: GeminiStandIn
) -> None:
    gemini.script(
        Reply.calls(FunctionCallSpec("click_at", x=100, y=100)),
        Reply.calls(
            FunctionCallSpec(
                "click_at", x=250, y=250, safety_decision=require_confirmation("Accept?")
            )
        ),
    )
    paused = _run_on_fake(tmp_path, "accept", "paused")
    assert paused.status == "awaiting_approval", paused.error
    kept = _current(Path(paused.run_dir))
    assert (kept["status"], kept["steps"]) == ("awaiting_approval", 1)
