"""One run description (issue 29 items 1-2): RunSpec, its DesktopTarget, and the doors.

Every door builds a :class:`~vnc_use.runs.spec.RunSpec` in one function from its own input;
an option it cannot honour is refused, never dropped (``run --server --tool-version`` is now
carried; ``eval`` takes ``--tool-version``). The local desktop serves every provider: the
provider's own readiness check (its API key) runs before any desktop starts, and with the key
the run reaches the local desktop and its stand-in sees the desktop's screenshot.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vnc_use.cli import build_parser
from vnc_use.cli.spec import eval_spec, run_spec
from vnc_use.desktops.local import ENV_STATE_DIR, LocalDesktop
from vnc_use.desktops.target import DesktopTarget
from vnc_use.errors import ConfigError
from vnc_use.runs.agent import VncUseAgent
from vnc_use.runs.spec import RunSpec

VNC_USE = str(Path(sys.executable).parent / "vnc-use")
NO_KEYS = {
    k: ""
    for k in (
        "GOOGLE_API_KEY",
        "GEMINI_API_KEY",
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "VNC_PASSWORD",
    )
}


def vnc_use(
    *args: str, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [VNC_USE, *args],
        env={**os.environ, **NO_KEYS, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def parse(*argv: str) -> Any:
    return build_parser().parse_args(list(argv))


# --------------------------------------------------------------------------- the spec


def test_the_spec_alone_holds_the_defaults() -> None:
    args = parse("run", "--task", "x")
    assert args.step_limit is None and args.timeout is None  # left to the spec
    spec = run_spec(args)
    assert (spec.step_limit, spec.seconds_timeout) == (RunSpec.step_limit, RunSpec.seconds_timeout)
    assert spec.desktop.local and spec.desktop.lease_key == "localhost::5901"


def test_old_flat_contexts_still_read_and_secrets_are_refused_at_any_depth() -> None:
    old = {"vnc_server": "h::5902", "vnc_password_env": "PW", "rdp_size": None, "step_limit": 3}
    spec = RunSpec.from_context(old)
    assert spec.desktop.vnc_server == "h::5902" and spec.desktop.vnc_password_env == "PW"
    assert RunSpec.from_context(spec.to_json()) == spec  # the nested form round-trips
    with pytest.raises(ConfigError, match="never send a secret"):
        RunSpec.from_context({"desktop": {"vnc_password": "hunter2"}})


def test_run_server_carries_tool_version_and_eval_takes_it() -> None:
    args = parse(
        "run",
        "--server",
        "http://127.0.0.1:9",
        "--vnc",
        "h::5901",
        "--task",
        "x",
        "--provider",
        "anthropic",
        "--tool-version",
        "computer_20250124",
    )
    spec = run_spec(args)  # what run --server sends
    assert spec.tool_version == "computer_20250124"
    sent = RunSpec.from_context(json.loads(json.dumps(spec.to_json())))  # as the server gets it
    assert sent.tool_version == "computer_20250124"
    assert sent.planner().run_settings()["tool_version"] == "computer_20250124"
    out = ["eval", "t.yaml", "--out", "o", "--provider", "anthropic"]
    evaluated = eval_spec(parse(*out, "--tool-version", "computer_20250124"))
    assert evaluated.tool_version == "computer_20250124"


def test_a_tool_version_the_provider_cannot_take_is_refused_through_the_spec() -> None:
    spec = RunSpec(provider="gemini", tool_version="computer_20250124")
    with pytest.raises(ConfigError, match="--tool-version"):
        spec.planner()


def test_from_spec_and_the_face_build_the_same_run(tmp_path: Path) -> None:
    from vnc_use.testing.fake import FakeDesktop

    desktop = FakeDesktop()
    spec = RunSpec(step_limit=7, confirm_actions=["type"], runs_dir=str(tmp_path))
    built = VncUseAgent.from_spec(spec, desktop=desktop)
    face = VncUseAgent(desktop=desktop, step_limit=7, confirm_actions=["type"], runs_dir=tmp_path)
    try:
        assert built.settings == face.settings
        assert built.spec.model_settings() == face.spec.model_settings()
    finally:
        built.close()
        face.close()


def test_a_desktop_target_is_checked_before_anything_starts() -> None:
    with pytest.raises(ConfigError):
        DesktopTarget(rdp_server="h", rdp_size="huge").check()
    with pytest.raises(ConfigError):
        DesktopTarget(screen_region="nonsense").check()


# --------------------------------------------------------------------------- the local desktop


@pytest.fixture(scope="module")
def local_desktop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A local desktop in a state folder of its own (no browser: nothing here needs one)."""
    state_dir = tmp_path_factory.mktemp("desktop-state")
    up = vnc_use(
        "desktop",
        "up",
        "--browser",
        "none",
        "--size",
        "800x600",
        "--state-dir",
        str(state_dir),
        env={},
    )
    assert up.returncode == 0, up.stdout + up.stderr
    state = LocalDesktop(state_dir).read_state()
    assert state is not None
    try:
        yield state_dir, state.server
    finally:
        down = vnc_use("desktop", "down", "--state-dir", str(state_dir), env={})
        assert down.returncode == 0, down.stdout + down.stderr


