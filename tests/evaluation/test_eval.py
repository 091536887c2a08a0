"""``vnc-use eval``: the built-in suite is sound (an oracle passes every task, an anti-oracle
fails every one), on two real local desktops with the Gemini stand-in; resume after Ctrl-C,
``setup_failed``, a check that overruns, approvals and budgets, and bad task files."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vnc_use.errors import ConfigError
from vnc_use.evaluation.results import wilson_interval
from vnc_use.evaluation.tasks import Task, load_tasks, suite_path
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.gemini_standin import require_confirmation as confirm

from chromium import Browser
from cli_tools import CLI, run_cli
from doc_pages import blocks, page
from eval_oracle import anti_oracle, oracle
from gemini_fixtures import DUMMY_API_KEY

RESULT_FIELDS = [
    "id",
    "repeat",
    "success",
    "outcome",
    "status",
    "steps",
    "seconds",
    "thread_id",
    "report",
    "error",
    "cost_usd",
]
SUITE = load_tasks(suite_path("builtin")).tasks


def results(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def summary(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return data


def asked_about(api: GeminiStandIn, text: str) -> int:
    """How many requests the stand-in got for the task ``text``."""
    return sum(text in json.dumps(r.body.get("contents", [])[:1]) for r in api.requests)


def no_desktop_left(out: Path) -> None:
    for folder in (out / "desktops").glob("desktop-*"):
        assert not (folder / "state.json").exists(), f"{folder} still runs"
        assert not (folder / "credentials.json").exists()


# ------------------------------------------------------------------------ the built-in suite


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Any:
    b = Browser(tmp_path_factory.mktemp("chromium") / "profile")
    try:
        yield b
    finally:
        b.close()


def run_suite(out: Path, api: GeminiStandIn, script: Callable[..., Any]) -> None:
    api.script(script)
    done = run_cli(
        ["eval", "--suite", "builtin", "--desktops", "2", "--out", str(out)], timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not api.violations
    no_desktop_left(out)


INDEX_FACTS = """(() => {
  const rows = [...document.querySelectorAll('tbody tr')];
  return {
    ids: rows.map(r => r.cells[0].innerText),
    links: [...document.querySelectorAll('tbody a')].map(a => a.getAttribute('href')),
    header: [...document.querySelectorAll('th')].map(th => th.innerText.trim()),
  };
})()"""


@pytest.mark.desktop
@pytest.mark.timeout(600)
def test_the_oracle_passes_every_builtin_task(
    gemini: GeminiStandIn, tmp_path: Path, browser: Browser
) -> None:
    out = tmp_path / "oracle"
    run_suite(out, gemini, oracle(SUITE))
    got = results(out)
    assert len(SUITE) >= 20 and sorted(r["id"] for r in got) == sorted(t.id for t in SUITE)
    failed = {r["id"]: r["error"] for r in got if not r["success"]}
    assert failed == {}, "every setup and check of the suite is right"
    for r in got:
        assert list(r) == RESULT_FIELDS
        assert r["outcome"] == "passed" and r["status"] == "done" and r["steps"] >= 1
        assert (out / r["report"]).is_file()
    s = summary(out)
    assert (s["tasks"], s["runs"], s["passed"], s["success_rate"]) == (len(SUITE),) * 3 + (1.0,)
    assert s["success_rate_95"] == [round(wilson_interval(len(SUITE), len(SUITE))[0], 4), 1.0]
    assert s["outcomes"]["passed"] == len(SUITE) and s["complete"] is True
    assert s["model"].startswith("gemini-2.5") and s["provider"] == "gemini" and s["version"]
    assert s["median_steps"] >= 1 and s["median_seconds"] > 0
    written = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert DUMMY_API_KEY.encode() not in written

    # index.html: one row per run, each linking to its report; sortable by a header click
    page = browser.new_page()
    page.open((out / "index.html").as_uri())
    assert page.problems() == []
    facts = page.evaluate(INDEX_FACTS)
    assert sorted(facts["ids"]) == sorted(t.id for t in SUITE)
    assert all((out / link).is_file() for link in facts["links"])
    reports = [link for link in facts["links"] if link.endswith("/report.html")]
    videos = [link for link in facts["links"] if link.endswith("/video.mp4")]
    assert len(reports) == 22 and len(videos) == 22  # each task's video (issue 32)
    assert sorted(Path(v).parent for v in videos) == sorted(Path(r).parent for r in reports)
    column = facts["header"].index("steps")
    steps_of = f"[...document.querySelectorAll('tbody tr')].map(r => +r.cells[{column}].innerText)"
    page.evaluate(f"document.querySelectorAll('th')[{column}].click()")
    ascending = page.evaluate(steps_of)
    assert ascending == sorted(ascending) and ascending[0] < ascending[-1]
    page.evaluate(f"document.querySelectorAll('th')[{column}].click()")
    assert page.evaluate(steps_of) == sorted(ascending, reverse=True)


@pytest.mark.desktop
@pytest.mark.timeout(600)
def test_the_anti_oracle_fails_every_builtin_task(gemini: GeminiStandIn, tmp_path: Path) -> None:
    out = tmp_path / "anti"
    run_suite(out, gemini, anti_oracle(SUITE))
    got = results(out)
    assert sorted(r["id"] for r in got) == sorted(t.id for t in SUITE)
    passed = [r["id"] for r in got if r["success"]]
    assert passed == [], "no check passes without the work done"
    assert {r["outcome"] for r in got} == {"failed"}
    assert {r["steps"] for r in got} >= {0, 1}  # no action at all, and wrong actions
    s = summary(out)
    assert s["passed"] == 0 and s["success_rate"] == 0.0 and s["outcomes"]["failed"] == len(SUITE)


# ------------------------------------------------------------------ outcomes other than pass


def write_tasks(path: Path, tasks: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks), "utf-8")
    return path


def by_task(plans: dict[str, list[list[FunctionCallSpec]]]) -> Callable[..., Reply]:
    """A script function: each task's steps, found by the task text, then 'done'."""

    def script(request: dict[str, Any], index: int) -> Reply:
        first = json.dumps(request["contents"][0])
        turn = sum(c.get("role") == "model" for c in request["contents"])
        for text, steps in plans.items():
            if text in first:
                return Reply.calls(*steps[turn]) if turn < len(steps) else Reply.text("done")
        return Reply.text("unknown task")

    return script


