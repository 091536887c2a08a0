"""Runs served by LangGraph Server: ``langgraph dev`` from the repository's ``langgraph.json``,
driven with ``langgraph-sdk`` and with ``vnc-use ... --server URL``.

Real parts only: the server process (offline, 127.0.0.1, an explicit port, several jobs per
worker), two TigerVNC desktops with the probe app, and the Gemini stand-in behind the real
``google-genai`` SDK (inside the server). The probe's event log is the truth about what landed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client

from vnc_use.agent.approval import APPROVE, DENY, parse_decision
from vnc_use.errors import ConfigError
from vnc_use.evaluation.tasks import load_tasks, suite_path
from vnc_use.record.video import read_segments
from vnc_use.runs.leg import RECORD_KEYS
from vnc_use.store.storage import open_storage
from vnc_use.testing.gemini_standin import (
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    require_confirmation,
)
from vnc_use.testing.langgraph_dev import LangGraphDev

from cli_tools import CLI, run_cli
from desktop_fixtures import Probe
from doc_pages import all_lines, page, section
from eval_oracle import oracle
from gemini_fixtures import DUMMY_API_KEY

pytestmark = pytest.mark.desktop

GRAPH = "vnc_use"
_TASK = re.compile(r"click grid (\d+),(\d+)( slowly)?( confirm)?( hold)?")
_ORACLE = oracle(load_tasks(suite_path("builtin")).tasks)
#: The VNC password of the desktops ``eval --server`` starts (the server has it as
#: VNC_PASSWORD_EVAL).
EVAL_PASSWORD = "ev4l-Pw9"


class _Hold:
    """A run whose task says ``hold`` thinks (holding its desktop's lease: the lease covers
    model calls) until the test lets it go."""

    def __init__(self) -> None:
        self.thinking = threading.Event()
        self.release = threading.Event()


_hold = _Hold()


def _model(request: dict[str, Any], index: int) -> Reply:
    """The scripted model: the task says where to click, whether to ask first, and whether to
    think slowly (so that concurrent runs overlap) or until released (``hold``); after the
    click's result it is done."""
    contents = request.get("contents") or []
    found = _TASK.search(json.dumps(contents))
    if found is None:  # a task of the built-in eval suite (eval --server): the oracle
        return _ORACLE(request, index)  # type: ignore[no-any-return]
    x, y, slowly, confirm, hold = found.groups()
    if slowly:
        time.sleep(1.0)
    if any(c.get("role") == "model" for c in contents):
        return Reply.text("clicked")
    if hold:
        _hold.thinking.set()
        assert _hold.release.wait(60), "the test never let the holding run go"
    args: dict[str, Any] = {"x": int(x), "y": int(y)}
    if confirm:
        args["safety_decision"] = require_confirmation("Clicking changes the probe.")
    return Reply.calls(FunctionCallSpec("click_at", **args))


@pytest.fixture(scope="module")
def model() -> Iterator[GeminiStandIn]:
    with GeminiStandIn(_model) as standin:
        yield standin


@pytest.fixture(scope="module")
def server(
    model: GeminiStandIn, session_probe: Probe, session_small_probe: Probe
) -> Iterator[LangGraphDev]:
    env = {
        "GOOGLE_API_KEY": DUMMY_API_KEY,
        "GOOGLE_GEMINI_BASE_URL": model.base_url,
        "VNC_PASSWORD_A": session_probe.desktop.password,
        "VNC_PASSWORD_B": session_small_probe.desktop.password,
        "VNC_PASSWORD_EVAL": EVAL_PASSWORD,
    }
    with LangGraphDev(env, jobs=4) as dev:
        yield dev


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return tmp_path / "runs"


def _spec(probe: Probe, variable: str, runs: Path) -> dict[str, Any]:
    return {"vnc_server": probe.desktop.server, "vnc_password_env": variable, "runs_dir": str(runs)}


