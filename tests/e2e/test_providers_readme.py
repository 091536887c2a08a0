"""The providers' commands of the front page (README's "One run per provider") and of
docs/providers.md: every `vnc-use run` line runs to `done` against its provider's stand-in (the
addresses swapped for the stand-ins', this test's desktop and runs folder), and run.json
records the provider, the model and, for Claude, the tool version."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from vnc_use.testing.anthropic_standin import AnthropicStandIn
from vnc_use.testing.anthropic_standin import Reply as ClaudeReply
from vnc_use.testing.gemini_standin import GeminiStandIn
from vnc_use.testing.gemini_standin import Reply as GeminiReply
from vnc_use.testing.openai_responses_standin import OpenAIResponsesStandIn, Turn
from vnc_use.testing.openai_standin import OpenAIStandIn
from vnc_use.testing.openai_standin import Reply as OpenAIReply

from cli_tools import run_cli
from desktop_fixtures import Probe
from doc_pages import blocks, page, section

pytestmark = pytest.mark.desktop

QWEN_FINISH = (
    '<tool_call>\n{"name": "computer_use", "arguments": {"action": "terminate", '
    '"status": "success"}}\n</tool_call>'
)


def provider_commands(text: str) -> list[list[str]]:
    return [
        shlex.split(line)
        for block in blocks(text, "sh")
        for line in block.splitlines()
        if line.startswith("vnc-use run")
    ]


def providers_of(commands: list[list[str]]) -> set[str]:
    return {argv[argv.index("--provider") + 1] for argv in commands}


def test_every_provider_command_of_the_readme_runs(probe: Probe, tmp_path: Path) -> None:
    front = provider_commands(section(page("README.md"), "## One run per provider"))
    assert providers_of(front) == {"gemini", "anthropic", "openai", "openai-compatible"}
    commands = provider_commands(page("providers.md"))
    assert providers_of(commands) == providers_of(front)
    commands += [argv for argv in front if argv not in commands]  # each distinct line once
    for n, argv in enumerate(commands):
        provider = argv[argv.index("--provider") + 1]
        model = argv[argv.index("--model") + 1]
        runs = tmp_path / str(n)
        env = {"GOOGLE_API_KEY": "g-key", "ANTHROPIC_API_KEY": "a-key", "OPENAI_API_KEY": "o-key"}
        server: GeminiStandIn | AnthropicStandIn | OpenAIResponsesStandIn | OpenAIStandIn
        if provider == "gemini":
            server = GeminiStandIn([GeminiReply.text("done")])
        elif provider == "anthropic":
            server = AnthropicStandIn([ClaudeReply.done("done")])
        elif provider == "openai":
            server = OpenAIResponsesStandIn([Turn.message("done")])
        else:
            server = OpenAIStandIn([OpenAIReply.text(QWEN_FINISH)], models=model)
        with server:
            args = list(argv[1:])
            if provider == "gemini":
                env["GOOGLE_GEMINI_BASE_URL"] = server.base_url
            elif provider == "anthropic":
                env["ANTHROPIC_BASE_URL"] = server.base_url
            elif provider == "openai":
                env["OPENAI_BASE_URL"] = server.base_url
            else:
                args[args.index("--base-url") + 1] = server.base_url
            proc = run_cli(
                [*args, "--vnc", probe.desktop.server, "--runs-dir", str(runs)],
                probe.desktop,
                env=env,
            )
            assert proc.returncode == 0, (argv, proc.stdout + proc.stderr)
            assert len(server.requests) == 1
        (settings,) = [json.loads(p.read_text()) for p in runs.glob("*/run.json")]
        assert (settings["provider"], settings["model"]) == (provider, model)
        if provider == "anthropic":
            assert settings["tool_version"] == "computer_toolset_20260801"
            assert settings["confirm_actions"] == ["type", "hotkey"]