def shell(command: str) -> list[FunctionCallSpec]:
    return [
        FunctionCallSpec(
            "type_text_at", x=150, y=300, text=command, press_enter=True, clear_before_typing=False
        )
    ]


@pytest.mark.desktop
def test_setup_failed_a_check_that_overruns_denied_and_budget(
    gemini: GeminiStandIn, tmp_path: Path
) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {
                "id": "bad-setup",
                "task": "never asked",
                "setup": ["true", "exit 3"],
                "check": "true",
            },
            {
                "id": "slow-check",
                "task": "write ok into ~/ok.txt",
                "check": "sleep 30",
                "command_timeout": 1,
            },
            {"id": "asks", "task": "delete everything", "check": "test -e ~/gone"},
            {"id": "long", "task": "take two steps", "check": "false", "step_limit": 1},
        ],
    )
    gemini.script(
        by_task(
            {
                "write ok": [shell("echo ok > ~/ok.txt")],
                "delete everything": [
                    [
                        FunctionCallSpec(
                            "click_at", x=100, y=100, safety_decision=confirm("Risky: deletes")
                        )
                    ]
                ],
                "two steps": [shell("true"), shell("true")],
            }
        )
    )
    out = tmp_path / "out"
    done = run_cli(["eval", str(tasks), "--out", str(out)], timeout=180)
    assert done.returncode == 0, done.stderr
    got = {r["id"]: r for r in results(out)}
    assert got["bad-setup"]["outcome"] == "setup_failed" and not got["bad-setup"]["success"]
    assert "'exit 3' exited with status 3" in got["bad-setup"]["error"]
    assert asked_about(gemini, "never asked") == 0, "a failed setup never reaches the model"
    assert got["slow-check"]["outcome"] == "failed" and got["slow-check"]["status"] == "done"
    assert "'sleep 30' timed out after 1 s" in got["slow-check"]["error"]
    assert got["asks"]["outcome"] == "denied" and got["asks"]["status"] == "denied"
    assert got["long"]["outcome"] == "budget" and got["long"]["status"] == "step_limit"
    s = summary(out)
    assert s["outcomes"] | {} == {
        "passed": 0,
        "failed": 1,
        "setup_failed": 1,
        "error": 0,
        "denied": 1,
        "blocked": 0,
        "budget": 1,
        "stuck": 0,
    }
    # issue 38 item 9: the run whose setup failed never reached the model: not in the rate
    assert (s["runs"], s["scored_runs"], s["success_rate"]) == (4, 3, 0.0)
    assert s["success_rate_95"] == [0.0, round(wilson_interval(0, 3)[1], 4)]
    assert "passed 0 of 3 runs (1 whose setup failed not counted)" in done.stdout
    no_desktop_left(out)