def _grid(probe: Probe) -> tuple[int, int, tuple[int, int]]:
    """A grid point on the probe's canvas, and the pixel it becomes."""
    px, py = probe.canvas_point()
    w, h = probe.size
    gx, gy = round(px / w * 1000), round(py / h * 1000)
    return gx, gy, (gx * w // 1000, gy * h // 1000)


def _presses(probe: Probe) -> list[tuple[int, int]]:
    return [(e["x"], e["y"]) for e in probe.log.events("press")]


def _events(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]


def test_a_run_pauses_for_the_inbox_and_an_accept_lands_its_click(
    server: LangGraphDev, probe: Probe, runs: Path
) -> None:
    client = get_sync_client(url=server.url, api_key=None)
    gx, gy, pixel = _grid(probe)
    tid = client.threads.create()["thread_id"]
    run = client.runs.create(
        tid,
        GRAPH,
        input={"task": f"click grid {gx},{gy} confirm"},
        context=_spec(probe, "VNC_PASSWORD_A", runs),
    )
    client.runs.join(tid, run["run_id"])
    folder = runs / tid
    paused = [e for e in _events(folder) if e["event"] == "run_paused"]
    assert [e["pending_call"]["name"] for e in paused] == ["click_at"]
    assert (folder / "report.html").exists()  # written at the pause, as for a local run

    waiting = client.threads.search(status="interrupted", limit=100)
    assert tid in [t["thread_id"] for t in waiting]
    ((request,),) = client.threads.get(tid)["interrupts"].values()
    value = request["value"]
    assert value["action_request"]["action"] == "click_at"
    assert value["action_request"]["args"]["pixels"] == {"x": pixel[0], "y": pixel[1]}
    assert value["config"]["allow_accept"] and value["config"]["allow_ignore"]
    assert "Clicking changes the probe." in value["description"]
    assert _presses(probe) == []  # nothing ran before the approval

    # as Agent Inbox resumes: a bare command, no context (the run finds its spec again)
    events = [
        part.data
        for part in client.runs.stream(
            tid,
            GRAPH,
            command={"resume": [{"type": "accept", "args": None}]},
            stream_mode=["custom"],
        )
        if part.event == "custom"
    ]
    probe.log.wait_type("press", timeout=10)
    assert _presses(probe) == [pixel]
    state = client.threads.get_state(tid)
    assert state["values"]["status"] == "done"
    assert client.threads.get(tid)["status"] == "idle"
    kinds = [e["event"] for e in events]
    assert "approved" in kinds and "action" in kinds  # what the terminal shows, streamed
    action = next(e for e in events if e["event"] == "action")
    assert action["pixels"] == {"x": pixel[0], "y": pixel[1]}
    # the run folder on the server's side is a local run's: run.json with the task and the
    # outcome, run_started .. run_paused .. run_ended, the report
    task = f"click grid {gx},{gy} confirm"
    recorded = json.loads((folder / "run.json").read_text())
    assert recorded["task"] == task and recorded["status"] == "done"
    # the keys every run.json has (local, fleet, MCP alike), the values the run resolved
    assert set(recorded) == set(RECORD_KEYS) and recorded["kind"] == "served"
    assert recorded["keep_screenshots"] == 3 and recorded["model"]  # the planner's, as local
    kinds = [e["event"] for e in _events(folder)]
    assert kinds[0] == "run_started" and kinds[-1] == "run_ended"
    assert kinds.count("run_started") == 1 and "run_paused" in kinds
    started, ended = _events(folder)[0], _events(folder)[-1]
    assert started["task"] == task and started["vnc_server"] == probe.desktop.server
    assert ended["status"] == "done" and ended["steps"] == 1
    assert "clicked" in (folder / "report.html").read_text()
    # each leg of the served run is a segment of its video (issue 32)
    assert [s.file for s in read_segments(folder)] == ["video.mp4", "video-2.mp4"]
    # and so is the journal: in the runs folder's database (no VNC_USE_DATABASE_URL here)
    storage = open_storage(None, runs)
    try:
        done = [r for r in storage.journal(tid).records() if r.get("state") == "done"]
    finally:
        storage.close()
    assert [r["name"] for r in done] == ["click_at"]


def test_an_ignored_action_never_runs(server: LangGraphDev, probe: Probe, runs: Path) -> None:
    client = get_sync_client(url=server.url, api_key=None)
    gx, gy, _ = _grid(probe)
    tid = client.threads.create()["thread_id"]
    client.runs.wait(
        tid,
        GRAPH,
        input={"task": f"click grid {gx},{gy} confirm"},
        context=_spec(probe, "VNC_PASSWORD_A", runs),
    )
    assert client.threads.get(tid)["status"] == "interrupted"
    client.runs.wait(tid, GRAPH, command={"resume": [{"type": "ignore", "args": None}]})
    state = client.threads.get_state(tid)
    assert state["values"]["status"] == "denied"
    assert state["values"]["transcript"][-1]["result"] == "denied"
    time.sleep(0.5)  # a click that should not come would have come by now
    assert _presses(probe) == []


def test_runs_on_two_desktops_proceed_at_once(
    server: LangGraphDev, probe: Probe, small_probe: Probe, runs: Path
) -> None:
    client = get_sync_client(url=server.url, api_key=None)
    started = []
    for p, variable in ((probe, "VNC_PASSWORD_A"), (small_probe, "VNC_PASSWORD_B")):
        gx, gy, pixel = _grid(p)
        tid = client.threads.create()["thread_id"]
        run = client.runs.create(
            tid,
            GRAPH,
            input={"task": f"click grid {gx},{gy} slowly"},
            context=_spec(p, variable, runs),
        )
        started.append((p, tid, run["run_id"], pixel))
    spans = []
    for p, tid, run_id, pixel in started:
        client.runs.join(tid, run_id)
        assert client.threads.get_state(tid)["values"]["status"] == "done"
        p.log.wait_type("press", timeout=10)
        assert _presses(p) == [pixel]
        stamps = [
            e["ts"] for e in map(json.loads, (runs / tid / "events.jsonl").read_text().splitlines())
        ]
        spans.append((min(stamps), max(stamps)))
    (a0, a1), (b0, b1) = spans
    assert a0 < b1 and b0 < a1  # each run began before the other ended: they overlapped


def served_run(url: str, probe: Probe, runs: Path, task: str) -> list[str]:
    """``vnc-use run --server``: the desktop's password stays in the server's environment."""
    where = ["--vnc", probe.desktop.server, "--vnc-password-env", "VNC_PASSWORD_A"]
    return ["run", "--server", url, *where, "--runs-dir", str(runs), "--task", task]


def _readme_server_commands(url: str, probe: Probe, task: str) -> list[list[str]]:
    """The ``vnc-use ... --server`` lines of docs/deployment/langgraph-server.md, aimed at this
    server, this desktop (its password in ``VNC_PASSWORD_A``) and ``task``."""
    text = page("deployment/langgraph-server.md")
    lines = [line for line in text.splitlines() if line.startswith("vnc-use ")]
    assert len(lines) == 5, lines
    swap = {
        "http://127.0.0.1:2024": url,
        "desk-07::5901": probe.desktop.server,
        "VNC_PASSWORD_07": "VNC_PASSWORD_A",
        "Click the OK button": task,
    }
    out = []
    for line in lines:
        for old, new in swap.items():
            line = line.replace(old, new)
        out.append(shlex.split(line)[1:])
    return out


def test_the_readme_server_commands(server: LangGraphDev, probe: Probe, tmp_path: Path) -> None:
    """The docs' Deployment commands, as written: run (pauses: the policy asks for
    click_at), runs (waiting first), approve (the click lands), deny (nothing waits), resume
    (nothing left to do)."""
    gx, gy, pixel = _grid(probe)
    run, runs, approve, deny, resume = _readme_server_commands(
        server.url, probe, f"click grid {gx},{gy}"
    )
    started = run_cli(run, cwd=tmp_path)
    assert started.returncode == 3, started.stderr
    tid = re.search(r"thread (\S+) on", started.stdout).group(1)  # type: ignore[union-attr]
    assert f"vnc-use approve --server {server.url} {tid}" in started.stdout
    assert "--confirm click_at" in started.stdout  # who asks: the approval policy

    listed = run_cli(runs)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1].split()[:3] == [tid, "awaiting_approval", "click_at"]

    def on(argv: list[str]) -> list[str]:
        return [tid if a == "THREAD" else a for a in argv]

    approved = run_cli(on(approve))
    assert approved.returncode == 0, approved.stderr
    assert "approved by person" in approved.stdout and "step 1: click_at" in approved.stdout
    # the server is on this machine: the report it wrote is named where this machine finds it
    report = re.search(r"^report: (\S+)$", approved.stdout, re.M)
    assert report is not None, approved.stdout
    assert Path(report.group(1)).is_file() and Path(report.group(1)).parent.name == tid
    assert _presses(probe) == [pixel]
    denied = run_cli(on(deny))
    assert denied.returncode == 2 and "not waiting for an approval" in denied.stderr
    resumed = run_cli(on(resume))
    assert resumed.returncode == 0, resumed.stderr
    assert "status: done" in resumed.stdout
    assert _presses(probe) == [pixel]


