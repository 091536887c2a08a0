"""``--rdp`` on xrdp (issue 30): the RDP server Linux desktops use, without NLA.

One xrdp (:class:`~vnc_use.testing.xrdp.XrdpServer`: a private config on 127.0.0.1, a
throw-away user) serves the module; the probe app runs in that user's session, which the first
login starts and which stays for the later connections (xrdp keeps disconnected sessions). The
CLI runs in subprocesses as a user would; the probe's event log is the truth.
"""

from __future__ import annotations

import json
import os
import pwd
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import vnc_use.testing.probe as probe_module
from vnc_use.desktops.rdp import RdpBridge, RdpOptions, RdpTarget, TrustStore
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.probe import ProbeLog
from vnc_use.testing.xrdp import XrdpServer

from rdp_tools import ASCII, MIXED, Watched, call_at, one_line, rdp_env

pytestmark = pytest.mark.desktop

UNICODE = "Grüße, café — naïve 日本語"


class XrdpDesktop:
    """The module's xrdp server and the probe app in its user's session."""

    def __init__(self, server: XrdpServer, log: ProbeLog, ready: dict[str, object]) -> None:
        self.server, self.log, self.ready = server, log, ready

    @property
    def size(self) -> tuple[int, int]:
        return int(str(self.ready["width"])), int(str(self.ready["height"]))

    @property
    def entry_center(self) -> tuple[int, int]:
        x, y, w, h = (int(v) for v in self.ready["entry"])  # type: ignore[attr-defined]
        return x + w // 2, y + h // 2

    def canvas_point(self) -> tuple[int, int]:
        width, height = self.size
        return width * 3 // 4, height // 2

    def env(self, tmp_path: Path, password: str | None = None) -> dict[str, str]:
        extra = {"RDP_PASSWORD": password} if password is not None else {}
        return rdp_env(tmp_path, **extra)


@pytest.fixture(scope="module")
def xrdp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[XrdpDesktop]:
    """xrdp with the probe in its user's session (started by one login through a bridge)."""
    with XrdpServer(["/usr/bin/python3", "probe.py", "--out", "events.jsonl"]) as server:
        server.install_file(Path(probe_module.__file__), "probe.py")
        folder = tmp_path_factory.mktemp("xrdp-login")
        options = RdpOptions(
            RdpTarget.parse(server.address), username=server.user, allow_unverified_login=True
        )
        trust = TrustStore(folder / "state")
        with RdpBridge(
            options, server.password, log_path=folder / "freerdp.log", trust_store=trust
        ):
            log = ProbeLog(str(server.user_path("events.jsonl")))
            ready = log.wait_type("ready", timeout=30)
        yield XrdpDesktop(server, log, ready)


@pytest.fixture
def desk(xrdp: XrdpDesktop) -> XrdpDesktop:
    xrdp.log.clear()
    return xrdp


def _user_args(desk: XrdpDesktop, tmp_path: Path, *more: str) -> list[str]:
    return [
        "run",
        "--rdp",
        desk.server.address,
        "--rdp-user",
        desk.server.user,
        "--runs-dir",
        str(tmp_path / "runs"),
        *more,
    ]


