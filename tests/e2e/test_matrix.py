"""Every provider through every front door onto the probe, through the CLI (issue 29).

For gemini, anthropic, openai and openai-compatible, each with its own stand-in and nothing
else configured (only that provider's key and address in the command's environment; see
``matrix_providers.py``), each door runs one scripted conversation — a click on the probe's
canvas, then a final answer — and the cell checks the click landed there and the run ended
with the right status and exit code:

``run-local``   ``vnc-use run`` with no ``--vnc``: the local desktop (started once here)
``run-vnc``     ``vnc-use run --vnc``
``run-rdp``     ``vnc-use run --rdp`` through the FreeRDP bridge to a shadow server
``run-server``  ``vnc-use run --server`` on a real ``langgraph dev``
``eval``        ``vnc-use eval`` of a two-task file (two clicks)
``mcp``         the ``run_task`` tool of ``vnc-use mcp``, called by the MCP SDK's client
``replay``      ``vnc-use replay`` of the ``run-vnc`` cell's run (no model asked)
``resume``      ``vnc-use resume`` of a run killed with SIGKILL after its click

Each door that takes model options is given every one its provider has, and
``test_option_reaches_the_request`` checks each in the requests that stand-in recorded for
that door (``--confirm`` in the run's record: it is vnc-use's own gate, never sent); doors
that take none refuse them in one line with exit 2. One desktop with the probe serves every
door but ``run-local``; each door runs once per provider (its outcome is shared by its cells).
A cell that fails for a known defect is marked ``xfail(strict=True)``: when fixed it passes,
and the mark goes (the ``spec`` branch fixed the local desktop for every provider and
``--tool-version`` through ``run --server`` and ``eval``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import TextContent

from vnc_use.record import run_record
from vnc_use.testing.langgraph_dev import LangGraphDev
from vnc_use.testing.rdp_shadow import RdpShadowServer
from vnc_use.testing.x11vnc import X11vncDesktop

from cli_tools import CLI
from desktop_fixtures import Probe, start_probe
from matrix_providers import HOLD, PROVIDERS, TARGET, ProviderCase, provider_env, start_cases

pytestmark = pytest.mark.desktop

WIDTH, HEIGHT = 1280, 800
TOLERANCE = 3
"""Pixels between the aimed point and the press: the grid or the image and the screen each
round once."""
TASK = "Click the canvas"
FINAL = "Clicked the canvas."
SERVED_PASSWORD_VARIABLE = "VNC_PASSWORD_MATRIX"

DOORS = ("run-local", "run-vnc", "run-rdp", "run-server", "eval", "mcp", "replay", "resume")
OPTION_DOORS = ("run-local", "run-vnc", "run-rdp", "run-server", "eval", "resume")
"""Doors whose requests carry the model options (``resume``: those of the killed run)."""
EVAL_REFUSES = {"--confirm"}
"""Options ``vnc-use eval`` does not take (it has --approve-all / --no-hitl)."""

SPEC = "left for a later change"
XFAIL_DOORS: dict[tuple[str, str], str] = {}
XFAIL_OPTIONS: dict[tuple[str, str, str], str] = {}


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def screen() -> Iterator[X11vncDesktop]:
    """One Xvfb screen that x11vnc (VNC) and the RDP shadow server both serve."""
    with X11vncDesktop(WIDTH, HEIGHT) as desk:
        yield desk


@pytest.fixture(scope="module")
def module_probe(screen: X11vncDesktop, tmp_path_factory: pytest.TempPathFactory) -> Probe:
    return start_probe(screen, str(tmp_path_factory.mktemp("probe") / "events.jsonl"))


@pytest.fixture(scope="module")
def rdp(screen: X11vncDesktop) -> Iterator[RdpShadowServer]:
    with RdpShadowServer(screen.display) as server:
        yield server


@pytest.fixture(scope="module")
def cases() -> Iterator[dict[str, ProviderCase]]:
    with ExitStack() as stack:
        yield {case.name: case for case in start_cases(stack)}


@pytest.fixture(scope="module")
def server(cases: dict[str, ProviderCase], screen: X11vncDesktop) -> Iterator[LangGraphDev]:
    """One ``langgraph dev``: the server makes the model calls, so its environment holds every
    provider's stand-in (the client's holds only its own provider's)."""
    env = {SERVED_PASSWORD_VARIABLE: screen.password}
    for case in cases.values():
        env.update(case.env)
    with LangGraphDev(env, jobs=2) as dev:
        yield dev