def test_the_cli_denies_on_the_server(server: LangGraphDev, probe: Probe, runs: Path) -> None:
    gx, gy, _ = _grid(probe)
    url = server.url
    first = run_cli(served_run(url, probe, runs, f"click grid {gx},{gy} confirm"))
    assert first.returncode == 3, first.stderr
    tid = re.search(r"thread (\S+) on", first.stdout).group(1)  # type: ignore[union-attr]
    denied = run_cli(["deny", "--server", url, tid])
    assert denied.returncode == 4, denied.stderr
    assert "denied by person" in denied.stdout
    listed = run_cli(["runs", "--server", url, "--json"])
    statuses = {r["thread_id"]: r["status"] for r in map(json.loads, listed.stdout.splitlines())}
    assert statuses[tid] == "denied"
    assert _presses(probe) == []


def test_the_cli_says_in_one_line_when_no_server_answers(runs: Path) -> None:
    result = run_cli(["runs", "--server", "http://127.0.0.1:9"])
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "cannot reach the server" in result.stderr
    where = ["--vnc", "127.0.0.1::5999", "--vnc-password", "hunter22"]
    result = run_cli(["run", "--server", "http://127.0.0.1:9", *where, "--task", "x"])
    assert result.returncode == 2 and "--vnc-password-env" in result.stderr