def _anthropic() -> tuple[Any, list[str], dict[str, str]]:
    from vnc_use.testing.anthropic_standin import AnthropicStandIn, Reply

    server = AnthropicStandIn([Reply.done("Nothing to do.")], expected_api_key="sk-ant-test-key")
    return server, ["--provider", "anthropic"], {"ANTHROPIC_API_KEY": "sk-ant-test-key"}


def _openai() -> tuple[Any, list[str], dict[str, str]]:
    from vnc_use.testing.openai_responses_standin import OpenAIResponsesStandIn, Turn

    server = OpenAIResponsesStandIn([Turn.message("Nothing to do.")], expected_api_key="sk-test")
    return server, ["--provider", "openai"], {"OPENAI_API_KEY": "sk-test"}


def _compatible() -> tuple[Any, list[str], dict[str, str]]:
    from vnc_use.testing.openai_standin import OpenAIStandIn, Reply

    server = OpenAIStandIn([Reply.text("Nothing to do.")], models="qwen2.5-7b-instruct")
    flags = ["--provider", "openai-compatible", "--model", "qwen2.5-7b-instruct"]
    return server, flags, {}


STAND_INS = {"anthropic": _anthropic, "openai": _openai, "openai-compatible": _compatible}
BASE_URL_VARIABLE = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}


@pytest.mark.desktop
@pytest.mark.parametrize("provider", sorted(STAND_INS))
def test_every_provider_runs_on_the_local_desktop(
    provider: str, local_desktop: tuple[Path, str], tmp_path: Path
) -> None:
    """Issue 29: no --vnc, only that provider's key: the run reaches the local desktop."""
    state_dir, server_address = local_desktop
    server, flags, env = STAND_INS[provider]()
    with server:
        if provider in BASE_URL_VARIABLE:
            env[BASE_URL_VARIABLE[provider]] = server.base_url
        else:
            flags += ["--base-url", server.base_url]
        proc = vnc_use(
            *("run", "--task", "Look at the screen", "--runs-dir", str(tmp_path), *flags),
            env={ENV_STATE_DIR: str(state_dir), **env},
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "status: done" in proc.stdout
        assert f"local desktop (running): {server_address}" in proc.stdout
        (record,) = tmp_path.glob("*/run.json")
        assert json.loads(record.read_text())["vnc_server"] == server_address
        assert json.loads(record.read_text())["provider"] == provider
        assert server.requests, "the stand-in got no request"


@pytest.mark.parametrize("provider", sorted(STAND_INS))
def test_a_provider_without_its_key_starts_no_desktop(provider: str, tmp_path: Path) -> None:
    flags = {
        "anthropic": ["--provider", "anthropic"],
        "openai": ["--provider", "openai"],
        "openai-compatible": ["--provider", "openai-compatible", "--model", "m"],
    }[provider]
    state_dir = tmp_path / "state"
    proc = vnc_use(
        *("run", "--task", "x", "--runs-dir", str(tmp_path / "runs"), *flags),
        env={ENV_STATE_DIR: str(state_dir)},
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("vnc-use: ") and "GOOGLE_API_KEY" not in line, line
    assert line.endswith("the local desktop was not started") or "--base-url" in line, line
    assert not (state_dir / "state.json").exists()


DOC = Path(__file__).resolve().parents[2] / "docs" / "run-spec.md"


def test_the_docs_commands_name_each_providers_own_key(tmp_path: Path) -> None:
    """docs/run-spec.md's commands, as written: without the key each names that key (the
    comment of its line) and starts no desktop."""
    import shlex

    block = DOC.read_text("utf-8").split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if line.startswith("vnc-use run")]
    assert len(lines) == 2
    for line in lines:
        command, _, variable = line.partition("#")
        state_dir = tmp_path / "state"
        argv = shlex.split(command)[1:]
        proc = vnc_use(
            *argv, "--runs-dir", str(tmp_path / "runs"), env={ENV_STATE_DIR: str(state_dir)}
        )
        assert proc.returncode == 2, proc.stdout + proc.stderr
        (said,) = proc.stderr.strip().splitlines()
        assert variable.strip() in said and said.endswith("the local desktop was not started")
        assert not (state_dir / "state.json").exists()
