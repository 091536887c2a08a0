"""The run rules (:mod:`vnc_use.runs.rules`) as a table: each verb against a run in each state
gets one outcome, and every executor reads its runs' states into the same rows, so a verb
answers the same way in this process, on LangGraph Server and on the fleet.

The local executor's cells run real runs (the Gemini stand-in through the real SDK, on a
FakeDesktop) brought into each state; the server's and the fleet's cells read the states
their executors see (a thread's status and checkpoint, a row of the fleet's runs table) and
go through the same rules. Exit codes: a refusal is a one-line ConfigError, which every door
turns into exit 2; a verb that runs ends with the run's own status."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vnc_use.errors import ConfigError
from vnc_use.fleet.db import RunRow
from vnc_use.fleet.submit import state_of_row
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.runs import LocalExecutor, RunSpec, rules
from vnc_use.status import RunStatus
from vnc_use.testing import FakeDesktop
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply

from gemini_fixtures import DUMMY_API_KEY, FAST_RETRY

STATES = ("awaiting_approval", "running", "interrupted", "stuck", "cost_limit", "done")
VERBS = ("approve", "deny", "resume", "stop", "result")

TABLE: dict[tuple[str, str], str] = {
    ("approve", "awaiting_approval"): "answer",
    ("deny", "awaiting_approval"): "answer",
    ("resume", "awaiting_approval"): "refused: waits for an approval",
    ("stop", "awaiting_approval"): "refused: is not running",
    ("resume", "running"): "refused: is running already",
    ("stop", "running"): "stop",
    ("resume", "interrupted"): "continue",
    ("stop", "interrupted"): "stop",
    ("resume", "stuck"): "reopen",
    ("resume", "cost_limit"): "reopen",
    ("resume", "done"): "show",
}
"""What each verb does in each state; a cell not named: ``result`` shows, ``approve`` and
``deny`` are refused (not waiting), ``stop`` is refused (not running)."""


def expected(verb: str, state: str) -> str:
    if (verb, state) in TABLE:
        return TABLE[(verb, state)]
    if verb == "result":
        return "show"
    if verb in ("approve", "deny"):
        return "refused: is not waiting for an approval"
    return "refused: is not running"


def outcome(verb: str, state: str) -> str:
    try:
        return rules.check(verb, "t1", state)  # type: ignore[arg-type]
    except ConfigError as exc:
        line = str(exc)
        assert "\n" not in line and line.startswith("run 't1' ")
        return "refused: " + _phrase(line)


def _phrase(line: str) -> str:
    for phrase in (
        "waits for an approval",
        "is not running",
        "is running already",
        "is not waiting for an approval",
    ):
        if phrase in line:
            return phrase
    return line


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("state", STATES)
def test_the_table(verb: str, state: str) -> None:
    assert outcome(verb, state) == expected(verb, state)


def test_every_finished_status_reads_as_finished() -> None:
    for status in ("done", "denied", "step_limit", "timeout", "blocked", "diverged", "error"):
        assert outcome("resume", status) == "show"
        assert outcome("approve", status) == "refused: is not waiting for an approval"


# -- the fleet reads its rows into the same states -------------------------------------------


def _row(status: str) -> RunRow:
    return RunRow("t1", "default", "x", {}, None, None, None, status, 1, None, None)


@pytest.mark.parametrize(
    ("row_status", "state"),
    [
        ("awaiting_approval", "awaiting_approval"),
        ("queued", "running"),
        ("running", "running"),
        ("interrupted", "interrupted"),
        ("error", "interrupted"),  # the next leg's agent sees whether a step is left
        ("stuck", "stuck"),
        ("cost_limit", "cost_limit"),
        ("done", "done"),
        ("denied", "denied"),
    ],
)
def test_the_fleet_reads_its_rows_into_the_rules_states(row_status: str, state: str) -> None:
    assert state_of_row(_row(row_status)) == state


# -- the server reads its threads into the same states ---------------------------------------


@pytest.mark.parametrize(
    ("thread_status", "values_status", "next_nodes", "state"),
    [
        ("interrupted", "running", ["hitl_gate"], "awaiting_approval"),
        ("interrupted", "running", ["propose"], "interrupted"),  # cancelled by a stop
        ("busy", "running", ["act"], "running"),
        ("idle", "running", ["act"], "interrupted"),  # cancelled mid-run, or its desktop lost
        ("idle", "stuck", [], "stuck"),
        ("idle", "cost_limit", [], "cost_limit"),
        ("idle", "done", [], "done"),
    ],
)
def test_the_server_reads_its_threads_into_the_rules_states(
    thread_status: str, values_status: str, next_nodes: list[str], state: str
) -> None:
    from vnc_use.runs.executor import served_state

    thread = {"status": thread_status}
    waits = next_nodes == ["hitl_gate"]
    interrupts = [{"value": {"name": "click_at"}}] if waits else []
    tasks = [{"name": name, "interrupts": interrupts} for name in next_nodes]
    found = {"values": {"status": values_status}, "next": next_nodes, "tasks": tasks}
    assert served_state(thread, found) == state


def test_a_served_run_cancelled_after_its_node_wrote_is_interrupted() -> None:
    """A stop (the server's cancel) that lands once ``act`` has written but before the step is
    committed: no next node, ``act`` still among the tasks (its writes kept). The run has a
    step left: ``interrupted``, and resume goes on (it was ``running``: resume refused)."""
    from vnc_use.runs.executor import served_state

    found = {"values": {}, "next": [], "tasks": [{"name": "act", "error": None}]}
    assert served_state({"status": "interrupted"}, found) == "interrupted"


# -- the local executor: real runs in each state ---------------------------------------------

CLICK = Reply.calls(FunctionCallSpec("click_at", x=500, y=500))
DONE = Reply.text("Done.")
PRICED = {"promptTokenCount": 1_000_000, "candidatesTokenCount": 0, "totalTokenCount": 1_000_000}


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[GeminiStandIn]:
    monkeypatch.setenv("GOOGLE_API_KEY", DUMMY_API_KEY)
    with GeminiStandIn() as server:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.root_url)
        yield server


def _local_run(standin: GeminiStandIn, runs: Path, state: str) -> LocalExecutor:
    """A local run ``t1`` brought into ``state``; its executor, open. After the state is
    reached the model answers "Done." to anything."""
    spec: dict[str, Any] = {"runs_dir": str(runs), "stall_after": 0}
    executor = LocalExecutor(
        runs, desktop=FakeDesktop(640, 400), planner=GeminiComputerUse(**FAST_RETRY)
    )
    reached = {"count": 0}

    def script(body: dict[str, Any], index: int) -> Reply:
        if reached["count"] and index >= reached["count"]:
            return DONE
        if state == "interrupted" and index == 0:
            executor.request_stop()  # the step boundary after this turn: as Ctrl-C does
        if state == "cost_limit":
            return Reply(CLICK.status, {**CLICK.body, "usageMetadata": PRICED})
        return DONE if state == "done" else CLICK

    standin.script(script)
    if state == "awaiting_approval":
        spec["confirm_actions"] = ["click_at"]
    if state == "stuck":
        spec["stall_after"] = 1  # a FakeDesktop's screen never changes
    if state == "cost_limit":
        spec.update(max_cost=1.0, price=[1.0, 0.0])
    result = executor.start(RunSpec(**spec), "click", "t1")
    want = RunStatus.INTERRUPTED if state == "interrupted" else RunStatus(state)
    assert result.status == want, result
    reached["count"] = len(standin.requests)
    return executor


@pytest.mark.parametrize("verb", ["approve", "resume", "stop", "result"])
@pytest.mark.parametrize(
    "state", ["awaiting_approval", "interrupted", "stuck", "cost_limit", "done"]
)
def test_the_local_executor_follows_the_table(
    standin: GeminiStandIn, tmp_path: Path, state: str, verb: str
) -> None:
    """Each verb on a real run in each state: a refusal is the table's one line and asks
    the model nothing; a verb the table accepts does what the table says."""
    runs = tmp_path / "runs"
    with _local_run(standin, runs, state) as executor:
        asked = len(standin.requests)
        want = expected(verb, state)
        if want.startswith("refused: "):
            with pytest.raises(ConfigError) as refused:
                _call(executor, verb)
            assert "refused: " + _phrase(str(refused.value)) == want
            assert "\n" not in str(refused.value)
            assert len(standin.requests) == asked  # nothing ran
            return
        result = _call(executor, verb)
        if want == "show":
            assert result is not None and result.status == executor.result("t1").status
            assert len(standin.requests) == asked
        elif want == "stop":  # recorded for the next leg that runs it (none runs it now)
            assert result is None and len(standin.requests) == asked
        elif want == "reopen" and state == "cost_limit":  # the same cap: stopped at once
            assert result is not None and result.status == RunStatus.COST_LIMIT
            events = (runs / "t1" / "events.jsonl").read_text()
            assert '"after": "cost_limit"' in events  # it was reopened, then stopped again
        else:  # answer, continue, reopen: the run goes on and the model is asked again
            assert result is not None and len(standin.requests) > asked
            assert result.status == RunStatus.DONE, result


def _call(executor: LocalExecutor, verb: str) -> Any:
    if verb == "approve":
        return executor.answer("t1", "approve")
    if verb == "resume":
        return executor.resume("t1")
    if verb == "stop":
        return executor.stop("t1")
    return executor.result("t1")
