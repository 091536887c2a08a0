"""Choosing the provider and approving by policy, from the command line and from Python.

``vnc-use run --provider openai-compatible --base-url URL --model ID [--dialect NAME]`` drives
the real desktop through the real ``openai`` SDK against the OpenAI stand-in (started in this
process); ``--confirm NAME`` stops those actions at the approval gate for every provider, and
``vnc-use approve`` in a new process rebuilds the same planner from run.json.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from vnc_use.agent import VncUseAgent
from vnc_use.errors import ConfigError
from vnc_use.providers.openai_compat import OpenAICompatPlanner
from vnc_use.testing.fake import FakeDesktop
from vnc_use.testing.gemini_standin import (
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    require_confirmation,
)
from vnc_use.testing.openai_standin import OpenAIStandIn, ToolCall
from vnc_use.testing.openai_standin import Reply as OpenAIReply

from cli_tools import run_cli
from desktop_fixtures import Probe
from doc_pages import blocks, page

KEY_MARKER = "sk-marker-never-recorded-7f3a"


def grid(probe: Probe, point: tuple[int, int]) -> tuple[int, int]:
    """A screen pixel of the probe's desktop on the 0-999 grid."""
    w, h = probe.size
    return round(point[0] * 1000 / w), round(point[1] * 1000 / h)


def files_holding(folder: Path, text: str) -> list[Path]:
    """Every file under ``folder`` whose bytes contain ``text``."""
    needle = text.encode()
    return [p for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()]


@pytest.mark.desktop
def test_openai_compatible_run_stops_before_a_confirmed_type_until_approved(
    probe: Probe, tmp_path: Path
) -> None:
    ex, ey = grid(probe, probe.entry_center)
    text = "typed after approval"
    script = [
        OpenAIReply.tool_calls(
            ToolCall("click", {"x": ex, "y": ey, "intent": "focus the entry"}),
            ToolCall("type", {"text": text, "press_enter": True}),
        ),
        OpenAIReply.text("The text is in."),
    ]
    with OpenAIStandIn(script, models="qwen2.5-7b-instruct", expected_api_key=KEY_MARKER) as server:
        base = ["--runs-dir", str(tmp_path)]
        env = {"env": {"OPENAI_API_KEY": KEY_MARKER}}
        proc = run_cli(
            [
                *("run", "--vnc", probe.desktop.server, "--task", "Type it", "--thread-id", "oc"),
                *("--provider", "openai-compatible", "--base-url", server.base_url),
                *("--model", "qwen2.5-7b-instruct", "--dialect", "tools", "--confirm", "type"),
                *base,
            ],
            probe.desktop,
            **env,
        )
        assert proc.returncode == 3, proc.stdout + proc.stderr
        assert "vnc-use approve oc" in proc.stdout
        assert "approval policy" in proc.stdout and "--confirm type" in proc.stdout
        probe.log.wait_type("press")  # the click before it ran
        assert probe.log.events("key") == [] and probe.log.events("submit") == []

        settings = json.loads((tmp_path / "oc" / "run.json").read_text())
        assert settings["provider"] == "openai-compatible"
        assert settings["base_url"] == server.base_url
        assert settings["model"] == "qwen2.5-7b-instruct"
        assert settings["dialect"] == "tools"
        assert settings["confirm_actions"] == ["type"]
        assert settings["keep_screenshots"] == 2  # the provider's own default

        proc = run_cli(["approve", "oc", *base], probe.desktop, **env)  # a new process
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "status: done" in proc.stdout and "answer: The text is in." in proc.stdout
        assert probe.log.wait_type("submit")["text"].endswith(text)
        assert len(server.requests) == 2 and not server.violations
        assert server.requests[1].model == "qwen2.5-7b-instruct"
        assert not server.exhausted
    # the key went to the server, never into the run folder or the checkpoints
    assert files_holding(tmp_path, KEY_MARKER) == []
    events = [json.loads(line) for line in (tmp_path / "oc" / "events.jsonl").open()]
    approved = [e for e in events if e["event"] == "approved"]
    assert approved and approved[0]["asked_by"] == "policy"


