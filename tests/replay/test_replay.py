"""``vnc-use replay`` / ``VncUseAgent.replay`` on real desktops with the probe app.

A run is recorded once with the Gemini stand-in on a fresh 1440x900 desktop (click the canvas,
click the text entry, type a sentence and press Enter). The stand-in is then stopped and the
API key removed: every replay below runs with no model at all (except ``--heal``, which gets a
stand-in of its own), each on a fresh desktop of its own so that its first screen is the
recorded one.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from vnc_use import VncUseAgent
from vnc_use.cli import main
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.store.storage import open_storage
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply

from desktop_fixtures import Probe, start_probe
from doc_pages import all_lines
from gemini_fixtures import DUMMY_API_KEY, FAST_RETRY

pytestmark = pytest.mark.desktop

TASK = "Click the canvas, then type a sentence into the text field and press Enter"
SENTENCE = "replayed without a model"
INPUT_TYPES = ("press", "release", "key", "submit")


def grid(size: tuple[int, int], x: int, y: int) -> tuple[int, int]:
    w, h = size
    return round(x * 1000 / w), round(y * 1000 / h)


def inputs(probe: Probe) -> list[tuple[Any, ...]]:
    """What the probe received that an action causes: presses, keys, submits, in order."""
    return [
        (e["type"], e.get("x"), e.get("y"), e.get("button"), e.get("keysym"), e.get("text"))
        for e in probe.log.events()
        if e["type"] in INPUT_TYPES
    ]


@dataclass
class Recorded:
    runs: Path
    thread_id: str
    size: tuple[int, int]
    inputs: list[tuple[Any, ...]]
    canvas: tuple[int, int]


def fresh_probe(tmp: Path, width: int = 1440, height: int = 900) -> Iterator[Probe]:
    """A fresh desktop of its own with the probe app on it (stopped afterwards)."""
    with TestDesktop(width, height) as desk:
        probe = start_probe(desk, str(tmp / "probe.jsonl"))
        try:
            probe.log.clear()
            yield probe
        finally:
            probe.process.terminate()
            probe.process.wait(5)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    """The recorded run: three actions performed with the stand-in, which is then stopped."""
    tmp = tmp_path_factory.mktemp("recorded")
    runs = tmp / "runs"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GOOGLE_API_KEY", DUMMY_API_KEY)
        for probe in fresh_probe(tmp):
            size = probe.size
            canvas = probe.canvas_point()
            cx, cy = grid(size, *canvas)
            ex, ey = grid(size, *probe.entry_center)
            with GeminiStandIn() as standin:
                mp.setenv("GOOGLE_GEMINI_BASE_URL", standin.root_url)
                standin.script(
                    Reply.calls(FunctionCallSpec("click_at", x=cx, y=cy)),
                    Reply.calls(FunctionCallSpec("click_at", x=ex, y=ey)),
                    Reply.calls(
                        FunctionCallSpec(
                            "type_text_at", x=ex, y=ey, text=SENTENCE, press_enter=True
                        )
                    ),
                    Reply.text("Done."),
                )
                with VncUseAgent(
                    vnc_server=probe.desktop.server,
                    vnc_password=probe.desktop.password,
                    runs_dir=runs,
                    planner=GeminiComputerUse(**FAST_RETRY),
                ) as agent:
                    result = agent.run(task=TASK, thread_id="recorded")
            assert result.status == "done", result.error
            probe.log.wait_type("submit")
            got = inputs(probe)
    yield Recorded(runs, "recorded", size, got, canvas)


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """No API key, no stand-in: a replay must not need a model."""
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[Probe]:
    yield from fresh_probe(tmp_path)


def agent_for(probe: Probe, recorded: Recorded, **kwargs: Any) -> VncUseAgent:
    return VncUseAgent(
        vnc_server=probe.desktop.server,
        vnc_password=probe.desktop.password,
        runs_dir=recorded.runs,
        **kwargs,
    )


def open_xterm(probe: Probe) -> None:
    """Open an xterm at the top left of the probe's desktop and wait until it is viewable."""
    probe.desktop.launch(["xterm", "-geometry", "80x24+0+0"])
    deadline = time.monotonic() + 20
    while True:
        info = subprocess.run(
            ["xwininfo", "-name", "xterm"], env=probe.desktop.env, capture_output=True, text=True
        )
        if "IsViewable" in info.stdout:
            break
        assert time.monotonic() < deadline, "xterm did not map its window"
        time.sleep(0.05)
    time.sleep(0.3)  # its first paint