@dataclass
class LocalDesk:
    """The local desktop ``vnc-use desktop up`` started, with a probe on it."""

    state_dir: Path
    probe: Probe


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalDesk]:
    state_dir = tmp_path_factory.mktemp("local-desktop")
    env = provider_env(None, VNC_USE_DESKTOP_DIR=str(state_dir))
    argv = [*CLI, "desktop", "up", "--browser", "none", "--size", f"{WIDTH}x{HEIGHT}"]
    up = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        state = json.loads((state_dir / "state.json").read_text())
        display = _LocalDisplay(str(state["display"]))
        log = str(tmp_path_factory.mktemp("local-probe") / "events.jsonl")
        yield LocalDesk(state_dir, start_probe(display, log))  # type: ignore[arg-type]
    finally:
        subprocess.run([*CLI, "desktop", "down"], env=env, capture_output=True, timeout=60)


class _LocalDisplay:
    """Enough of a test desktop for :func:`start_probe`: launch a program on a display."""

    def __init__(self, display: str) -> None:
        self.display = display if display.startswith(":") else f":{display}"

    def launch(self, argv: list[str]) -> subprocess.Popen[bytes]:
        env = {**provider_env(None), "DISPLAY": self.display}
        return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)


# ----------------------------------------------------------------------------- the doors


@dataclass
class Outcome:
    """What one door did for one provider."""

    returncode: int
    output: str
    presses: list[tuple[int, int]]
    aimed: tuple[int, int]
    requests: list[Any] = field(default_factory=list)
    records: list[run_record.RunRecord] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