@pytest.mark.desktop
def test_gemini_run_with_confirm_pauses_and_sends_no_acknowledgement(
    probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """The model did not ask, so its approval is acknowledged to nobody (the Gemini API rejects
    a safety_acknowledgement for a call it did not mark)."""
    gemini.script(Reply.calls(FunctionCallSpec("click_at", x=500, y=500)), Reply.text("clicked it"))
    base = ["--runs-dir", str(tmp_path)]
    args = ["--task", "Click", "--thread-id", "gc", "--confirm", "click_at"]
    proc = run_cli(["run", "--vnc", probe.desktop.server, *args, *base], probe.desktop)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert probe.log.events("press") == []
    assert json.loads((tmp_path / "gc" / "run.json").read_text())["confirm_actions"] == ["click_at"]
    proc = run_cli(["approve", "gc", *base], probe.desktop)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert probe.log.wait_type("press")["x"] == 720
    (response,) = gemini.requests[1].function_responses()
    assert "safety_acknowledgement" not in response["response"]


def test_run_help_names_the_providers_without_importing_openai() -> None:
    code = (
        "import contextlib, io, sys\n"
        "from vnc_use.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        "    main(['run', '--help'])\n"
        "print(out.getvalue())\n"
        "print('openai imported:', 'openai' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    for option in ("--provider", "--base-url", "--dialect", "--keep-screenshots", "--confirm"):
        assert option in proc.stdout
    assert "openai imported: False" in proc.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["--provider", "klingon"],
            ["unknown provider 'klingon'", "gemini, anthropic, openai, openai-compatible"],
        ),
        (["--provider", "openai-compatible", "--model", "m"], ["--base-url", "localhost:1234/v1"]),
        (
            [
                *("--provider", "openai-compatible", "--base-url", "http://127.0.0.1:9/v1"),
                *("--model", "m", "--dialect", "klingon"),
            ],
            ["unknown dialect 'klingon'", "tools, qwen3-vl"],
        ),
        (["--dialect", "tools"], ["--dialect", "--provider openai-compatible"]),
        (
            [
                *("--provider", "openai-compatible", "--base-url", "http://127.0.0.1:9/v1"),
                *("--model", "m", "--exclude", "type"),
            ],
            ["--exclude", "gemini provider only", "--confirm"],
        ),
        (["--confirm", "typo"], ["unknown action 'typo'", "all", "type, type_text_at"]),
    ],
)
def test_bad_provider_settings_are_one_line_and_exit_2(
    args: list[str], words: list[str], tmp_path: Path
) -> None:
    proc = run_cli(
        ["run", "--vnc", "127.0.0.1::5999", "--task", "x", "--runs-dir", str(tmp_path), *args]
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for word in words:
        assert word in lines[0]
    assert not list(tmp_path.glob("*/run.json"))


def test_python_provider_keep_screenshots_and_policy(tmp_path: Path) -> None:
    desktop = FakeDesktop(1000, 500)
    script = [
        OpenAIReply.tool_calls(ToolCall("type", {"text": "hi"})),
        OpenAIReply.text("done"),
    ]
    with OpenAIStandIn(script, models="qwen3-vl-8b") as server:
        agent = VncUseAgent(
            provider="openai-compatible",
            base_url=server.base_url,
            model="qwen3-vl-8b",
            dialect="tools",
            confirm_actions=["type"],
            desktop=desktop,
            runs_dir=tmp_path,
        )
        with agent:
            assert isinstance(agent.planner, OpenAICompatPlanner)
            assert agent.settings.keep_screenshots == 2
            result = agent.run("Say hi", thread_id="py")
            assert result.status == "awaiting_approval" and result.pending_call
            assert result.pending_call["asked_by"] == "policy"
            assert "--confirm type" in result.pending_call["explanation"]
            assert desktop.text == ""
            assert agent.approve("py").status == "done"
        assert desktop.text == "hi"
    # a keep_screenshots of the user's own wins over the planner's
    planner = OpenAICompatPlanner("http://127.0.0.1:9/v1", "m", keep_screenshots=4)
    with VncUseAgent(planner=planner, desktop=FakeDesktop(), runs_dir=tmp_path) as agent:
        assert agent.settings.keep_screenshots == 4
    with VncUseAgent(
        planner=planner, keep_screenshots=1, desktop=FakeDesktop(), runs_dir=tmp_path
    ) as agent:
        assert agent.settings.keep_screenshots == 1
    with pytest.raises(ConfigError, match="unknown action 'typo'"):
        VncUseAgent(confirm_actions=["typo"], desktop=FakeDesktop(), runs_dir=tmp_path)


def _readme_block(marker: str, lang: str = "sh") -> str:
    """The fenced ``lang`` block of docs/local-models.md that contains ``marker``."""
    for block in blocks(page("local-models.md"), lang):
        if marker in block:
            return block
    raise AssertionError(f"no {lang} block with {marker!r} in docs/local-models.md")


@pytest.mark.desktop
def test_readme_local_models_stand_in_command_pair(probe: Probe, tmp_path: Path) -> None:
    """The docs' stand-in pair, as printed there: its script.json, the stand-in command,
    then `vnc-use run` pointed at it (plus this test's desktop and runs folder)."""
    lines = _readme_block("python -m vnc_use.testing.openai_standin").strip().splitlines()
    standin_line, run_line = lines[-2], lines[-1]
    standin_argv = shlex.split(standin_line.rstrip("&").strip())
    run_argv = shlex.split(run_line)
    assert standin_argv[:3] == ["python", "-m", "vnc_use.testing.openai_standin"]
    assert run_argv[:2] == ["vnc-use", "run"]
    script_name = standin_argv[standin_argv.index("--script") + 1]
    port = standin_argv[standin_argv.index("--port") + 1]
    (tmp_path / script_name).write_text(_readme_block('"tool_calls"', "json"))
    standin = subprocess.Popen(
        [sys.executable, *standin_argv[1:]], cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    try:
        assert standin.stdout is not None
        base_url = standin.stdout.readline().strip()
        assert base_url == f"http://127.0.0.1:{port}/v1" and base_url in run_argv
        proc = subprocess.run(
            [
                str(Path(sys.executable).parent / "vnc-use"),
                *run_argv[1:],
                *("--vnc", probe.desktop.server, "--runs-dir", str(tmp_path / "runs")),
            ],
            env={**os.environ, "VNC_PASSWORD": probe.desktop.password},
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    finally:
        standin.terminate()
        standin.wait(timeout=10)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "status: done" in proc.stdout
    press = probe.log.wait_type("press")
    assert (press["x"], press["y"]) == (720, 450)


FINISH_IN = {
    "tools": "All done.",
    "qwen3-vl": '<tool_call>\n{"name": "computer_use", "arguments": {"action": "terminate", '
    '"status": "success"}}\n</tool_call>',
    "ui-tars": "Thought: it is done.\nAction: finished(content='All done.')",
}
FINISH_IN["qwen2.5-vl"] = FINISH_IN["qwen3-vl"]
FINISH_IN["holo"] = (
    '{"note": null, "thought": "Done.", "tool_call": {"tool_name": "answer", "text": "All done."}}'
)
FINISH_IN["ui-venus"] = "<think>Done.</think>\n<action>Finished(content='All done.')</action>"
FINISH_IN["opencua"] = (
    "## Thought:\nDone.\n\n## Code:\n```python\ncomputer.terminate(status='success')\n```"
)

SERVER_ADDRESSES = {  # each server's documented default
    "http://localhost:1234/v1",  # LM Studio
    "http://localhost:11434/v1",  # Ollama
    "http://localhost:8000/v1",  # vLLM
}


@pytest.mark.desktop
def test_readme_local_models_commands_run_against_the_stand_in(
    probe: Probe, tmp_path: Path
) -> None:
    """Every `vnc-use run` line of docs/local-models.md, with its server's address swapped for
    the stand-in's (serving that model id, answering a finish in the dialect the command
    picks): it runs to `done` with that dialect."""
    from vnc_use.providers.openai_compat import dialect_for_model

    commands = [
        shlex.split(line)
        for block in blocks(page("local-models.md"), "sh")
        for line in block.splitlines()
        if line.startswith("vnc-use run") and "127.0.0.1" not in line  # the stand-in pair
    ]
    assert len(commands) >= 4
    assert {argv[argv.index("--base-url") + 1] for argv in commands} == SERVER_ADDRESSES
    for n, argv in enumerate(commands):
        model = argv[argv.index("--model") + 1]
        dialect = argv[argv.index("--dialect") + 1] if "--dialect" in argv else None
        dialect = dialect or dialect_for_model(model)
        with OpenAIStandIn([OpenAIReply.text(FINISH_IN[dialect])], models=model) as server:
            argv[argv.index("--base-url") + 1] = server.base_url
            runs = tmp_path / str(n)
            proc = run_cli(
                [*argv[1:], "--vnc", probe.desktop.server, "--runs-dir", str(runs)],
                probe.desktop,
            )
            assert proc.returncode == 0, (argv, proc.stdout + proc.stderr)
            assert [r.model for r in server.requests] == [model]
        (settings,) = [json.loads(p.read_text()) for p in runs.glob("*/run.json")]
        assert (settings["model"], settings["dialect"]) == (model, dialect)


def test_policy_and_model_together_and_without_a_person(
    gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """A call both the model and the policy ask about is acknowledged (the model asked); with
    hitl_mode off a policy call is denied, never run."""
    marked = FunctionCallSpec(
        "click_at", x=500, y=500, safety_decision=require_confirmation("Submits the form.")
    )
    gemini.script(Reply.calls(marked), Reply.text("done"))
    desktop = FakeDesktop()
    with VncUseAgent(desktop=desktop, confirm_actions=["all"], runs_dir=tmp_path / "a") as agent:
        result = agent.run("Submit", thread_id="both")
        assert result.pending_call and result.pending_call["asked_by"] == "model and policy"
        assert result.pending_call["explanation"] == "Submits the form."
        assert agent.approve("both").status == "done"
    (response,) = gemini.requests[1].function_responses()
    assert response["response"]["safety_acknowledgement"] == "true"

    gemini.script(Reply.calls(FunctionCallSpec("click_at", x=500, y=500)), Reply.text("never"))
    desktop = FakeDesktop()
    with VncUseAgent(
        desktop=desktop, confirm_actions=["click_at"], hitl_mode=False, runs_dir=tmp_path / "b"
    ) as agent:
        result = agent.run("Click", thread_id="nohitl")
    assert result.status == "denied" and "approval policy" in (result.error or "")
    assert desktop.events_of("click") == []