def when(
    kind: str, **fields: Any
) -> Callable[[Callable[[], None]], Callable[[dict[str, Any]], None]]:
    """An event listener that calls ``act`` once, on the first event ``kind`` with ``fields``."""

    def wrap(act: Callable[[], None]) -> Callable[[dict[str, Any]], None]:
        fired: list[bool] = []

        def listener(event: dict[str, Any]) -> None:
            if fired or event.get("event") != kind:
                return
            if all(event.get(k) == v for k, v in fields.items()):
                fired.append(True)
                act()

        return listener

    return wrap


# ------------------------------------------------------------------------------ the tests


def test_replay_on_a_fresh_desktop_without_a_model(
    recorded: Recorded, desk: Probe, no_model: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """The probe receives the same events at the same pixels; the replay is a run of its own."""
    with agent_for(desk, recorded) as agent:
        result = agent.replay(recorded.thread_id, replay_id="again")
    assert result.status == "done", result.error
    assert result.steps == 3
    desk.log.wait_type("submit")
    assert inputs(desk) == recorded.inputs
    folder = Path(result.run_dir)
    settings = json.loads((folder / "run.json").read_text())
    assert settings["provider"] == "replay" and settings["task"] == TASK
    assert settings["replay"]["source_thread"] == "recorded"
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    steps = [e for e in events if e["event"] == "replay_step"]
    assert [e["original_step"] for e in steps] == [1, 2, 3]
    assert all(e["difference"] is not None and e["difference"] <= 1.0 for e in steps)
    report = (folder / "report.html").read_text()
    assert "The recorded run after its step 3" in report and "Replay of" in report
    assert (folder / "video.mp4").is_file() and 'id="run-video"' in report  # issue 32
    assert main(["runs", "--runs-dir", str(recorded.runs)]) == 0
    listing = capsys.readouterr().out
    assert "[replay of recorded]" in listing
    assert main(["runs", "--runs-dir", str(recorded.runs), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["thread_id"]: r["source_thread"] for r in rows}["again"] == "recorded"


def test_replay_on_a_desktop_of_another_size_lands_on_the_same_widgets(
    recorded: Recorded, tmp_path: Path, no_model: None
) -> None:
    for small in fresh_probe(tmp_path, 1024, 768):
        with agent_for(small, recorded) as agent:
            result = agent.replay(recorded.thread_id)
        assert result.status == "done", result.error
        assert small.log.wait_type("submit")["text"] == SENTENCE
        presses = [(e["x"], e["y"]) for e in small.log.events("press")]
        assert len(presses) == 3
        x, y, w, h = small.ready["entry"]
        in_entry = [x <= px < x + w and y <= py < y + h for px, py in presses]
        assert in_entry == [False, True, True]
        # the canvas click is where the recorded one was, in proportion
        want = grid(recorded.size, *recorded.canvas)
        assert grid(small.size, *presses[0]) == pytest.approx(want, abs=2)


def test_a_changed_desktop_stops_the_replay_before_step_2(
    recorded: Recorded,
    desk: Probe,
    no_model: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An xterm opens during step 1: the replay stops as diverged before performing step 2."""
    with agent_for(desk, recorded) as agent:
        agent.on_event = when("replay_step", original_step=1)(lambda: open_xterm(desk))
        result = agent.replay(recorded.thread_id, replay_id="changed")
    assert result.status == "diverged"
    assert result.steps == 1
    assert "before original step 2" in (result.error or "")
    time.sleep(0.5)  # anything sent after step 1 would have arrived by now
    presses = desk.log.events("press")
    assert len(presses) == 1 and (presses[0]["x"], presses[0]["y"]) == recorded.inputs[0][1:3]
    assert not desk.log.events("key") and not desk.log.events("submit")
    folder = Path(result.run_dir)
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    diverged = next(e for e in events if e["event"] == "diverged")
    assert diverged["original_step"] == 2 and diverged["difference"] > 1.0
    report = (folder / "report.html").read_text()
    assert 'data-kind="diverged"' in report
    for sha in (diverged["expected"], diverged["actual"]):
        assert f"screenshots/{sha}.png" in report
    # the command line: every docs replay line (but --heal, below) exits 7 naming the step
    monkeypatch.setenv("VNC_PASSWORD", desk.desktop.password)
    lines = readme_replay_lines(desk)
    assert len(lines) == 5, lines
    for argv in [a for a in lines if "--heal" not in a]:
        code = main([*argv, "--runs-dir", str(recorded.runs)])
        out = capsys.readouterr()
        assert code == 7, (argv, out)
        assert "status: diverged" in out.out and "before original step" in out.out


def readme_replay_lines(probe: Probe) -> list[list[str]]:
    """The docs' ``vnc-use replay`` lines as argv, aimed at the recorded run and ``probe``'s
    desktop (the recorded run's own desktop is gone: ``--vnc`` is added where missing)."""
    found = []
    for line in all_lines():
        if not line.startswith("vnc-use replay "):
            continue
        argv = shlex.split(line.split("#")[0])[1:]
        argv = ["recorded" if a == "3f2a9c1d0b7e" else a for a in argv]
        argv = [probe.desktop.server if a == "desk-02::5901" else a for a in argv]
        if "--vnc" not in argv:
            argv += ["--vnc", probe.desktop.server]
        found.append(argv)
    return found


def test_heal_hands_the_rest_to_the_model(
    recorded: Recorded,
    desk: Probe,
    gemini: GeminiStandIn,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With --heal the model gets the task and the steps done, and the run goes on."""
    ex, ey = grid(desk.size, *desk.entry_center)
    gemini.script(
        Reply.calls(FunctionCallSpec("type_text_at", x=ex, y=ey, text="healed", press_enter=True)),
        Reply.text("Typed it."),
    )
    with agent_for(desk, recorded, planner=GeminiComputerUse(**FAST_RETRY)) as agent:
        agent.on_event = when("replay_step", original_step=1)(lambda: open_xterm(desk))
        result = agent.replay(recorded.thread_id, replay_id="healed", heal=True)
    assert result.status == "done", result.error
    assert desk.log.wait_type("submit")["text"] == "healed"
    first = gemini.requests[0].contents()[0]["parts"][0]["text"]
    assert first.startswith(TASK) and "1. click_at(" in first and "2. click_at" not in first
    assert len(gemini.requests) == 2 and not gemini.violations
    folder = Path(result.run_dir)
    kinds = [json.loads(x)["event"] for x in (folder / "events.jsonl").read_text().splitlines()]
    assert kinds.count("healed") == 1 and "diverged" not in kinds
    assert "went to the model" in (folder / "report.html").read_text()
    # the docs' --heal line: the xterm is still there, the model says there is nothing to do
    gemini.extend(Reply.text("Nothing left to do."))
    monkeypatch.setenv("VNC_PASSWORD", desk.desktop.password)
    (argv,) = [a for a in readme_replay_lines(desk) if "--heal" in a]
    assert main([*argv, "--runs-dir", str(recorded.runs)]) == 0
    assert "status: done" in capsys.readouterr().out
    assert len(gemini.requests) == 3 and not gemini.exhausted


def test_an_interrupted_replay_resumes_without_repeating_an_action(
    recorded: Recorded, desk: Probe, no_model: None
) -> None:
    """Stopped on request after step 1, then killed right after step 2 was performed: each
    resume (in a new agent, as a new process would) goes on, and no action runs twice."""
    with agent_for(desk, recorded) as agent:
        agent.on_event = when("action", step=1)(agent.request_stop)
        first = agent.replay(recorded.thread_id, replay_id="stopped")
    assert first.status == "interrupted" and first.steps == 1

    def crash() -> None:
        raise KeyboardInterrupt  # dies after step 2 was sent and journaled, before its checkpoint

    with agent_for(desk, recorded) as agent:
        agent.on_event = when("action", step=2)(crash)
        with pytest.raises(KeyboardInterrupt):
            agent.resume("stopped")
    with agent_for(desk, recorded) as agent:
        result = agent.resume("stopped")
    assert result.status == "done", result.error
    desk.log.wait_type("submit")
    assert inputs(desk) == recorded.inputs
    storage = open_storage(None, Path(result.run_dir).parent)
    try:
        journal = storage.journal(Path(result.run_dir).name).records()
    finally:
        storage.close()
    dispatched = [r["step"] for r in journal if r["state"] == "dispatched"]
    assert dispatched == [1, 2, 3]
    notes = [t.get("note") for t in result.transcript]
    assert notes[1] == "performed before the agent restarted; not repeated"