@pytest.mark.desktop
def test_ctrl_c_stops_cleanly_and_a_rerun_goes_on(gemini: GeminiStandIn, tmp_path: Path) -> None:
    names = ["one", "two", "three", "four"]
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"id": n, "task": f"write {n} into ~/{n}.txt", "check": f"grep -qx {n} ~/{n}.txt"}
            for n in names
        ],
    )
    wait = [FunctionCallSpec("wait_5_seconds")]
    plans = {f"write {n} into": [wait, shell(f"echo {n} > ~/{n}.txt")] for n in names}
    plans["write one into"] = [shell("echo one > ~/one.txt")]
    gemini.script(by_task(plans))
    out = tmp_path / "out"
    argv = [*CLI, "eval", str(tasks), "--out", str(out), "--reuse-desktops"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (out / "results.jsonl").exists() or not results(out):
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr
            time.sleep(0.1)
        while not asked_about(gemini, "write two into"):  # task two's first step: a wait
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr
    assert "stopping the evaluation" in stderr and "Traceback" not in stderr
    first = results(out)
    assert [r["id"] for r in first] == ["one"], "the stopped task is not recorded"
    assert summary(out)["interrupted"] is True and summary(out)["complete"] is False
    no_desktop_left(out)

    for n in names:  # no more waiting: the rerun needs no time to be stopped in
        plans[f"write {n} into"] = [shell(f"echo {n} > ~/{n}.txt")]
    again = run_cli(["eval", str(tasks), "--out", str(out)], timeout=120)
    assert again.returncode == 0, again.stderr
    assert "1 of 4 task runs already done" in again.stdout
    got = results(out)
    assert sorted(r["id"] for r in got) == sorted(names) and all(r["success"] for r in got)
    assert asked_about(gemini, "write one into") == 2, "task one ran once (two model turns)"
    assert summary(out)["complete"] is True and summary(out)["passed"] == 4


# ---------------------------------------------------------------------------- bad task files


@pytest.mark.parametrize(
    ("text", "suffix", "expected"),
    [
        ("- id: a\n  task: t\n", ".yaml", "entry 1 (id 'a'): field 'check' is required"),
        (
            "- {id: a, task: t, check: 'true'}\n- {id: b, task: t, check: 'true', step_limit: 0}\n",
            ".yaml",
            "entry 2 (id 'b'): field 'step_limit': input should be greater than or equal to 1",
        ),
        (
            "- {id: 'a b', task: t, check: x}\n",
            ".yml",
            "entry 1 (id 'a b'): field 'id': use 1-64 letters",
        ),
        ("- {id: a, task: t, check: x, chek: y}\n", ".yaml", "field 'chek' is not a task field"),
        ("- {id: a, task: t, check: x}\n- {id: a, task: u, check: y}\n", ".yaml", "used twice"),
        ('{"id": "a", "task": "t"}\n', ".jsonl", "entry 1 (id 'a'): field 'check' is required"),
        ("{not json\n", ".jsonl", "line 1 is not JSON"),
        ("- id: [\n", ".yaml", "not valid YAML at line"),
        ("id: a\n", ".yaml", "must be a list of tasks"),
    ],
)
def test_a_bad_task_file_is_one_line_naming_the_entry_and_field(
    tmp_path: Path, text: str, suffix: str, expected: str
) -> None:
    path = tmp_path / f"tasks{suffix}"
    path.write_text(text, "utf-8")
    with pytest.raises(ConfigError) as caught:
        load_tasks(path)
    message = str(caught.value)
    assert "\n" not in message and expected in message and str(path) in message


def test_a_bad_task_file_on_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "tasks.yaml"
    path.write_text("- id: a\n  task: t\n  check: 'true'\n  step_limit: -1\n", "utf-8")
    done = run_cli(["eval", str(path), "--out", str(tmp_path / "out")], timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"vnc-use: {path}: entry 1 (id 'a'): field 'step_limit': input should be greater than "
        "or equal to 1"
    ]
    assert not (tmp_path / "out").exists(), "nothing starts for a bad file"


@pytest.mark.parametrize("where", [["--vnc", "127.0.0.1::5999"], ["--rdp", "127.0.0.1:3399"]])
def test_the_builtin_suite_on_a_desktop_it_cannot_set_up_is_refused(
    tmp_path: Path, where: list[str]
) -> None:
    """Issue 38 item 9: ``--suite builtin --vnc ADDR`` ran its setups without that desktop's
    DISPLAY and its checks in the wrong HOME ("passed 0 of 2", exit 0): one line, exit 2."""
    out = tmp_path / "out"
    argv = ["eval", "--suite", "builtin", *where, "--out", str(out)]
    done = run_cli(argv, timeout=60, env={"GOOGLE_API_KEY": DUMMY_API_KEY})
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("vnc-use: --suite builtin sets up and checks its tasks on the local")
    assert f"drop {where[0]}" in line
    assert not (out / "results.jsonl").exists()


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"VNC_PASSWORD": ""}, "eval --server starts local desktops with the password in"),
        ({"VNC_PASSWORD": "pw-eval1"}, "cannot reach the server at http://127.0.0.1:9"),
    ],
)
def test_eval_server_problems_are_one_line(tmp_path: Path, env: dict[str, str], says: str) -> None:
    """--server: no shared password for the local desktops, or no server: one line, exit 2,
    no desktop started."""
    path = write_tasks(tmp_path / "tasks.jsonl", [{"id": "a", "task": "t", "check": "true"}])
    out = tmp_path / "out"
    argv = ["eval", str(path), "--out", str(out), "--server", "http://127.0.0.1:9"]
    done = run_cli(argv, timeout=60, env=env)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert says in line
    assert not (out / "desktops").exists()


