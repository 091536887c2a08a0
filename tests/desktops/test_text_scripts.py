"""Text in other scripts (issue 38, item 7): exact on the TigerVNC 1.12 Xvnc users have, or a
step that fails naming the characters; never a silent loss.

A fresh Xvnc per module (its 19 spare keycodes unused, as on a new desktop), the probe's
entry, the CLI in a subprocess and the Gemini stand-in: what the probe received is the truth.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from vnc_use import VncUseAgent
from vnc_use.desktops.xkeymap import (
    REMOTE_NEW_KEYS,
    XKeymap,
    plan_rounds,
    xvnc_display,
)
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.testing.delay_proxy import DelayProxy
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply

from cli_tools import run_cli
from desktop_fixtures import Probe, start_probe
from gemini_fixtures import FAST_RETRY

pytestmark = pytest.mark.desktop

RUSSIAN = "Съешь же ещё этих мягких французских булок, да выпей чаю."
GREEK = "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία."
JAPANESE = "いろはにほへと ちりぬるを 日本語の文章、漢字と記号「」！？"  # noqa: RUF001
SENTENCES = [RUSSIAN, GREEK, JAPANESE, RUSSIAN]


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Probe]:
    """The probe on a new TigerVNC desktop (Debian 12's Xvnc 1.12, its default keymap)."""
    with TestDesktop(1024, 768) as desk:
        yield start_probe(desk, str(tmp_path_factory.mktemp("probe") / "events.jsonl"))


def _grid(probe: Probe) -> dict[str, int]:
    (x, y), (w, h) = probe.entry_center, probe.size
    return {"x": round(x * 1000 / w), "y": round(y * 1000 / h)}


def _script(probe: Probe) -> list[Reply]:
    typing = [
        Reply.calls(FunctionCallSpec("type_text_at", **_grid(probe), text=text, press_enter=True))
        for text in SENTENCES
    ]
    return [*typing, Reply.text("Typed all four.")]


def test_four_scripts_in_one_run_arrive_exactly_on_the_local_xvnc(
    fresh: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """Russian, Greek, Japanese with symbols, Russian again: 86 keys beyond ASCII (33, 26 and
    27 per sentence, a case pair one key) on a server with 19 spare keycodes, each sentence
    exactly as sent (on main the Russian lost characters after its 27th, the Greek arrived
    as its spaces)."""
    fresh.log.clear()
    gemini.script(*_script(fresh))
    run = run_cli(
        ["run", "--vnc", fresh.desktop.server, "--task", "Type", "--runs-dir", str(tmp_path)],
        fresh.desktop,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    submits = [e["text"] for e in fresh.log.events("submit")]
    assert submits == SENTENCES
    for request in gemini.requests[1:]:
        response = gemini.function_responses(request)[-1]
        assert "error" not in response["response"], response


def test_a_server_whose_keymap_is_unseen_refuses_what_it_may_drop(
    fresh: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """The same desktop behind a TCP proxy (as a remote server is): vnc-use cannot see its
    keymap, so a text needing more than 19 new keys is refused before any key, one line
    naming the characters, and the step says so; a short accented text still types."""
    fresh.log.clear()
    gemini.script(
        Reply.calls(FunctionCallSpec("type_text_at", **_grid(fresh), text=RUSSIAN)),
        Reply.calls(
            FunctionCallSpec("type_text_at", **_grid(fresh), text="Grüße café", press_enter=True)
        ),
        Reply.text("Done."),
    )
    with DelayProxy(fresh.desktop.port, delay_ms=0) as proxy:
        assert xvnc_display("127.0.0.1", proxy.port) is None
        run = run_cli(
            ["run", "--vnc", proxy.server, "--task", "Type", "--runs-dir", str(tmp_path)],
            fresh.desktop,
        )
    assert run.returncode == 0, run.stdout + run.stderr
    refused = gemini.function_responses(gemini.requests[1])[-1]
    error = refused["response"]["error"]
    assert "cannot type " in error and "\n" not in error, error
    assert "'ч'" in error and "'ю'" in error and "nothing was typed" in error
    assert f"about {REMOTE_NEW_KEYS} spare keys" in error
    assert [e["text"] for e in fresh.log.events("submit")] == ["Grüße café"]
    texts = [e["text"] for e in fresh.log.events("text")]
    assert not any(RUSSIAN[0] in t for t in texts), texts


def test_rounds_reuse_the_spare_keycodes(fresh: Probe) -> None:
    """The plan for a text with more new characters than spare keycodes: rounds, each within
    the spare keycodes, characters the keymap has typed without any."""
    display = xvnc_display("127.0.0.1", fresh.desktop.port)
    assert display == fresh.desktop.display
    keymap = XKeymap.open(display)
    assert keymap is not None
    mapping = keymap.mapping()
    rounds = plan_rounds(JAPANESE + " abc", mapping)
    assert "".join(r.text for r in rounds) == JAPANESE + " abc"
    spare = {c for c, s in mapping.items() if all(0x01000100 <= k < 0x01110000 for k in s if k)}
    # Xvnc 1.12's default map has 19 empty keycodes (the keypad's plusminus is not spare);
    # the test before this one left Xvnc's own ü, ß, é on three of them
    assert 10 <= len(spare) <= 19
    assert len(rounds) >= 2 and all(len(r.assign) <= len(spare) for r in rounds)
    assert {code for r in rounds for code in r.assign} <= spare
    assert plan_rounds("plain ASCII", mapping)[0].assign == {}


def test_a_refusal_never_names_the_characters_of_a_sensitive_value(
    fresh: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """A sensitive value (``{{word}}``) that cannot be typed on an unseen keymap: the step's
    error says so without naming its characters, in the model's request and in every record."""
    word = "абвгдежзийклмнопрстуф"  # 21 letters: two past the limit
    fresh.log.clear()
    gemini.script(
        Reply.calls(FunctionCallSpec("type_text_at", **_grid(fresh), text="{{word}}")),
        Reply.text("Done."),
    )
    runs = tmp_path / "runs"
    with DelayProxy(fresh.desktop.port, delay_ms=0) as proxy:
        agent = VncUseAgent(
            vnc_server=proxy.server,
            vnc_password=fresh.desktop.password,
            runs_dir=runs,
            planner=GeminiComputerUse(**FAST_RETRY),
            sensitive_text={"word": word},
        )
        try:
            result = agent.run(task="Type the word")
        finally:
            agent.close()
    assert result.status == "done"
    error = gemini.function_responses(gemini.requests[1])[-1]["response"]["error"]
    assert "cannot type '…' '…' on this VNC server" in error, error
    assert fresh.log.events("text") == []
    told = json.dumps([r.body for r in gemini.requests], ensure_ascii=False)
    assert not any(ch in told for ch in word)
    named = [repr(ch) for ch in word]  # the refusal named the last two letters
    leaks = [x.encode() for x in (word, *named, *(json.dumps(n)[1:-1] for n in named))]
    for path in runs.rglob("*"):
        if path.is_file() and path.suffix not in (".png", ".mp4", ".webm"):
            data = path.read_bytes()
            assert not any(leak in data for leak in leaks), path