def test_no_secret_in_the_servers_records(
    server: LangGraphDev, session_probe: Probe, session_small_probe: Probe, runs: Path
) -> None:
    """After the runs above: the server's records, its log and the run folders hold neither
    the VNC passwords nor the API key (the run spec names the variables only)."""
    client = get_sync_client(url=server.url, api_key=None)
    tid = client.threads.create()["thread_id"]
    client.runs.wait(
        tid,
        GRAPH,
        input={"task": "click grid 500,500 confirm"},
        context=_spec(session_probe, "VNC_PASSWORD_A", runs),
    )
    client.runs.wait(tid, GRAPH, command={"resume": {"decisions": [{"type": "reject"}]}})
    assert client.threads.get_state(tid)["values"]["status"] == "denied"
    time.sleep(1.5)  # the in-memory runtime writes its records to disk on a timer
    written = server.records() + b"".join(p.read_bytes() for p in runs.rglob("*") if p.is_file())
    assert b"VNC_PASSWORD_A" in written  # the records are there, naming the variable
    for secret in (session_probe.desktop.password, session_small_probe.desktop.password):
        assert secret.encode() not in written
    assert DUMMY_API_KEY.encode() not in written


def test_a_spec_with_a_secret_is_refused(server: LangGraphDev, probe: Probe, runs: Path) -> None:
    client = get_sync_client(url=server.url, api_key=None)
    tid = client.threads.create()["thread_id"]
    spec = {**_spec(probe, "VNC_PASSWORD_A", runs), "vnc_password": "hunter22"}
    client.runs.wait(tid, GRAPH, input={"task": "click grid 1,1"}, context=spec, raise_error=False)
    thread = client.threads.get(tid)
    assert thread["status"] == "error"
    assert "never send a secret" in server.log()
    assert _presses(probe) == []


