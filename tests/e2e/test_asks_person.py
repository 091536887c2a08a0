"""A model that asks for a person waits for one (issue 42 item 3).

UI-TARS ``call_user()`` and UI-Venus ``CallUser(content=...)``, answered by the
OpenAI-compatible stand-in through the real ``openai`` SDK, on the probe desktop, the CLI in
subprocesses: the run ends ``awaiting_human`` (exit 3, never ``done``) with the model's
question in run.json, the progress line and the report; ``handback --note`` (or ``resume
--answer``) brings the answer to the next request, with a fresh screenshot, and the run goes on
to ``done``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vnc_use.testing.openai_families import family_reply
from vnc_use.testing.openai_standin import OpenAIStandIn
from vnc_use.testing.openai_standin import Reply as OpenAIReply

from cli_tools import run_cli
from desktop_fixtures import Probe

pytestmark = pytest.mark.desktop

QUESTION = "Which name should I type into the field?"
ANSWER = "Type the name Grace"

ASK = {
    "ui-tars": f"Thought: {QUESTION}\nAction: call_user()",
    "ui-venus": f"<think>I need the name.</think>\n<action>CallUser(content='{QUESTION}')</action>",
}
FINISH = {
    "ui-tars": "Thought: Done.\nAction: finished(content='Typed the name.')",
    "ui-venus": "<think>Done.</think>\n<action>Finished(content='Typed the name.')</action>",
}
MODEL = {"ui-tars": "ui-tars-1.5-7b", "ui-venus": "inclusionAI/UI-Venus-1.5-8B"}


def _texts(message: dict[str, object]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return " ".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))


@pytest.mark.parametrize("family", ["ui-tars", "ui-venus"])
def test_a_model_that_asks_for_a_person_waits_and_gets_the_answer(
    probe: Probe, tmp_path: Path, family: str
) -> None:
    script = [
        family_reply(family, probe.entry_center, probe.size, what="the name field"),
        OpenAIReply.text(ASK[family]),
        OpenAIReply.text(FINISH[family]),
    ]
    tid = f"ask-{family}"
    base = ["--runs-dir", str(tmp_path)]
    with OpenAIStandIn(script, models=MODEL[family]) as server:
        proc = run_cli(
            [
                *("run", "--vnc", probe.desktop.server, "--task", "Fill in the name"),
                *("--thread-id", tid, "--provider", "openai-compatible"),
                *("--base-url", server.base_url, "--model", MODEL[family], "--dialect", family),
                *base,
            ],
            probe.desktop,
        )
        out = proc.stdout + proc.stderr
        assert proc.returncode == 3, out
        assert "status: awaiting_human" in proc.stdout and "status: done" not in out
        assert f"the model asks for a person: {QUESTION}" in proc.stdout  # progress line
        assert f"vnc-use handback {tid}" in proc.stdout
        record = json.loads((tmp_path / tid / "run.json").read_text())
        assert record["status"] == "awaiting_human"
        assert record["human"]["asked_by"] == "model"
        assert record["human"]["question"] == QUESTION
        assert QUESTION in (tmp_path / tid / "report.html").read_text()
        assert len(server.requests) == 2
        probe.log.wait_type("press")  # the click before the question landed

        listing = run_cli(["runs", *base])
        assert any(tid in line and "awaiting_human" in line for line in listing.stdout.splitlines())

        again = run_cli(["resume", tid, *base], probe.desktop)  # a plain resume: one line
        assert again.returncode == 2 and "handback" in again.stderr, again.stderr
        assert again.stderr.count("\n") == 1

        verb = (
            ["handback", tid, "--note", ANSWER]
            if family == "ui-tars"
            else ["resume", tid, "--answer", ANSWER]
        )
        proc = run_cli([*verb, *base], probe.desktop)  # a new process
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "status: done" in proc.stdout
        assert len(server.requests) == 3 and not server.violations
        last = server.requests[2]
        user = [m for m in last.messages() if m.get("role") == "user"][-1]
        assert ANSWER in _texts(user) and "A person answered" in _texts(user)
        assert last.images(), "the answer comes with a fresh screenshot"
    record = json.loads((tmp_path / tid / "run.json").read_text())
    assert record["status"] == "done" and not record.get("human")
    events = [json.loads(line) for line in (tmp_path / tid / "events.jsonl").open()]
    kinds = [e["event"] for e in events]
    assert "asks_person" in kinds and "handed_back" in kinds and "person_turn" in kinds