def test_four_steps_on_xrdp_type_exactly_without_caps_lock(
    desk: XrdpDesktop, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """Click, all printable ASCII plus mixed case, Ctrl+A, the wheel: exact on xrdp, though
    Caps Lock was on in the session (FreeRDP's synchronize event at the connection sets the
    bridge's lock state, off, and typing sends no lock key); the first line and run.json say
    the server has no NLA; non-ASCII text without the option: refused."""
    desk.server.set_caps_lock(True)
    size, entry = desk.size, desk.entry_center
    gemini.script(
        Reply.calls(call_at("click_at", desk.canvas_point(), size)),
        Reply.calls(call_at("type_text_at", entry, size, text=ASCII + MIXED, press_enter=True)),
        Reply.calls(FunctionCallSpec("key_combination", keys="control+a")),
        Reply.calls(
            call_at("scroll_at", desk.canvas_point(), size, direction="down", magnitude=200)
        ),
        Reply.calls(call_at("type_text_at", entry, size, text=UNICODE)),
        Reply.text("All four done."),
    )
    args = _user_args(desk, tmp_path, "--rdp-allow-unverified-login", "--thread-id", "x1")
    run = Watched([*args, "--task", "Four steps"], desk.env(tmp_path, desk.server.password), None)
    assert run.returncode == 0, run.stdout + run.stderr
    (press, *_) = desk.log.events("press")
    assert abs(press["x"] - desk.canvas_point()[0]) <= 2
    assert desk.log.wait_type("submit")["text"] == ASCII + MIXED
    keys = desk.log.events("key")
    assert any(k["keysym"] == "a" and k["state"] & 4 for k in keys), keys[-5:]
    desk.log.wait_for(lambda e: e["type"] == "wheel", what="a wheel notch")
    refused = gemini.function_responses(gemini.requests[-1])[-1]
    assert "cannot type" in refused["response"]["error"] and "'日'" in refused["response"]["error"]
    saved = json.loads((tmp_path / "runs" / "x1" / "run.json").read_text())
    assert saved["rdp"]["protocol"] == "TLS" and saved["rdp"]["nla"] is False
    first = run.stdout.splitlines()[0]
    assert "without NLA" in first and "login NOT verified" in first, first
    assert run.alive_children() == [] and not run.leaks


def test_caps_lock_locked_in_the_session_mid_run_does_not_change_what_is_typed(
    desk: XrdpDesktop, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """Caps Lock locked inside the session after the bridge connected (a person at the
    desktop, a takeover, or xorgxrdp applying two synchronize events at once, which left it on
    in a loaded full run): the next typing first has FreeRDP send the bridge's lock state again
    (Caps Lock off), so the text arrives exactly, twice."""
    desk.server.set_caps_lock(False)
    size, entry = desk.size, desk.entry_center
    typed = MIXED + " Hello"

    def script(body: Any, index: int) -> Reply:
        if index in (1, 2):  # the bridge is connected: lock Caps Lock in the session first
            desk.server.set_caps_lock(True)
        if index == 0:
            return Reply.calls(call_at("click_at", desk.canvas_point(), size))
        if index in (1, 2):
            return Reply.calls(call_at("type_text_at", entry, size, text=typed, press_enter=True))
        return Reply.text("Typed it twice.")

    gemini.script(script)
    args = _user_args(desk, tmp_path, "--rdp-allow-unverified-login", "--thread-id", "caps")
    run = Watched([*args, "--task", "Type twice"], desk.env(tmp_path, desk.server.password), None)
    assert run.returncode == 0, run.stdout + run.stderr
    submits = [e["text"] for e in desk.log.events("submit")]
    assert submits[-2:] == [typed, typed], submits


def test_credentials_for_xrdp_are_refused_before_connecting(
    desk: XrdpDesktop, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """xrdp checks the password in its own login screen (no NLA): a run that gives one is
    refused in one line before FreeRDP starts, and so is ``desktop rdp``."""
    env = desk.env(tmp_path, "not-the-password")
    before = len(desk.server.xrdp_log.read_text())
    run = Watched([*_user_args(desk, tmp_path), "--task", "t"], env, "not-the-password")
    assert run.returncode == 1, run.stdout + run.stderr
    line = one_line(run.stderr)
    assert "without NLA" in line and "--rdp-allow-unverified-login" in line, line
    assert run.seconds < 15
    assert gemini.requests == [] and desk.log.events() == []
    assert not any("xfreerdp" in n for n in run.children.values())
    kept = Watched(
        ["desktop", "rdp", desk.server.address, "--rdp-user", desk.server.user], env, None
    )
    assert kept.returncode == 1 and "started" not in kept.stdout
    assert "--rdp-allow-unverified-login" in one_line(kept.stderr)
    # two negotiations (vnc-use's security probe), no login: xrdp logged no client name
    assert "computer name" not in desk.server.xrdp_log.read_text()[before:]


def test_no_local_user_or_host_name_reaches_the_login_screen(
    desk: XrdpDesktop, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """Without credentials the server gets an empty user name and the client name vnc-use;
    without --rdp-paste-text the session's clipboard is left as it was (no redirection)."""
    desk.server.set_clipboard("the user's own ✓")
    gemini.script(Reply.text("Nothing to do."))
    xrdp_log = desk.server.xrdp_log
    before = xrdp_log.read_text(errors="replace")
    args = ["run", "--rdp", desk.server.address, "--runs-dir", str(tmp_path / "runs")]
    run = Watched([*args, "--task", "t"], desk.env(tmp_path), None)
    assert run.returncode == 0, run.stdout + run.stderr
    new = xrdp_log.read_text(errors="replace")[len(before) :]
    supplied = [line for line in new.splitlines() if "Client supplied username:" in line]
    assert supplied and all(line.rstrip().endswith("username:") for line in supplied), supplied
    names = [line for line in new.splitlines() if "client computer name" in line]
    assert names and all(line.rstrip().endswith(": vnc-use") for line in names), names
    local = (pwd.getpwuid(os.getuid()).pw_name, socket.gethostname())
    assert not any(name in line for line in supplied + names for name in local)
    assert desk.server.clipboard() == "the user's own ✓"


def test_paste_text_puts_unicode_on_xrdp_and_restores_the_clipboard(
    desk: XrdpDesktop, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """--rdp-paste-text: text beyond US ASCII arrives exactly through the RDP clipboard, the
    step's record and the function response the model gets say it was pasted, and the remote
    clipboard holds what it held before the paste.

    The session's clipboard is set and read while the run's bridge is connected (when the
    model is asked): FreeRDP 2 claims the remote clipboard when it connects with clipboard
    redirection, and xrdp keeps it claimed for the gone client after (see docs/rdp.md)."""
    size, entry = desk.size, desk.entry_center
    seen: list[str] = []

    def script(_request: Any, index: int) -> Reply:
        if index == 0:  # someone copied something in the session
            desk.server.set_clipboard("held before ✓")
            return Reply.calls(call_at("type_text_at", entry, size, text=UNICODE, press_enter=True))
        seen.append(desk.server.clipboard())
        return Reply.text("Typed.")

    gemini.script(script)
    args = _user_args(desk, tmp_path, "--rdp-allow-unverified-login", "--rdp-paste-text")
    run = Watched(
        [*args, "--thread-id", "p1", "--task", "Type"],
        desk.env(tmp_path, desk.server.password),
        None,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert desk.log.wait_type("submit")["text"] == UNICODE
    assert seen == ["held before ✓"]
    events = (tmp_path / "runs" / "p1" / "events.jsonl").read_text().splitlines()
    actions = [json.loads(e) for e in events if '"action"' in e]
    typed = [a for a in actions if a.get("name") == "type_text_at"]
    assert typed and "pasted" in (typed[0].get("note") or "") and not typed[0].get("error")
    told = gemini.function_responses(gemini.requests[-1])[-1]["response"]
    assert "pasted through the clipboard" in told["note"] and "not typed" in told["note"], told
    assert run.alive_children() == []