@pytest.mark.parametrize(
    ("answer", "decision"),
    [
        ([{"type": "accept", "args": None}], APPROVE),
        ([{"type": "accept", "args": {"action": "click_at", "args": {}}}], APPROVE),
        ([{"type": "ignore", "args": None}], DENY),
        ([{"type": "response", "args": "no"}], DENY),
        ([{"type": "edit", "args": {}}], DENY),
        ({"decisions": [{"type": "approve"}]}, APPROVE),
        ({"decisions": [{"type": "reject", "message": "no"}]}, DENY),
        ({"decisions": [{"type": "approve"}, {"type": "approve"}]}, DENY),
        ([{"type": "accept"}, {"type": "accept"}], DENY),
        ([], DENY),
        ([{"type": "approve"}], APPROVE),
        ({"type": "accept"}, APPROVE),
        ("approve", APPROVE),
        ("deny", DENY),
        ({"decision": "approve"}, APPROVE),
        (["approve"], DENY),
        ({"decisions": "approve"}, DENY),
        (None, DENY),
        (1, DENY),
    ],
)
def test_resume_decisions_from_inboxes_and_middleware(answer: Any, decision: str) -> None:
    assert parse_decision(answer) == decision


def test_the_readme_starts_langgraph_dev_as_these_tests_do() -> None:
    """The docs' ``langgraph dev`` line carries the flags :class:`LangGraphDev` starts the
    server with (offline, no browser or reloader, an explicit port, several jobs)."""
    (line,) = [x for x in all_lines() if "langgraph dev " in x]
    for flag in ("LANGGRAPH_CLI_NO_ANALYTICS=1", "--no-browser", "--no-reload", "--port"):
        assert flag in line
    assert int(line.split("--n-jobs-per-worker ")[1].split()[0]) > 1


def test_the_server_publishes_the_graphs_schemas(server: LangGraphDev) -> None:
    """Input, output and context schemas (the state is a typing_extensions TypedDict, the
    context the JSON-only run spec)."""
    client = get_sync_client(url=server.url, api_key=None)
    (assistant,) = client.assistants.search(graph_id=GRAPH)
    schemas = client.assistants.get_schemas(assistant["assistant_id"])
    assert "task" in schemas["input_schema"]["properties"]
    assert "transcript" in schemas["output_schema"]["properties"]
    context = schemas["context_schema"]["properties"]
    assert {"desktop", "tool_version", "sensitive_names", "keep_screenshots"} <= set(context)
    (desktop,) = schemas["context_schema"]["$defs"].values()  # the DesktopTarget
    assert {"vnc_server", "vnc_password_env", "rdp_server", "screen_region"} <= set(
        desktop["properties"]
    )
    for names in (context, desktop["properties"]):
        assert not [name for name in names if "password" in name and not name.endswith("_env")]


@pytest.fixture
def hold() -> Iterator[_Hold]:
    """A fresh hold for this test; let go whatever happens."""
    global _hold
    _hold = _Hold()
    try:
        yield _hold
    finally:
        _hold.release.set()


