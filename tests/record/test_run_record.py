"""``run.json`` through :mod:`vnc_use.record.run_record` (issue 29, item 3).

The fixtures under ``run_record_fixtures/`` are ``run.json`` files written by main a63c5aa's
own code paths (a local ``vnc-use run``, a run served by ``langgraph dev`` on a VNC and on an
RDP desktop, an MCP tool session; only the temporary paths shortened): every one still reads,
with the ``kind`` its host implies and every key it held. A run of today's agent writes
``kind: local``; the served and MCP hosts are exercised through the CLI by ``test_matrix.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vnc_use.agent import VncUseAgent
from vnc_use.errors import ConfigError
from vnc_use.record import run_record
from vnc_use.record.folder import REDACTED, RunFolder
from vnc_use.record.runs import list_runs
from vnc_use.testing.fake import FakeDesktop
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply

FIXTURES = Path(__file__).parent / "run_record_fixtures"
KINDS = {"local": "local", "served": "served", "served-rdp": "served", "mcp-session": "mcp-session"}


def _place(tmp_path: Path, name: str) -> Path:
    """A run folder holding the fixture ``name`` as its run.json."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "run.json").write_bytes((FIXTURES / f"{name}.json").read_bytes())
    return folder


@pytest.mark.parametrize("name", sorted(KINDS))
def test_run_json_of_older_runs_still_reads(name: str, tmp_path: Path) -> None:
    folder = _place(tmp_path, name)
    original = json.loads((folder / "run.json").read_text())
    record = run_record.read(folder)
    assert record.kind == KINDS[name]
    assert record.settings() == {**original, "kind": KINDS[name]}  # no key lost or added
    assert record.thread_id == original["thread_id"]
    assert record.status == original["status"] and record.started == original["started"]
    (summary,) = list_runs(tmp_path)  # the listing reads it through the module too
    assert summary.task == original["task"] and summary.thread_id == original["thread_id"]


def test_a_local_run_writes_kind_local_and_no_secret(
    gemini: GeminiStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRET_PIN", "pin-7731-never-kept")
    gemini.script(Reply.calls(FunctionCallSpec("click_at", x=500, y=500)), Reply.text("done"))
    with VncUseAgent(
        desktop=FakeDesktop(), runs_dir=tmp_path, confirm_actions=["type_text_at"]
    ) as agent:
        assert agent.run("Click", thread_id="loc").status == "done"
    record = run_record.read(tmp_path / "loc")
    assert record.kind == "local" and record.provider == "gemini"
    assert record.status == "done" and record.reason is None
    assert record.confirm_actions == ["type_text_at"] and record.desktop == "FakeDesktop"
    assert record.settings()["model_family"] == "gemini-2.5"  # the planner's own settings ride
    text = (tmp_path / "loc" / "run.json").read_text()
    assert "AIza" not in text  # the stand-in's key (GOOGLE_API_KEY)


def test_update_keeps_the_record_and_redacts_secrets(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path, "t1", secrets=["hunter2-secret"])
    record = run_record.RunRecord.from_json(
        {"kind": "served", "thread_id": "t1", "vnc_password_env": "MY_VNC_PASSWORD"}
    )
    run_record.write(folder, record)
    run_record.update(folder, status="error", reason="lost hunter2-secret", password="x1y2z3")
    saved = json.loads((tmp_path / "t1" / "run.json").read_text())
    assert saved == {
        "kind": "served",
        "thread_id": "t1",
        "vnc_password_env": "MY_VNC_PASSWORD",  # the variable's name is no secret
        "status": "error",
        "reason": f"lost {REDACTED}",
        "password": REDACTED,
    }


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (None, ["no run in", "run.json"]),
        ("{not json", ["is not JSON"]),
        ("[1, 2]", ["not hold a JSON object"]),
        ('{"kind": "klingon"}', ["run.json: kind:"]),
        ('{"step_limit": "many"}', ["run.json: step_limit:"]),
    ],
)
def test_a_bad_run_json_is_one_line(text: str | None, words: list[str], tmp_path: Path) -> None:
    folder = tmp_path / "bad"
    folder.mkdir()
    if text is not None:
        (folder / "run.json").write_text(text)
    with pytest.raises(ConfigError) as caught:
        run_record.read(folder)
    message = str(caught.value)
    assert "\n" not in message
    for word in words:
        assert word in message
    assert run_record.load(folder) is None


def test_values_json_has_no_type_for_are_written_as_text(tmp_path: Path) -> None:
    """A CA file given as a Path (Python callers do) is kept as its text, as before."""
    folder = RunFolder(tmp_path, "p1")
    run_record.write(
        folder,
        run_record.RunRecord.from_json({"vnc_ca": tmp_path / "ca.pem", "confirm_actions": ("a",)}),
    )
    record = run_record.read(tmp_path / "p1")
    assert record.vnc_ca == str(tmp_path / "ca.pem") and record.confirm_actions == ["a"]
