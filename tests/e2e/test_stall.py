"""Stall detection on a real desktop: the probe app with its static canvas, counter, long list
and slow-drawing bar, driven by the Gemini stand-in's scripted model.

A model clicking one point of a static canvas is told so and ends ``stuck`` (exit 8); typing,
scrolling, waiting for a slow draw and clicking a counter change the screen and end ``done``;
``--stall-after 0`` restores the old behaviour. One desktop serves the module.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vnc_use import VncUseAgent
from vnc_use.agent import stall
from vnc_use.agent.context import AgentSettings
from vnc_use.cli import main
from vnc_use.desktops.vnc import VNCController
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.record.report import load_run
from vnc_use.status import RunStatus
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.probe import BAR_SEGMENTS, ProbeLog

from desktop_fixtures import Probe
from doc_pages import page, shell_commands
from gemini_fixtures import DUMMY_API_KEY, FAST_RETRY

pytestmark = pytest.mark.desktop

WIDTH, HEIGHT = 1024, 768
CANVAS = (900, 200)
"""A point of the static canvas (no widget there, nothing drawn on a click)."""


@pytest.fixture(scope="module")
def stall_probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Probe]:
    """The probe with its stall-detection widgets, on a desktop of its own."""
    log_path = str(tmp_path_factory.mktemp("stall-probe") / "events.jsonl")
    argv = [sys.executable, "-m", "vnc_use.testing.probe", "--out", log_path, "--static"]
    argv += ["--counter", "--list", "1000", "--slow-draw", "700"]
    with TestDesktop(WIDTH, HEIGHT) as desk:
        process = desk.launch(argv)
        log = ProbeLog(log_path)
        ready = log.wait_type("ready", timeout=20)
        yield Probe(desk, process, log, ready)


@pytest.fixture
def probe(stall_probe: Probe) -> Probe:
    assert stall_probe.process.poll() is None, "the probe app exited"
    stall_probe.log.clear()
    return stall_probe


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[GeminiStandIn]:
    monkeypatch.setenv("GOOGLE_API_KEY", DUMMY_API_KEY)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    with GeminiStandIn() as server:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.root_url)
        yield server


def grid(x: int, y: int) -> tuple[int, int]:
    return round(x * 1000 / WIDTH), round(y * 1000 / HEIGHT)


def centre(box: list[int]) -> tuple[int, int]:
    return (box[0] + box[2]) // 2, (box[1] + box[3]) // 2


def calls(name: str, times: int, **args: Any) -> list[Reply]:
    return [Reply.calls(FunctionCallSpec(name, **args)) for _ in range(times)]


def park_pointer(probe: Probe, x: int, y: int) -> None:
    """Put the mouse pointer where the model will click: the pointer's own move (drawn in
    the screenshots) is then no change of the screen the test is about."""
    with VNCController(timeout=10.0, connect_timeout=5.0).connect(
        probe.desktop.server, probe.desktop.password
    ) as vnc:
        vnc.move(x, y)
        vnc.round_trip()


def notes(standin: GeminiStandIn) -> list[str | None]:
    """The note of every function response the model got, in order."""
    return [r["response"].get("note") for r in standin.function_responses()]


def run(probe: Probe, tmp_path: Path, task: str, **kwargs: Any) -> Any:
    with VncUseAgent(
        vnc_server=probe.desktop.server,
        vnc_password=probe.desktop.password,
        runs_dir=tmp_path / "runs",
        planner=GeminiComputerUse(**FAST_RETRY),
        **kwargs,
    ) as agent:
        return agent.run(task=task, thread_id="t")


def test_clicking_a_static_canvas_is_noted_then_stuck_exit_8_and_resumable(
    probe: Probe, standin: GeminiStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    x, y = grid(*CANVAS)
    standin.script([*calls("click_at", 10, x=x, y=y), Reply.text("Done.")])
    park_pointer(probe, *CANVAS)
    monkeypatch.setenv("VNC_PASSWORD", probe.desktop.password)
    runs = str(tmp_path / "runs")
    common = ["--runs-dir", runs, "--vnc", probe.desktop.server, "--quiet"]
    code = main(["run", "--task", "Click the canvas", "--thread-id", "s", *common])
    assert code == 8
    got = notes(standin)
    assert got[: stall.DEFAULT_STALL_AFTER - 1] == [None] * (stall.DEFAULT_STALL_AFTER - 1)
    first = got.index(next(n for n in got if n))
    assert first <= 4  # no later than the 5th function response
    assert "click_at" in str(got[first]) and "changed nothing" in str(got[first])
    presses = probe.log.events("press")
    assert len(presses) <= stall.DEFAULT_STALL_AFTER + 1  # what the stall limit allows
    view = load_run(Path(runs) / "s")
    assert view.status == RunStatus.STUCK
    assert [s.step for s in view.steps if s.stall] == [stall.DEFAULT_STALL_AFTER]
    assert 'data-stall="1"' in (Path(runs) / "s" / "report.html").read_text()
    # a person resumes: the model gets another chance, and finishes
    standin.script(Reply.text("The canvas does not react to clicks."))
    assert main(["resume", "s", *common]) == 0


@pytest.fixture(scope="module")
def caret_probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Probe]:
    """The static probe with its text entry focused and its cursor blinking (a caret on a
    real desktop: a terminal, a search box), on a desktop of its own."""
    log_path = str(tmp_path_factory.mktemp("caret-probe") / "events.jsonl")
    argv = [sys.executable, "-m", "vnc_use.testing.probe", "--out", log_path, "--static"]
    argv += ["--blink", "300"]
    with TestDesktop(WIDTH, HEIGHT) as desk:
        process = desk.launch(argv)
        log = ProbeLog(log_path)
        ready = log.wait_type("ready", timeout=20)
        yield Probe(desk, process, log, ready)


def test_a_blinking_caret_does_not_hide_a_stall(
    caret_probe: Probe, standin: GeminiStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38 item 3: twelve clicks on one point of the static canvas while the focused
    entry's caret blinks: its few cells toggling on their own are not the clicks' effect, so
    the note arrives by the 5th function response (it came in the 7th) and the run ends
    stuck."""
    probe = caret_probe
    x, y = grid(*CANVAS)
    standin.script([*calls("click_at", 12, x=x, y=y), Reply.text("Done.")])
    park_pointer(probe, *CANVAS)
    monkeypatch.setenv("VNC_PASSWORD", probe.desktop.password)
    runs = str(tmp_path / "runs")
    common = ["--runs-dir", runs, "--vnc", probe.desktop.server, "--quiet", "--no-video"]
    task = ["--task", "Click the canvas", "--thread-id", "caret"]
    code = main(["run", *task, "--stall-after", "4", *common])
    got = notes(standin)
    assert any(got), got
    first = got.index(next(n for n in got if n))
    # by the 5th function response (the bound); in fact with the 4th, as on a screen
    # without a caret: its toggling never counted
    assert first == 3, got
    assert "changed nothing" in str(got[first])
    assert code == 8
    view = load_run(Path(runs) / "caret")
    shots = {s.after for s in view.steps} | {s.before for s in view.steps}
    assert len(shots) >= 2, "the caret never blinked between two screenshots: nothing tested"