def test_tasks_and_suite_files() -> None:
    assert len(SUITE) >= 20 and len({t.id for t in SUITE}) == len(SUITE)
    assert all(isinstance(t, Task) and t.setup for t in SUITE)
    # the pages the setups open are package data (shipped in the wheel next to tasks.yaml)
    pages = {m for t in SUITE for c in t.setup for m in re.findall(r"pages/([\w.-]+)", c)}
    assert len(pages) >= 8
    assert all((suite_path("builtin").parent / "pages" / page).is_file() for page in pages)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(5, 10)
    assert abs(low - 0.2366) < 1e-4 and abs(high - 0.7634) < 1e-4


# ------------------------------------------------------------------------------- the docs


@pytest.mark.desktop
def test_the_readme_task_file_and_command(gemini: GeminiStandIn, tmp_path: Path) -> None:
    """docs/eval.md: its example task file, run by its `vnc-use eval tasks.yaml ...` line as
    written (two desktops, each task twice), solved by a scripted model."""
    section = page("eval.md")
    (example,) = blocks(section, "yaml")
    (tmp_path / "tasks.yaml").write_text(example, "utf-8")
    line = next(x for x in section.splitlines() if x.startswith("vnc-use eval tasks.yaml"))
    task = load_tasks(tmp_path / "tasks.yaml").tasks[0]
    gemini.script(by_task({task.task: [shell("echo ready > ~/note.txt")]}))
    done = run_cli(line.split()[1:], timeout=180, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    got = results(tmp_path / "eval-out")
    assert sorted((r["id"], r["repeat"]) for r in got) == [("save-note", 0), ("save-note", 1)]
    assert all(r["success"] for r in got)
    assert "passed 2 of 2 runs" in done.stdout


@pytest.mark.desktop
def test_desktops_given_with_vnc_are_used_as_they_are(
    gemini: GeminiStandIn, desktop: TestDesktop, tmp_path: Path
) -> None:
    """--vnc ADDR: no desktop is started; setup and check run here with VNC_SERVER set and
    the task's private folder; the password comes from VNC_PASSWORD and is never written."""
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {
                "id": "given",
                "task": "look at the given desktop",
                "setup": 'echo "$VNC_SERVER" > "$EVAL_TASK_DIR/server"',
                "check": 'test "$(cat "$EVAL_TASK_DIR/server")" = "$VNC_SERVER"',
            }
        ],
    )
    gemini.script(by_task({"look at the given desktop": []}))
    out = tmp_path / "out"
    argv = ["eval", str(tasks), "--out", str(out), "--vnc", desktop.server, "--approve-all"]
    done = run_cli(argv, desktop=desktop, timeout=120)
    assert done.returncode == 0, done.stderr
    (got,) = results(out)
    assert got["success"] and got["status"] == "done"
    assert not (out / "desktops").exists() and desktop.running
    written = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert desktop.password.encode() not in written