def _local_run(
    model: GeminiStandIn, probe: Probe, runs: Path, task: str, *extra: str
) -> subprocess.Popen[str]:
    """A local ``vnc-use run`` (no server) on ``probe``'s desktop, runs folder ``runs``."""
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "VNC_PASSWORD": probe.desktop.password,
        "GOOGLE_API_KEY": DUMMY_API_KEY,
        "GOOGLE_GEMINI_BASE_URL": model.base_url,
    }
    env.pop("VNC_USE_DATABASE_URL", None)
    argv = [*CLI, "run", "--vnc", probe.desktop.server, "--runs-dir", str(runs), "--task", task]
    return subprocess.Popen(
        [*argv, *extra],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_local_run_waits_for_a_served_run_on_its_desktop(
    server: LangGraphDev, model: GeminiStandIn, probe: Probe, runs: Path, hold: _Hold
) -> None:
    """A served run holds its desktop's lease while it acts (model calls included): a local
    run on that desktop waits, and acts only after the served run ended."""
    client = get_sync_client(url=server.url, api_key=None)
    gx, gy, first = _grid(probe)
    tid = client.threads.create()["thread_id"]
    run = client.runs.create(
        tid,
        GRAPH,
        input={"task": f"click grid {gx},{gy} hold"},
        context=_spec(probe, "VNC_PASSWORD_A", runs),
    )
    assert hold.thinking.wait(60), "the served run never asked the model"
    local = _local_run(model, probe, runs, f"click grid {gx - 100},{gy}", "--thread-id", "later")
    try:
        assert local.stdout is not None
        # the local run says it waits, naming the holder
        said = [local.stdout.readline()]
        while said[-1] and "waiting_for_desktop" not in said[-1]:
            said.append(local.stdout.readline())
        assert f"is in use by run {tid}" in said[-1], said
        hold.release.set()
        client.runs.join(tid, run["run_id"])
        out, err = local.communicate(timeout=60)
    finally:
        if local.poll() is None:
            local.kill()
            local.wait(10)
    assert local.returncode == 0, out + err
    second = ((gx - 100) * probe.size[0] // 1000, first[1])
    assert _presses(probe) == [first, second]  # one after the other, never interleaved
    served_end = _events(runs / tid)[-1]
    assert served_end["event"] == "run_ended" and served_end["status"] == "done"
    local_start = next(e for e in _events(runs / "later") if e["event"] == "run_started")
    assert served_end["ts"] <= local_start["ts"]


def test_a_served_run_gives_up_on_a_leased_desktop_after_its_lease_timeout(
    server: LangGraphDev, model: GeminiStandIn, probe: Probe, runs: Path, hold: _Hold
) -> None:
    """``--lease-timeout`` goes to the server in the run spec: a served run on a desktop a
    local run holds waits that long, then fails with the lease message naming the holder."""
    gx, gy, first = _grid(probe)
    local = _local_run(model, probe, runs, f"click grid {gx},{gy} hold", "--thread-id", "holder")
    try:
        assert hold.thinking.wait(60), "the local run never asked the model"
        argv = served_run(server.url, probe, runs, f"click grid {gx - 100},{gy}")
        served = run_cli([*argv, "--lease-timeout", "0.5"])
        hold.release.set()
        out, err = local.communicate(timeout=60)
    finally:
        if local.poll() is None:
            local.kill()
            local.wait(10)
    assert served.returncode == 1, served.stdout + served.stderr
    assert "status: error" in served.stdout and "report:" not in served.stdout  # none made
    assert (
        f"the desktop {probe.desktop.server} is in use by run holder (waited 0.5 s for it)"
        in served.stderr
    )
    assert local.returncode == 0, out + err
    assert _presses(probe) == [first]  # the served run never acted


@pytest.mark.parametrize("option", [["--view"], ["--reconnect-window", "5"]])
def test_options_that_cannot_apply_on_a_server_are_refused(option: list[str]) -> None:
    where = ["--vnc", "127.0.0.1::5999", "--vnc-password-env", "VNC_PASSWORD"]
    result = run_cli(["run", "--server", "http://127.0.0.1:9", *where, *option, "--task", "x"])
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert f"{option[0]} cannot apply with --server" in result.stderr


@pytest.mark.timeout(120)
def test_eval_runs_its_tasks_as_threads_on_the_server(server: LangGraphDev, tmp_path: Path) -> None:
    """docs/eval.md's fleet command (three of the built-in tasks, the oracle as the model): each
    task a thread of the server, the same results files, the VNC password never sent."""
    fleet = section(page("eval.md"), "## A fleet")
    line = next(x for x in fleet.splitlines() if x.startswith("vnc-use eval"))
    out = tmp_path / "eval"
    only = ["term-note", "term-mkdir", "web-button"]
    argv = line.replace("http://127.0.0.1:2024", server.url).split()[1:]
    argv[argv.index("eval-out")] = str(out)
    done = run_cli([*argv, "--only", *only], env={"VNC_PASSWORD": EVAL_PASSWORD}, timeout=110)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    got = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in got) == sorted(only)
    assert [r["outcome"] for r in got] == ["passed"] * 3, got
    client = get_sync_client(url=server.url, api_key=None)
    for r in got:  # each task a thread of the server, its report in the (local) runs folder
        thread: Any = client.threads.get(r["thread_id"])
        assert thread["metadata"]["task"] and thread["status"] == "idle"
        listed: Any = client.runs.list(r["thread_id"])
        context = listed[0]["kwargs"]["context"]
        assert context["desktop"]["vnc_password_env"] == "VNC_PASSWORD_EVAL"
        assert (out / r["report"]).is_file() and r["report"].startswith("runs/")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["passed"] == 3 and summary["server"] == server.url
    assert 'href="runs/' in (out / "index.html").read_text()
    # the password never travels: not in the server's records, nor in anything eval wrote
    assert server.workdir is not None
    for folder in (out, server.workdir):
        for path in folder.rglob("*"):
            if path.is_file():
                assert EVAL_PASSWORD.encode() not in path.read_bytes(), path


def test_a_served_run_stops_at_its_cost_cap_and_resume_raises_it(
    server: LangGraphDev, probe: Probe, runs: Path
) -> None:
    """At --price 1000/0 the stand-in's first answer (over 1000 prompt tokens) costs over $1:
    a cap of $0.50 stops the run before its second model call (exit 5); resume --max-cost
    1000 on the server goes on from there, the click made once."""
    gx, gy, pixel = _grid(probe)
    capped = [*served_run(server.url, probe, runs, f"click grid {gx},{gy}")]
    started = run_cli([*capped, "--max-cost", "0.5", "--price", "1000/0"])
    assert started.returncode == 5, started.stdout + started.stderr
    assert "status: cost_limit" in started.stdout
    tid = re.search(r"thread (\S+) on", started.stdout).group(1)  # type: ignore[union-attr]
    assert _presses(probe) == [pixel]
    resumed = run_cli(["resume", "--server", server.url, tid, "--max-cost", "1000"])
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "status: done" in resumed.stdout and _presses(probe) == [pixel]
    saved = json.loads((runs / tid / "run.json").read_text())
    assert saved["max_cost"] == 1000 and saved["cost_usd"] > 1


@pytest.mark.timeout(300)
def test_a_served_run_stopped_from_another_executor_ends_interrupted_and_resumes(
    server: LangGraphDev, probe: Probe, runs: Path, hold: _Hold
) -> None:
    """The served executor's ``stop``: asked for by another executor while the run thinks,
    the run ends ``interrupted`` (nothing clicked), and ``resume`` performs its click once."""
    import uuid

    from vnc_use.runs.executor import ServedExecutor
    from vnc_use.runs.spec import RunSpec

    gx, gy, pixel = _grid(probe)
    probe.log.clear()
    tid = str(uuid.uuid4())
    spec = RunSpec.from_context(_spec(probe, "VNC_PASSWORD_A", runs))
    starter = ServedExecutor(server.url)
    out: dict[str, Any] = {}
    started = threading.Thread(
        target=lambda: out.update(result=starter.start(spec, f"click grid {gx},{gy} hold", tid))
    )
    started.start()
    try:
        assert hold.thinking.wait(60), "the served run never asked the model"
        ServedExecutor(server.url).stop(tid)
    finally:
        hold.release.set()
        started.join(120)
    stopped = out["result"]
    assert stopped.status == "interrupted", stopped
    assert _presses(probe) == []
    deadline = time.monotonic() + 60  # the server lets the cancelled run go on its own time
    while starter.api.threads.get(tid)["status"] == "busy":
        assert time.monotonic() < deadline, "the stopped thread stayed busy"
        time.sleep(0.1)
    resumed = ServedExecutor(server.url).resume(tid)
    assert resumed.status == "done", resumed
    probe.log.wait_type("press", timeout=10)
    assert _presses(probe) == [pixel]
    with pytest.raises(ConfigError, match="is not running"):
        ServedExecutor(server.url).stop(tid)


def test_a_served_run_is_taken_over_and_handed_back(
    server: LangGraphDev, model: GeminiStandIn, probe: Probe, runs: Path, hold: _Hold
) -> None:
    """Issue 42 on the server: ``takeover --server`` pauses the served leg at its next step
    boundary (the click the model is thinking about never lands; the thread waits,
    ``awaiting_human``, exit 3); ``handback --server --note`` runs the next leg there, the
    note in the model's next request."""
    from vnc_use.store.holds import DesktopHolds
    from vnc_use.store.journal import SqliteJournalStore
    from vnc_use.store.lease import desktop_key

    gx, gy, _ = _grid(probe)
    url = server.url
    argv = [*CLI, *served_run(url, probe, runs, f"click grid {gx},{gy} hold")]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    run = subprocess.Popen(argv, stdin=subprocess.DEVNULL, **pipes)  # type: ignore[call-overload]
    try:
        assert hold.thinking.wait(60), "the served run never asked the model"
        tid = next(p.name for p in runs.iterdir() if (p / "run.json").exists())
        taker = subprocess.Popen(  # type: ignore[call-overload]
            [*CLI, "takeover", "--server", url, tid, "--as", "ann", "--runs-dir", str(runs)],
            stdin=subprocess.DEVNULL,
            **pipes,
        )
        holds = DesktopHolds(
            SqliteJournalStore(runs / "vnc-use.sqlite"), desktop_key(probe.desktop.server)
        )
        deadline = time.monotonic() + 60
        while holds.held_for(tid) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        hold.release.set()  # the model answers: its click must not run
        taken_out, taken_err = taker.communicate(timeout=90)
        assert taker.returncode == 0, taken_out + taken_err
        out, err = run.communicate(timeout=60)
    finally:
        hold.release.set()
        for proc in [run, *([taker] if "taker" in locals() else [])]:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert run.returncode == 3, out + err
    assert "status: awaiting_human" in out
    assert _presses(probe) == []
    asked = len(model.requests)
    back = run_cli(
        ["handback", "--server", url, tid, "--as", "ann", "--note", "the form is filled"]
    )
    assert back.returncode == 0, back.stdout + back.stderr
    assert "status: done" in back.stdout
    said = json.dumps(model.requests[asked].body)
    assert "A person took control of the desktop" in said and "the form is filled" in said
    assert holds.held_for(tid) is None


def test_a_served_run_waits_for_a_desktop_a_person_holds_for_another_run(
    server: LangGraphDev, probe: Probe, runs: Path
) -> None:
    """Issue 40: a served leg is leased like a local one (:mod:`vnc_use.runs.leg`): a desktop
    a person took over for another run is busy for it too; the served run waits its lease
    timeout, then fails with the one line naming the person, and never acts."""
    from vnc_use.store.holds import DesktopHolds
    from vnc_use.store.journal import SqliteJournalStore
    from vnc_use.store.lease import desktop_key

    gx, gy, _ = _grid(probe)
    probe.log.clear()
    runs.mkdir(parents=True)
    store = SqliteJournalStore(runs / "vnc-use.sqlite")
    holds = DesktopHolds(store, desktop_key(probe.desktop.server))
    holds.take("other-run", "ann")
    try:
        argv = served_run(server.url, probe, runs, f"click grid {gx},{gy}")
        served = run_cli([*argv, "--lease-timeout", "0.5"])
    finally:
        holds.free("other-run", "ann")
        store.close()
    assert served.returncode == 1, served.stdout + served.stderr
    assert "status: error" in served.stdout and "report:" not in served.stdout  # none made
    assert f"the desktop {probe.desktop.server} is held by ann" in served.stderr
    assert "took over run other-run (waited 0.5 s for it)" in served.stderr
    assert served.stderr.count("\n") == 1
    assert _presses(probe) == []  # the served run never acted


def test_a_served_cost_cap_on_a_model_of_unknown_price_is_refused_before_it_acts(
    server: LangGraphDev, probe: Probe, runs: Path
) -> None:
    """Issue 40: a served leg starts as a local one does (:mod:`vnc_use.runs.leg`): a cost
    cap on a model whose price vnc-use does not know is refused in one line naming
    ``--price``, before the desktop is touched (it was not: the run made its first click,
    then stopped ``cost_limit``)."""
    gx, gy, _ = _grid(probe)
    probe.log.clear()
    argv = served_run(server.url, probe, runs, f"click grid {gx},{gy}")
    unknown = ["--model", "gemini-9-unpriced", "--model-family", "gemini-3"]
    served = run_cli([*argv, *unknown, "--max-cost", "1"])
    assert served.returncode == 1, served.stdout + served.stderr
    assert "--max-cost needs the price of gemini-9-unpriced" in served.stderr
    assert "give it with --price INPUT/OUTPUT" in served.stderr
    assert served.stderr.count("\n") == 1
    assert _presses(probe) == []