def test_typing_one_letter_at_a_time_beside_the_caret_is_no_stall(
    caret_probe: Probe, standin: GeminiStandIn, tmp_path: Path
) -> None:
    """A letter is about as small as the caret, and lands next to it: a keyboard action's
    change is its effect wherever it is."""
    x, y, w, h = caret_probe.ready["entry"]
    gx, gy = grid(x + w // 2, y + h // 2)
    letter = {"x": gx, "y": gy, "press_enter": False, "clear_before_typing": False}
    standin.script([*calls("type_text_at", 6, text="l", **letter), Reply.text("Typed.")])
    result = run(caret_probe, tmp_path, "Type six letters")
    assert result.status == RunStatus.DONE, result.error
    assert not any(notes(standin))
    assert caret_probe.log.events("text")[-1]["text"].endswith("llllll")


def test_looking_and_waiting_for_a_slow_page_is_no_loop(caret_probe: Probe, tmp_path: Path) -> None:
    """Issue 38 item 3: a Claude run that focuses a search box, then takes a screenshot and
    waits, five times in a row, was told it repeats itself and stopped ``stuck``: actions that
    only look never count."""
    from vnc_use.providers.anthropic.planner import AnthropicPlanner
    from vnc_use.testing.anthropic_standin import Action, AnthropicStandIn
    from vnc_use.testing.anthropic_standin import Reply as ClaudeReply

    probe = caret_probe
    x, y, w, h = probe.ready["entry"]
    focus = ClaudeReply.act(Action("left_click", {"coordinate": [x + w // 2, y + h // 2]}))
    look = [
        ClaudeReply.act(Action("screenshot")),
        ClaudeReply.act(Action("wait", {"duration": 1})),
    ]
    script = [focus, *look * 5, ClaudeReply.done("The page is still loading.")]
    with AnthropicStandIn(script, expected_api_key="sk-ant-test") as server:
        planner = AnthropicPlanner(
            "claude-opus-4-8", api_key="sk-ant-test", base_url=server.base_url, max_retries=0
        )
        with VncUseAgent(
            vnc_server=probe.desktop.server,
            vnc_password=probe.desktop.password,
            runs_dir=tmp_path / "runs",
            planner=planner,
            video=False,
        ) as agent:
            result = agent.run(task="Search for the news", thread_id="look")
        texts = [json.dumps(r.tool_results()) for r in server.requests[1:]]
    assert result.status == RunStatus.DONE, result.error
    assert result.steps == 11 and result.final_text == "The page is still loading."
    assert not [t for t in texts if "changed nothing" in t or "repeated the same" in t]


def test_stall_after_0_restores_the_old_behaviour(
    probe: Probe, standin: GeminiStandIn, tmp_path: Path
) -> None:
    x, y = grid(*CANVAS)
    standin.script([*calls("click_at", 10, x=x, y=y), Reply.text("Done.")])
    result = run(probe, tmp_path, "Click the canvas", stall_after=0)
    assert result.status == RunStatus.DONE, result.error
    assert len(probe.log.events("press")) == 10
    assert not any(notes(standin))


def test_typing_into_the_entry_is_no_stall(
    probe: Probe, standin: GeminiStandIn, tmp_path: Path
) -> None:
    x, y, w, h = probe.ready["entry"]
    gx, gy = grid(x + w // 2, y + h // 2)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    standin.script(
        [
            *[Reply.calls(FunctionCallSpec("type_text_at", x=gx, y=gy, text=w)) for w in words],
            Reply.text("Typed."),
        ]
    )
    result = run(probe, tmp_path, "Type six words")
    assert result.status == RunStatus.DONE, result.error
    assert result.steps == len(words) and not any(notes(standin))


def test_scrolling_a_long_list_is_no_stall(
    probe: Probe, standin: GeminiStandIn, tmp_path: Path
) -> None:
    x, y = grid(*centre(probe.ready["list"]))
    args = {"x": x, "y": y, "direction": "down", "magnitude": 300}
    standin.script([*calls("scroll_at", 8, **args), Reply.text("Scrolled.")])
    result = run(probe, tmp_path, "Scroll the list")
    assert result.status == RunStatus.DONE, result.error
    assert len(probe.log.events("wheel")) >= 8 and not any(notes(standin))


def test_waiting_while_the_probe_draws_slowly_is_no_stall(
    probe: Probe, standin: GeminiStandIn, tmp_path: Path
) -> None:
    standin.script(
        [
            Reply.calls(FunctionCallSpec("key_combination", keys="f8")),
            *calls("wait_5_seconds", 6),
            Reply.text("Loaded."),
        ]
    )
    # a wait of 1 s against a bar that grows every 0.7 s: every wait sees a new segment
    result = run(probe, tmp_path, "Start the load and wait", settings=AgentSettings(wait_seconds=1))
    assert result.status == RunStatus.DONE, result.error
    assert not any(notes(standin))
    assert probe.log.events("bar")[-1]["segments"] <= BAR_SEGMENTS


def test_clicking_a_counter_that_changes_is_no_stall(
    probe: Probe, standin: GeminiStandIn, tmp_path: Path
) -> None:
    x, y = grid(*centre(probe.ready["counter"]))
    standin.script([*calls("click_at", 10, x=x, y=y), Reply.text("Counted.")])
    result = run(probe, tmp_path, "Click the counter ten times")
    assert result.status == RunStatus.DONE, result.error
    assert len(probe.log.events("counter")) == 10 and not any(notes(standin))


# -- the rules, without a desktop -------------------------------------------------------------


def _feed(actions: list[tuple[str, dict[str, Any], str, str]], n: int = 4) -> list[Any]:
    """Feed (name, args, screen before, screen after) to the detector; its verdicts."""
    state: dict[str, Any] | None = None
    out = []
    for name, args, before, after in actions:
        check = stall.observe(n, state, name, args, before, after, lambda a, b: a == b)
        state = check.state
        out.append(check)
    return out


def test_a_cycle_that_brings_the_screen_back_is_a_stall() -> None:
    """Typing a letter and deleting it, again and again: every action changes the screen,
    but the screen keeps coming back."""
    actions = []
    for _ in range(3):
        actions.append(("type_text_at", {"x": 500, "y": 100, "text": "a"}, "empty", "a"))
        actions.append(("key_combination", {"keys": "backspace"}, "a", "empty"))
    checks = _feed(actions)
    noted = [i for i, c in enumerate(checks) if c.note]
    assert noted == [3] and "type_text_at at (500, 100)" in str(checks[3].note)
    assert checks[4].stuck


def test_a_change_after_the_note_clears_the_stall() -> None:
    same = [("click_at", {"x": 10, "y": 10}, "s", "s")] * 4
    checks = _feed([*same, ("click_at", {"x": 600, "y": 600}, "s", "t"), *same])
    assert [i for i, c in enumerate(checks) if c.note] == [3, 8]
    assert not any(c.stuck for c in checks)


def test_max_cost_on_the_command_line_then_resume_with_a_higher_cap(
    probe: Probe, standin: GeminiStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run --max-cost 2 --price 1/0``: each answer reports a million prompt tokens ($1), so
    the run stops before its third model call (exit 5); ``resume --max-cost 10`` goes on with
    the total kept and finishes."""
    x, y = grid(*centre(probe.ready["counter"]))
    usage = {"promptTokenCount": 1_000_000, "candidatesTokenCount": 0}
    clicks = [
        Reply(200, {**r.body, "usageMetadata": usage}) for r in calls("click_at", 3, x=x, y=y)
    ]
    standin.script([*clicks, Reply(200, {**Reply.text("Counted.").body, "usageMetadata": usage})])
    monkeypatch.setenv("VNC_PASSWORD", probe.desktop.password)
    runs = tmp_path / "runs"
    common = ["--runs-dir", str(runs), "--vnc", probe.desktop.server, "--quiet"]
    task = ["--task", "Click the counter three times", "--thread-id", "c"]
    assert main(["run", *task, "--max-cost", "2", "--price", "1/0", *common]) == 5
    assert len(standin.requests) == 2
    saved = json.loads((runs / "c" / "run.json").read_text())
    assert saved["status"] == "cost_limit" and saved["cost_usd"] == pytest.approx(2.0)
    assert main(["resume", "c", "--max-cost", "10", *common]) == 0
    assert len(standin.requests) == 4 and len(probe.log.events("counter")) == 3
    saved = json.loads((runs / "c" / "run.json").read_text())
    assert saved["status"] == "done" and saved["cost_usd"] == pytest.approx(4.0)
    assert saved["max_cost"] == 10


def test_the_commands_of_the_cost_and_stalls_page(
    probe: Probe, standin: GeminiStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every command of docs/cost-and-stalls.md, in its order, with this desktop's address and
    the stand-in: a stall ends stuck (8), resume finishes it, --stall-after 0 clicks on,
    --price prices the run, --max-cost stops it (5) and resume --max-cost finishes it."""
    commands = [shlex.split(c)[1:] for c in shell_commands(page("cost-and-stalls.md"))]
    assert [c[0] for c in commands] == ["run", "run", "resume", "run", "run", "resume"]
    park_pointer(probe, *CANVAS)
    monkeypatch.setenv("VNC_PASSWORD", probe.desktop.password)
    runs = tmp_path / "runs"
    here = ["--vnc", probe.desktop.server, "--runs-dir", str(runs), "--quiet"]
    x, y = grid(*CANVAS)
    big = {"promptTokenCount": 400_000, "candidatesTokenCount": 0}  # $0.50 at 1.25/10
    scripts = [
        calls("click_at", 10, x=x, y=y),
        [*calls("click_at", 5, x=x, y=y), Reply.text("Done.")],
        [Reply.text("The canvas does not react.")],
        [Reply(200, {**Reply.text("Done.").body, "usageMetadata": big})],
        [Reply(200, {**r.body, "usageMetadata": big}) for r in calls("click_at", 1, x=x, y=y)],
        [Reply.text("Done.")],
    ]
    expected = [8, 0, 0, 0, 5, 0]
    threads = ["stalled", "unwatched", "stalled", "priced", "capped", "capped"]
    for argv, script, code, thread in zip(commands, scripts, expected, threads, strict=True):
        standin.script(script)
        if argv[0] == "run":
            argv = [*argv, "--thread-id", thread]
        argv = [thread if a == "THREAD_ID" else a for a in argv]
        assert main([*argv, *here]) == code, argv
    saved = {t: json.loads((runs / t / "run.json").read_text()) for t in set(threads)}
    assert saved["priced"]["cost_usd"] == pytest.approx(0.5)
    assert saved["capped"]["status"] == "done" and saved["capped"]["max_cost"] == 1.0
    assert saved["unwatched"]["status"] == "done" and saved["unwatched"]["stall_after"] == 0


# -- the note reaches every provider's model (a FakeDesktop: the same click draws the same) ----


def test_claude_gets_the_note_in_its_tool_result_then_the_run_is_stuck(tmp_path: Path) -> None:
    from vnc_use.providers.anthropic.planner import AnthropicPlanner
    from vnc_use.testing import FakeDesktop
    from vnc_use.testing.anthropic_standin import Action, AnthropicStandIn
    from vnc_use.testing.anthropic_standin import Reply as ClaudeReply

    click = ClaudeReply.act(Action("left_click", {"coordinate": [100, 100]}))
    with AnthropicStandIn([click] * 8, expected_api_key="sk-ant-test") as server:
        planner = AnthropicPlanner(
            "claude-opus-4-8", api_key="sk-ant-test", base_url=server.base_url, max_retries=0
        )
        with VncUseAgent(desktop=FakeDesktop(640, 400), planner=planner, runs_dir=tmp_path) as a:
            result = a.run(task="click", thread_id="claude")
        texts = [json.dumps(r.tool_results()) for r in server.requests[1:]]
    # the first click draws its mark (a change); the next four change nothing
    assert result.status == RunStatus.STUCK and result.steps == stall.DEFAULT_STALL_AFTER + 2
    noted = [i for i, t in enumerate(texts) if "changed nothing on the screen" in t]
    assert noted and noted[0] <= 4


def test_openai_gets_the_note_with_its_call_output_then_the_run_is_stuck(tmp_path: Path) -> None:
    from vnc_use.providers.openai.planner import OpenAIPlanner
    from vnc_use.testing import FakeDesktop
    from vnc_use.testing.openai_responses_standin import OpenAIResponsesStandIn, Turn

    click = Turn.call({"type": "click", "x": 10, "y": 10, "button": "left"})
    with OpenAIResponsesStandIn([click] * 8) as server:
        planner = OpenAIPlanner("gpt-5.5", api_key="sk-test", base_url=server.base_url)
        with VncUseAgent(desktop=FakeDesktop(640, 400), planner=planner, runs_dir=tmp_path) as a:
            result = a.run(task="click", thread_id="openai")
        texts = [json.dumps(r.items()) for r in server.requests[1:]]
    # the first click draws its mark (a change); the next four change nothing
    assert result.status == RunStatus.STUCK and result.steps == stall.DEFAULT_STALL_AFTER + 2
    noted = [i for i, t in enumerate(texts) if "changed nothing on the screen" in t]
    assert noted and noted[0] <= 4


def test_a_small_change_away_from_the_pointer_is_not_its_effect() -> None:
    """A caret's 1x4 cells far from a click toggle on their own; next to the click, or as
    big as a counter's digits, or made by a key, they are the action's effect."""
    caret = (40, 10, 41, 14)  # cells of the 160x100 grid
    assert stall.incidental(caret, (160, 100), [[900, 300]])
    assert not stall.incidental(caret, (160, 100), [[253, 115]])  # the click is at the caret
    assert not stall.incidental((40, 10, 46, 16), (160, 100), [[900, 300]])  # 6x6: not small
    assert stall.incidental(caret, (160, 100), [])  # nothing pointed at: a wait
    assert not stall.incidental(None, (160, 100), [[900, 300]])

    def small(a: str | None, b: str | None, targets: Any) -> bool:
        return {a, b} == {"off", "on"} and stall.incidental(caret, (160, 100), targets)

    def feed(kind: Any, args: dict[str, Any]) -> list[Any]:
        state: dict[str, Any] | None = None
        out = []
        for before, after in [("off", "off"), ("off", "on"), ("on", "on"), ("on", "on")]:
            check = stall.observe(
                4, state, "x", args, before, after, lambda a, b: a == b, kind=kind, small=small
            )
            state = check.state
            out.append(check)
        return out

    assert feed("pointer", {"x": 900, "y": 300})[-1].note  # the caret's blink did not count
    assert not feed("keyboard", {})[-1].note  # a key's change counts wherever it is
    assert not any(c.note or c.stuck for c in feed("observe", {}))  # looking never counts