class Doors:
    """Runs each door once per provider and keeps its outcome for the cells that read it."""

    def __init__(self, request: pytest.FixtureRequest, root: Path) -> None:
        self.request = request
        self.root = root
        self.outcomes: dict[tuple[str, str], Outcome] = {}

    def fixture(self, name: str) -> Any:
        return self.request.getfixturevalue(name)

    def outcome(self, provider: str, door: str) -> Outcome:
        key = (provider, door)
        if key not in self.outcomes:
            case: ProviderCase = self.fixture("cases")[provider]
            run = getattr(self, "_" + door.replace("-", "_"))
            self.outcomes[key] = run(case, self.root / provider / door)
        return self.outcomes[key]

    # -- helpers ---------------------------------------------------------------------------
    def _probe(self) -> Probe:
        probe: Probe = self.fixture("module_probe")
        assert probe.process.poll() is None, "the probe app exited"
        probe.log.clear()
        return probe

    def _cli(self, argv: list[str], env: dict[str, str], timeout: float = 120) -> Any:
        return subprocess.run(
            [*CLI, *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def _finish(
        self, case: ProviderCase, probe: Probe, since: int, proc: Any, runs: Path, clicks: int = 1
    ) -> Outcome:
        presses = _presses(probe, clicks)
        records = [run_record.read(p.parent) for p in sorted(runs.rglob("run.json"))]
        return Outcome(
            returncode=proc.returncode,
            output=proc.stdout + proc.stderr,
            presses=presses,
            aimed=_aimed(probe),
            requests=case.standin.requests[since:],
            records=records,
            statuses=[r.status or "" for r in records],
        )

    def _vnc_env(self, case: ProviderCase) -> dict[str, str]:
        screen: X11vncDesktop = self.fixture("screen")
        return provider_env(case, VNC_PASSWORD=screen.password)

    # -- the doors -------------------------------------------------------------------------
    def _run_local(self, case: ProviderCase, runs: Path) -> Outcome:
        desk: LocalDesk = self.fixture("local")
        desk.probe.log.clear()
        since = len(case.standin.requests)
        env = provider_env(case, VNC_USE_DESKTOP_DIR=str(desk.state_dir))
        argv = ["run", "--task", TASK, *case.args, *case.option_words(), "--runs-dir", str(runs)]
        proc = self._cli(argv, env)
        return self._finish(case, desk.probe, since, proc, runs)

    def _run_vnc(self, case: ProviderCase, runs: Path) -> Outcome:
        probe, screen = self._probe(), self.fixture("screen")
        since = len(case.standin.requests)
        argv = ["run", "--vnc", screen.server, "--task", TASK, "--thread-id", "recorded"]
        proc = self._cli(
            [*argv, *case.args, *case.option_words(), "--runs-dir", str(runs)],
            self._vnc_env(case),
        )
        return self._finish(case, probe, since, proc, runs)

    def _run_rdp(self, case: ProviderCase, runs: Path) -> Outcome:
        probe, rdp = self._probe(), self.fixture("rdp")
        since = len(case.standin.requests)
        env = provider_env(case, VNC_USE_RDP_DIR=str(runs.parent / "rdp-state"))
        env = {k: v for k, v in env.items() if not k.startswith("RDP_")}
        argv = ["run", "--rdp", rdp.address, "--task", TASK, *case.args, *case.option_words()]
        proc = self._cli([*argv, "--runs-dir", str(runs)], env)
        return self._finish(case, probe, since, proc, runs)

    def _run_server(self, case: ProviderCase, runs: Path) -> Outcome:
        probe, screen, dev = self._probe(), self.fixture("screen"), self.fixture("server")
        since = len(case.standin.requests)
        argv = ["run", "--server", dev.url, "--vnc", screen.server]
        argv += ["--vnc-password-env", SERVED_PASSWORD_VARIABLE, "--task", TASK]
        proc = self._cli(
            [*argv, *case.args, *case.option_words(), "--runs-dir", str(runs)], provider_env(case)
        )
        return self._finish(case, probe, since, proc, runs)

    def _eval(self, case: ProviderCase, runs: Path) -> Outcome:
        probe, screen = self._probe(), self.fixture("screen")
        runs.mkdir(parents=True)
        tasks = runs / "tasks.jsonl"
        lines = [{"id": f"t{n}", "task": f"{TASK} ({n})", "check": "true"} for n in (1, 2)]
        tasks.write_text("".join(json.dumps(t) + "\n" for t in lines))
        takes = [o for o in case.options if o not in EVAL_REFUSES and o in eval_options()]
        argv = ["eval", str(tasks), "--out", str(runs / "out"), "--vnc", screen.server]
        since = len(case.standin.requests)
        proc = self._cli([*argv, *case.args, *case.option_words(takes)], self._vnc_env(case))
        out = self._finish(case, probe, since, proc, runs / "out", clicks=2)
        out.extra["taken"] = takes
        return out

    def _mcp(self, case: ProviderCase, runs: Path) -> Outcome:
        probe, screen = self._probe(), self.fixture("screen")
        since = len(case.standin.requests)
        # The model and its options are the MCP server's (`vnc-use mcp --provider ... --dialect
        # ...`): run_task then names only the task. `--confirm` is refused by `vnc-use mcp`.
        takes = [o for o in case.options if o != "--confirm"]
        model = [*case.args, *case.option_words(takes)]
        params = StdioServerParameters(
            command=CLI[0],
            args=[*CLI[1:], "mcp", "--vnc", screen.server, "--runs-dir", str(runs), *model],
            env=self._vnc_env(case),
        )
        found: dict[str, Any] = {}

        async def main() -> None:
            async with Client(params) as client:
                result = await client.call_tool("run_task", {"task": TASK})
                text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
                found.update(error=result.is_error, text=text)

        anyio.run(main)
        answer = _json_or_none(found["text"])
        status = answer.get("status") if isinstance(answer, dict) else None
        proc = subprocess.CompletedProcess(
            [], 0 if status == "done" and not found["error"] else 1, found["text"], ""
        )
        out = self._finish(case, probe, since, proc, runs)
        out.extra["status"] = status
        return out

    def _replay(self, case: ProviderCase, runs: Path) -> Outcome:
        recorded = self.outcome(case.name, "run-vnc")
        assert recorded.returncode == 0, recorded.output
        source = self.root / case.name / "run-vnc"
        probe, screen = self._probe(), self.fixture("screen")
        since = len(case.standin.requests)
        argv = ["replay", "recorded", "--vnc", screen.server, "--tolerance", "off"]
        argv += ["--replay-id", "replayed", "--runs-dir", str(source)]
        proc = self._cli(argv, self._vnc_env(case))
        out = self._finish(case, probe, since, proc, source / "replayed")
        return out

    def _resume(self, case: ProviderCase, runs: Path) -> Outcome:
        probe, screen = self._probe(), self.fixture("screen")
        since = len(case.standin.requests)
        env = self._vnc_env(case)
        argv = ["run", "--vnc", screen.server, "--task", f"{TASK} and {HOLD}"]
        argv += ["--thread-id", "killed", *case.args, *case.option_words()]
        child = subprocess.Popen(
            [*CLI, *argv, "--runs-dir", str(runs)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            # the click is done and journaled: the model is asked for the next turn
            assert case.holding.wait(90), "the run never got past its click"
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
            case.release()  # the held answer goes to a dead process
        killed = child.returncode
        proc = self._cli(["resume", "killed", "--runs-dir", str(runs)], env)
        out = self._finish(case, probe, since, proc, runs)
        out.extra["killed"] = killed
        return out


_EVAL_OPTIONS: list[str] = []


def eval_options() -> list[str]:
    """The options ``vnc-use eval --help`` lists (read once)."""
    if not _EVAL_OPTIONS:
        proc = subprocess.run(
            [*CLI, "eval", "--help"], capture_output=True, text=True, timeout=60, check=True
        )
        _EVAL_OPTIONS.extend(w.strip("[],") for w in proc.stdout.split() if w.startswith("-"))
    return _EVAL_OPTIONS


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _aimed(probe: Probe) -> tuple[int, int]:
    width, height = probe.size
    return round(width * TARGET[0]), round(height * TARGET[1])


def _presses(probe: Probe, count: int) -> list[tuple[int, int]]:
    """The presses the probe saw, once ``count`` arrived (or its wait ran out)."""
    with suppress(TimeoutError):
        probe.log.wait_for(lambda e: len(probe.log.events("press")) >= count, timeout=15)
    return [(e["x"], e["y"]) for e in probe.log.events("press")]


@pytest.fixture(scope="module")
def doors(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Doors:
    return Doors(request, tmp_path_factory.mktemp("matrix"))


def _cell(provider: str, door: str, reasons: dict[Any, str], key: Any) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason=reasons[key])] if key in reasons else []
    return pytest.param(provider, door, marks=marks, id=f"{provider}-{door}")


# ----------------------------------------------------------------------------- the cells

EXPECTED_CLICKS = {"eval": 2}
EXPECTED_STATUS = {"replay": "done"}


@pytest.mark.parametrize(
    ("provider", "door"),
    [_cell(p, d, XFAIL_DOORS, (p, d)) for p in PROVIDERS for d in DOORS],
)
def test_door_lands_its_click_and_ends_done(provider: str, door: str, doors: Doors) -> None:
    out = doors.outcome(provider, door)
    assert out.returncode == 0, out.output[-3000:]
    clicks = EXPECTED_CLICKS.get(door, 1)
    assert len(out.presses) == clicks, (out.presses, out.output[-2000:])
    for x, y in out.presses:
        assert abs(x - out.aimed[0]) <= TOLERANCE and abs(y - out.aimed[1]) <= TOLERANCE
    assert out.records and all(s == "done" for s in out.statuses), out.statuses
    kinds = {r.kind for r in out.records}
    if door == "run-server":
        assert kinds == {"served"}
    elif door == "mcp":  # run_task's run (and the tool session's, once a tool acted)
        assert "local" in kinds and kinds <= {"local", "mcp-session"}
    else:
        assert kinds == {"local"}
    _door_specifics(provider, door, out)


def _door_specifics(provider: str, door: str, out: Outcome) -> None:
    """What only some doors promise: no model in a replay, a real kill before a resume, the
    final answer where the door shows it."""
    if door == "replay":
        assert out.requests == [], "a replay asks no model"
        assert out.records[0].provider == "replay"
    if door == "resume":
        assert out.extra["killed"] == -signal.SIGKILL
    if door == "mcp":
        assert out.extra["status"] == "done" and FINAL in out.output
    elif door != "replay" and door != "eval":
        assert "status: done" in out.output and FINAL in out.output


def _option_cells() -> list[Any]:
    from matrix_providers import _MAKERS  # the option names, without starting a stand-in

    cells = []
    for provider in PROVIDERS:
        options = _MAKERS[provider]().options
        for door in OPTION_DOORS:
            for option in options:
                if door == "eval" and option in EVAL_REFUSES:
                    continue
                key = (provider, door, option)
                marks = (
                    [pytest.mark.xfail(strict=True, reason=XFAIL_OPTIONS[key])]
                    if key in XFAIL_OPTIONS
                    else []
                )
                cells.append(
                    pytest.param(
                        provider, door, option, marks=marks, id=f"{provider}-{door}-{option[2:]}"
                    )
                )
    return cells


@pytest.mark.parametrize(("provider", "door", "option"), _option_cells())
def test_option_reaches_the_request(
    provider: str, door: str, option: str, doors: Doors, cases: dict[str, ProviderCase]
) -> None:
    out = doors.outcome(provider, door)
    assert out.returncode == 0, out.output[-3000:]
    if door == "eval":
        assert option in out.extra["taken"], f"vnc-use eval has no {option}"
    assert out.requests, "the door asked no model"
    CHECKS[option](provider, out)


def _answered_requests(provider: str, out: Outcome) -> list[Any]:
    """The requests that carry the click's result (their images: the kept screenshots)."""
    from matrix_providers import _MAKERS

    answered = _MAKERS[provider]().answered
    found = [r for r in out.requests if answered(r.body)]
    assert found, "no request carried the click's result"
    return found


def _check_keep(provider: str, out: Outcome) -> None:
    from matrix_providers import images_in

    for request in _answered_requests(provider, out):
        assert len(images_in(request.body)) == 1, "--keep-screenshots 1 sent more images"


def _check_tool_version(provider: str, out: Outcome) -> None:
    want = {"anthropic": "computer_20250124", "openai": "computer"}[provider]
    for request in out.requests:
        types = [t.get("type") for t in request.body.get("tools", [])]
        assert want in types, types


def _check_api_version(provider: str, out: Outcome) -> None:
    assert {r.api_version for r in out.requests} == {"v1alpha"}


def _check_environment(provider: str, out: Outcome) -> None:
    for request in out.requests:
        assert (request.computer_use_tool() or {}).get("environment") == "ENVIRONMENT_DESKTOP"


def _check_exclude(provider: str, out: Outcome) -> None:
    for request in out.requests:
        assert "drag_and_drop" in json.dumps(request.body.get("tools"))


def _check_dialect(provider: str, out: Outcome) -> None:
    for request in out.requests:
        names = [t.get("function", {}).get("name") for t in request.body.get("tools") or []]
        assert "click" in names, names  # the tools dialect's native tools (not qwen3-vl's)


def _check_confirm(provider: str, out: Outcome) -> None:
    """--confirm is vnc-use's own approval gate (never sent to a model): the run records it."""
    runs = [r for r in out.records if r.kind != "mcp-session"]
    assert runs and all(r.confirm_actions == ["drag_and_drop"] for r in runs)


CHECKS = {
    "--keep-screenshots": _check_keep,
    "--tool-version": _check_tool_version,
    "--api-version": _check_api_version,
    "--environment": _check_environment,
    "--exclude": _check_exclude,
    "--dialect": _check_dialect,
    "--confirm": _check_confirm,
}

ALL_OPTIONS = [
    *("--tool-version", "computer_20250124", "--dialect", "tools", "--keep-screenshots", "1"),
    *("--api-version", "v1alpha", "--environment", "desktop", "--exclude", "drag_and_drop"),
    *("--confirm", "drag_and_drop"),
]


@pytest.mark.parametrize(
    ("door", "argv", "refused"),
    [
        # mcp takes the model options (the defaults of run_task's runs), not --confirm
        pytest.param("mcp", ["mcp", "--vnc", "127.0.0.1::5999"], ["--confirm", "type"], id="mcp"),
        pytest.param("replay", ["replay", "some-run"], ALL_OPTIONS, id="replay"),
        pytest.param("resume", ["resume", "some-run"], ALL_OPTIONS, id="resume"),
        pytest.param(
            "eval", ["eval", "tasks.yaml", "--out", "out"], ["--confirm", "type"], id="eval"
        ),
    ],
)
def test_a_door_refuses_the_options_it_cannot_honour_in_one_line(
    door: str, argv: list[str], refused: list[str], tmp_path: Path
) -> None:
    proc = subprocess.run(
        [*CLI, *argv, "--runs-dir", str(tmp_path), *refused]
        if door != "eval"
        else [*CLI, *argv, *refused],
        env=provider_env(None),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    # argparse's usage lines, then one error line naming every refused option
    errors = [
        line
        for line in proc.stderr.splitlines()
        if line.strip() and not line.startswith(("usage:", " "))
    ]
    assert len(errors) == 1, proc.stderr
    for word in refused:
        if word.startswith("--"):
            assert word in errors[0]
    assert not list(tmp_path.rglob("run.json"))
