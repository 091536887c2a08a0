"""``--rdp``: runs on RDP desktops through the FreeRDP bridge (issue 25).

Real servers on 127.0.0.1: FreeRDP's shadow server shares an Xvfb screen with the probe app
(the screen x11vnc also serves), once without authentication (TLS) and once with NLA (a SAM
file written by winpr-hash). The CLI runs in subprocesses as a user would; the probe's event
log is the truth for clicks, keys, text and the wheel.
"""

from __future__ import annotations

import json
import socket
import string
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vnc_use.desktops.keyboard import (
    RDP_KEYBOARD,
    combo_scancode_events,
    scancode_events,
)
from vnc_use.desktops.rdp import RdpTarget, TrustStore, parse_fingerprint
from vnc_use.desktops.rdp_probe import colon_hex
from vnc_use.errors import ConfigError
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.rdp_shadow import RdpShadowServer
from vnc_use.testing.x11vnc import X11vncDesktop

from cli_tools import CLI
from desktop_fixtures import Probe, _fresh, start_probe
from rdp_tools import (
    ASCII,
    MIXED,
    TYPED,
    Watched,
    call_at,
    files_containing,
    one_line,
    process_state,
    rdp_env,
)

pytestmark = pytest.mark.desktop

USER, PASSWORD = "alice", "Rdp-Pa55word!x"


@pytest.fixture(scope="module")
def screen() -> Iterator[X11vncDesktop]:
    """One Xvfb screen (1280x800, the default RDP size) that x11vnc and the RDP servers share."""
    with X11vncDesktop(1280, 800) as desk:
        yield desk


@pytest.fixture(scope="module")
def module_probe(screen: X11vncDesktop, tmp_path_factory: pytest.TempPathFactory) -> Probe:
    return start_probe(screen, str(tmp_path_factory.mktemp("probe") / "events.jsonl"))


@pytest.fixture
def rdp_probe(module_probe: Probe) -> Probe:
    return _fresh(module_probe)


@pytest.fixture(scope="module")
def open_rdp(screen: X11vncDesktop) -> Iterator[RdpShadowServer]:
    with RdpShadowServer(screen.display) as server:
        yield server


@pytest.fixture(scope="module")
def nla_rdp(screen: X11vncDesktop) -> Iterator[RdpShadowServer]:
    with RdpShadowServer(screen.display, user=USER, password=PASSWORD) as server:
        yield server


# --------------------------------------------------------------------------- runs


def test_four_steps_over_rdp_with_nla(
    rdp_probe: Probe, nla_rdp: RdpShadowServer, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """Click, type every printable ASCII character and doubled letters, Ctrl+A, the wheel:
    all land on the remote screen; the password is in no file, output or command line; the
    bridge is gone afterwards."""
    size = rdp_probe.size
    click = rdp_probe.canvas_point()
    entry = rdp_probe.entry_center
    gemini.script(
        Reply.calls(call_at("click_at", click, size)),
        Reply.calls(call_at("type_text_at", entry, size, text=TYPED, press_enter=True)),
        Reply.calls(FunctionCallSpec("key_combination", keys="control+a")),
        Reply.calls(call_at("scroll_at", click, size, direction="down", magnitude=200)),
        Reply.calls(call_at("type_text_at", entry, size, text="café Grüße")),
        Reply.text("All four done."),
    )
    runs = tmp_path / "runs"
    args = ["run", "--rdp", nla_rdp.address, "--rdp-user", USER, "--task", "Four steps"]
    run = Watched(
        [*args, "--thread-id", "r1", "--runs-dir", str(runs)],
        rdp_env(tmp_path, RDP_PASSWORD=PASSWORD),
        PASSWORD,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    # every event landed on the remote screen
    (press, *_) = rdp_probe.log.events("press")
    assert abs(press["x"] - click[0]) <= 2 and abs(press["y"] - click[1]) <= 2
    assert rdp_probe.log.wait_type("submit")["text"] == TYPED
    keys = rdp_probe.log.events("key")
    assert any(k["keysym"] == "a" and k["state"] & 4 for k in keys), keys[-5:]
    rdp_probe.log.wait_for(lambda e: e["type"] == "wheel", what="a wheel notch")
    # text the RDP link cannot type: one clear line in the step's result, nothing typed
    refused = gemini.function_responses(gemini.requests[-1])[-1]
    assert refused["name"] == "type_text_at"
    assert "cannot type 'ß' 'é' 'ü'" in refused["response"]["error"]
    assert not any("caf" in e.get("text", "") for e in rdp_probe.log.events("text"))
    # what the run says about the desktop
    label = f"rdp://{nla_rdp.address} (via FreeRDP)"
    saved = json.loads((runs / "r1" / "run.json").read_text())
    assert saved["vnc_server"] == label and saved["rdp"]["protocol"] == "NLA"
    first = run.stdout.splitlines()[0]
    assert label in first and saved["rdp"]["cert_sha256"] in first, first
    assert "trusted on first use" in first
    assert label in (runs / "r1" / "report.html").read_text()
    # the secret: nowhere; the bridge ran (and was seen) and is gone
    assert run.scans > 0 and not run.leaks
    assert any("xfreerdp" in n or "stdbuf" in n for n in run.children.values()), run.children
    assert run.alive_children() == []
    assert PASSWORD not in run.stdout + run.stderr
    assert files_containing(tmp_path, PASSWORD.encode()) == []
    assert (runs / "r1" / "freerdp.log").exists()


def test_wrong_password_is_one_line_and_fast(
    nla_rdp: RdpShadowServer, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    gemini.script(Reply.text("never asked"))
    args = ["run", "--rdp", nla_rdp.address, "--rdp-user", USER, "--task", "t"]
    run = Watched(
        [*args, "--runs-dir", str(tmp_path / "runs")],
        rdp_env(tmp_path, RDP_PASSWORD="not-the-password"),
        "not-the-password",
    )
    assert run.returncode == 1
    line = one_line(run.stderr)
    assert "NLA authentication" in line and "ERRCONNECT_" in line and "RDP_PASSWORD" in line
    assert run.seconds < 10
    assert run.alive_children() == [] and not run.leaks
    assert gemini.requests == []


def test_nla_without_credentials_is_one_line(
    nla_rdp: RdpShadowServer, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    run = Watched(
        ["run", "--rdp", nla_rdp.address, "--task", "t", "--runs-dir", str(tmp_path)],
        rdp_env(tmp_path),
        None,
    )
    assert run.returncode == 2
    line = one_line(run.stderr)
    assert "requires NLA" in line and "--rdp-user" in line and "RDP_PASSWORD" in line
    assert run.alive_children() == []


def test_unreachable_ends_within_the_connect_timeout(gemini: GeminiStandIn, tmp_path: Path) -> None:
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        closed_port = closed.getsockname()[1]
    run = Watched(
        ["run", "--rdp", f"127.0.0.1:{closed_port}", "--task", "t", "--runs-dir", str(tmp_path)],
        rdp_env(tmp_path),
        None,
    )
    assert run.returncode == 1 and "connection refused" in one_line(run.stderr)
    with socket.socket() as silent:  # accepts, then never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        args = ["run", "--rdp", f"127.0.0.1:{port}", "--connect-timeout", "1.5", "--task", "t"]
        run = Watched([*args, "--runs-dir", str(tmp_path)], rdp_env(tmp_path), None)
    assert run.returncode == 1
    # The message names the timeout that ended the wait (not the default); how long the CLI
    # took as a whole depends on the machine's load, so it is not asserted.
    assert "no answer within 1.5 s" in one_line(run.stderr)
    assert run.alive_children() == []


def test_changed_certificate_is_refused(
    screen: X11vncDesktop, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    gemini.script(Reply.text("Nothing to do."), Reply.text("Nothing to do."))
    runs = ["--runs-dir", str(tmp_path / "runs")]
    with RdpShadowServer(screen.display) as server:
        args = ["run", "--rdp", server.address, "--task", "t"]
        first = Watched([*args, *runs], rdp_env(tmp_path), None)
        assert first.returncode == 0, first.stdout + first.stderr
        known = json.loads((tmp_path / "rdp-state" / "known_hosts.json").read_text())
        old = known[server.address]["sha256"]
        server.new_certificate()
        second = Watched([*args, *runs], rdp_env(tmp_path), None)
        assert second.returncode == 1
        line = one_line(second.stderr)
        assert colon_hex(old) in line and "refusing" in line
        new = line.split("certificate SHA-256 ")[1].split(",")[0]
        assert new != colon_hex(old)
        # pinning the new one (as the line says) lets it in; a wrong pin is refused
        pinned = Watched([*args, "--rdp-cert-fingerprint", new, *runs], rdp_env(tmp_path), None)
        assert pinned.returncode == 0, pinned.stdout + pinned.stderr
        assert "pinned" in pinned.stdout.splitlines()[0]
        wrong = Watched([*args, "--rdp-cert-fingerprint", old, *runs], rdp_env(tmp_path), None)
        assert wrong.returncode == 1 and "pinned" in one_line(wrong.stderr)
        assert first.alive_children() == [] and pinned.alive_children() == []


def test_session_ended_mid_run_is_resumable_with_a_new_bridge(
    rdp_probe: Probe, screen: X11vncDesktop, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    size = rdp_probe.size
    click = rdp_probe.canvas_point()
    server = RdpShadowServer(screen.display).start()
    try:

        def script(_request: Any, index: int) -> Reply:
            if index == 0:  # the session ends while the model "thinks"
                server.stop_server()
                time.sleep(2.0)
            if index <= 1:
                return Reply.calls(call_at("click_at", click, size))
            return Reply.text("Clicked.")

        gemini.script(script)
        runs = ["--runs-dir", str(tmp_path / "runs")]
        args = ["run", "--rdp", server.address, "--task", "Click", "--thread-id", "s1"]
        run = Watched([*args, *runs], rdp_env(tmp_path), None)
        assert run.returncode == 1, run.stdout + run.stderr
        line = one_line(run.stderr)
        assert "RDP session" in line and "ended" in line and "vnc-use resume s1" in line
        assert run.alive_children() == []
        assert rdp_probe.log.events("press") == []
        server.start()  # the server is back (same certificate): resume starts a new bridge
        resumed = Watched(["resume", "s1", *runs], rdp_env(tmp_path), None)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        rdp_probe.log.wait_type("press")
        assert resumed.alive_children() == []
    finally:
        server.stop()


def test_missing_xfreerdp_names_the_package(gemini: GeminiStandIn, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("Xvnc", "vncpasswd", "xmodmap", "xwininfo"):
        found = subprocess.run(["which", name], capture_output=True, text=True, check=True)
        (bin_dir / name).symlink_to(found.stdout.strip())
    run = Watched(
        ["run", "--rdp", "127.0.0.1:3389", "--task", "t", "--runs-dir", str(tmp_path)],
        rdp_env(tmp_path, PATH=str(bin_dir)),
        None,
    )
    assert run.returncode == 2
    line = one_line(run.stderr)
    assert "xfreerdp" in line and "apt-get install -y freerdp2-x11" in line


# --------------------------------------------------------------------------- units


def test_addresses_and_fingerprints() -> None:
    assert RdpTarget.parse("winbox") == RdpTarget("winbox", 3389)
    assert str(RdpTarget.parse("10.0.0.5:3390")) == "10.0.0.5:3390"
    assert RdpTarget.parse("[::1]:3391") == RdpTarget("::1", 3391)
    assert RdpTarget.parse("winbox").label == "rdp://winbox:3389 (via FreeRDP)"
    for bad in ("", "a b", "host:99999", "host:x", "[::1"):
        with pytest.raises(ConfigError, match="bad RDP address"):
            RdpTarget.parse(bad)
    hexed = "ab" * 32
    assert parse_fingerprint(colon_hex(hexed).upper()) == hexed
    assert parse_fingerprint("sha256:" + hexed) == hexed
    with pytest.raises(ConfigError, match="64 hex"):
        parse_fingerprint("abc")


def test_trust_store_records_once_and_refuses_a_change(tmp_path: Path) -> None:
    store = TrustStore(tmp_path / "state")
    target = RdpTarget("h", 3389)
    assert store.check(target, "aa" * 32, None) == "first use"
    assert store.check(target, "aa" * 32, None) == "known"
    assert store.path.stat().st_mode & 0o777 == 0o600
    with pytest.raises(Exception, match="trusted on first use") as info:
        store.check(target, "bb" * 32, None)
    assert colon_hex("aa" * 32) in str(info.value) and colon_hex("bb" * 32) in str(info.value)
    assert store.check(target, "bb" * 32, "bb" * 32) == "pinned"


def test_untypeable_characters_are_named_and_chunks_split_repeated_keys() -> None:
    with pytest.raises(ValueError, match="cannot type 'é' 'ü'"):
        RDP_KEYBOARD.refuse_untypeable("Grüße café"[:3] + "é")
    RDP_KEYBOARD.refuse_untypeable(string.printable.replace("\x0b", "").replace("\x0c", ""))
    assert RDP_KEYBOARD.chunks("Mississippi") == ["Mis", "sis", "sip", "pi"]
    assert RDP_KEYBOARD.chunks(":;lL") == [":", ";l", "L"]


def test_scancodes_hold_shift_and_never_caps_lock() -> None:
    """Each character is its US key's scancode, inside a Shift press when it needs one; no
    event is a Caps Lock."""
    events = scancode_events("aA!\t")
    shift, caps = (0xFFE1, 0x2A), 0x3A
    assert events == [
        (ord("a"), 0x1E, True), (ord("a"), 0x1E, False),
        (*shift, True), (ord("A"), 0x1E, True), (ord("A"), 0x1E, False), (*shift, False),
        (*shift, True), (ord("!"), 0x02, True), (ord("!"), 0x02, False), (*shift, False),
        (0xFF09, 0x0F, True), (0xFF09, 0x0F, False),
    ]  # fmt: skip
    typed = scancode_events(ASCII + MIXED)
    assert all(code != caps for _sym, code, _down in typed)
    shifted = sum(1 for ch in ASCII + MIXED if ch.isupper() or ch in '~!@#$%^&*()_+{}|:"<>?')
    assert len(typed) == 2 * len(ASCII + MIXED) + 2 * shifted  # one Shift press per shifted
    assert combo_scancode_events(["ctrl", "a"]) == [
        (0xFFE3, 0x1D, True),
        (ord("a"), 0x1E, True),
        (ord("a"), 0x1E, False),
        (0xFFE3, 0x1D, False),
    ]
    assert combo_scancode_events(["shift", "A"]) == [
        (*shift, True),
        (ord("A"), 0x1E, True),
        (ord("A"), 0x1E, False),
        (*shift, False),
    ]
    assert combo_scancode_events(["ctrl", "é"]) is None  # no US key: the keysym path
    assert (
        RDP_KEYBOARD.scancodes and RDP_KEYBOARD.typeable(ASCII) and not RDP_KEYBOARD.typeable("é")
    )


def test_kept_bridge_serves_runs_and_the_live_view(
    rdp_probe: Probe, open_rdp: RdpShadowServer, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """``vnc-use desktop rdp HOST``: up across commands, used by ``run --rdp HOST`` (which
    leaves it up), shown by ``vnc-use view`` and ``desktop status``, stopped by ``down``."""
    env = rdp_env(tmp_path)
    up = Watched(["desktop", "rdp", open_rdp.address], env, None)
    assert up.returncode == 0, up.stdout + up.stderr
    assert f"rdp://{open_rdp.address} (via FreeRDP)" in up.stdout
    state = json.loads((tmp_path / "rdp-state" / "bridge" / "state.json").read_text())
    pids = [p["pid"] for p in state["processes"]]
    try:
        status = Watched(["desktop", "status"], env, None)
        assert status.returncode == 0 and "RDP bridge: running" in status.stdout
        size = rdp_probe.size
        gemini.script(Reply.calls(call_at("click_at", rdp_probe.canvas_point(), size)))
        gemini.extend(Reply.text("Clicked."))
        args = ["run", "--rdp", open_rdp.address, "--task", "Click"]
        run = Watched([*args, "--runs-dir", str(tmp_path / "runs")], env, None)
        assert run.returncode == 0, run.stdout + run.stderr
        rdp_probe.log.wait_type("press")
        assert not any("xfreerdp" in n for n in run.children.values())  # no bridge of its own
        assert all(Path(f"/proc/{pid}").exists() for pid in pids)  # the kept one stays up
        view = subprocess.Popen(
            [*CLI, "view", "--vnc", state["server"], "--port", "0"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert view.stdout is not None
            assert "live view (view only): http://127.0.0.1:" in view.stdout.readline()
        finally:
            view.terminate()
            view.wait(timeout=10)
    finally:
        down = Watched(["desktop", "down"], env, None)
    assert down.returncode == 0 and "RDP bridge stopped" in down.stdout
    assert not any(Path(f"/proc/{pid}").exists() and process_state(pid) != "Z" for pid in pids)


# --------------------------------------------------------------------------- mcp, replay, server


def _bridge_processes(address: str) -> dict[int, bytes]:
    """Running processes of bridges to ``address`` (its Xvnc names it as the desktop,
    xfreerdp as ``/v:``), by pid, with their command lines."""
    marks = (f"vnc-use rdp {address}".encode(), f"/v:{address}".encode())
    found: dict[int, bytes] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if any(m in cmdline for m in marks) and process_state(int(entry.name)) not in "ZX":
            found[int(entry.name)] = cmdline
    return found


def _gone(address: str) -> bool:
    """Whether the bridges to ``address`` are gone (their stop may still be under way)."""
    deadline = time.monotonic() + 10
    while _bridge_processes(address) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _bridge_processes(address)


def test_mcp_over_rdp_lands_clicks_and_text_and_stops_the_bridge(
    rdp_probe: Probe,
    nla_rdp: RdpShadowServer,
    gemini: GeminiStandIn,
    tmp_path: Path,
) -> None:
    """``vnc-use mcp --rdp HOST``: the bridge lives as long as the server; the tools and
    run_task act on it; stdio EOF stops it; the password is in no file, output or command
    line."""
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.types import TextContent

    assert _gone(nla_rdp.address)
    click = rdp_probe.canvas_point()
    ex, ey = rdp_probe.entry_center
    gemini.script(Reply.calls(call_at("click_at", click, rdp_probe.size)), Reply.text("Clicked."))
    runs = tmp_path / "runs"
    args = ["mcp", "--rdp", nla_rdp.address, "--rdp-user", USER, "--runs-dir", str(runs)]
    params = StdioServerParameters(
        command=CLI[0], args=[*CLI[1:], *args], env=rdp_env(tmp_path, RDP_PASSWORD=PASSWORD)
    )
    seen: dict[int, bytes] = {}

    async def main() -> None:
        async with Client(params) as c:
            shot = await c.call_tool("screenshot", {})
            assert not shot.is_error
            seen.update(_bridge_processes(nla_rdp.address))
            clicked = await c.call_tool("click", {"x": click[0], "y": click[1]})
            assert not clicked.is_error
            press = rdp_probe.log.wait_type("press")
            assert abs(press["x"] - click[0]) <= 2 and abs(press["y"] - click[1]) <= 2
            await c.call_tool("click", {"x": ex, "y": ey})
            for keys in ("control+a", "backspace"):  # the entry may hold an earlier test's text
                assert not (await c.call_tool("press_keys", {"keys": keys})).is_error
            typed = await c.call_tool(
                "type_text", {"text": "Mississippi (1100)!", "press_enter": True}
            )
            assert not typed.is_error
            assert rdp_probe.log.wait_type("submit")["text"] == "Mississippi (1100)!"
            rdp_probe.log.clear()
            done = await c.call_tool("run_task", {"task": "Click the canvas"})
            outcome = done.structured_content
            assert outcome is not None and outcome["status"] == "done", [
                b.text for b in done.content if isinstance(b, TextContent)
            ]
            rdp_probe.log.wait_type("press")

    anyio.run(main)
    assert {n.split(b"\0")[0].rsplit(b"/", 1)[-1] for n in seen.values()} >= {b"Xvnc", b"xfreerdp"}
    assert not any(PASSWORD.encode() in cmdline for cmdline in seen.values())
    assert _gone(nla_rdp.address)  # stdio EOF stopped the bridge
    (session,) = [p for p in runs.iterdir() if p.name.startswith("mcp-")]
    saved = json.loads((session / "run.json").read_text())
    assert saved["vnc_server"] == f"rdp://{nla_rdp.address} (via FreeRDP)"
    assert (session / "freerdp.log").exists()
    assert files_containing(tmp_path, PASSWORD.encode()) == []


def test_mcp_over_rdp_stops_the_bridge_on_sigterm(
    open_rdp: RdpShadowServer, tmp_path: Path
) -> None:
    proc = subprocess.Popen(
        [*CLI, "mcp", "--rdp", open_rdp.address, "--runs-dir", str(tmp_path / "runs")],
        env=rdp_env(tmp_path),
        stdin=subprocess.PIPE,  # never closed: only the signal ends it
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        lines = [proc.stderr.readline(), proc.stderr.readline()]
        assert "serving rdp://" in lines[1], lines
        assert len(_bridge_processes(open_rdp.address)) == 2  # Xvnc, xfreerdp
        proc.terminate()
        code = proc.wait(timeout=20)
        assert code == 0, (code, proc.stderr.read())  # -2 seen once in a loaded full run
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _gone(open_rdp.address)


def test_replay_over_rdp_lands_the_recorded_click(
    rdp_probe: Probe, open_rdp: RdpShadowServer, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    click = rdp_probe.canvas_point()
    gemini.script(Reply.calls(call_at("click_at", click, rdp_probe.size)), Reply.text("Clicked."))
    runs = ["--runs-dir", str(tmp_path / "runs")]
    args = ["run", "--rdp", open_rdp.address, "--task", "Click", "--thread-id", "rec"]
    recorded = Watched([*args, *runs], rdp_env(tmp_path), None)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    first = rdp_probe.log.wait_type("press")
    rdp_probe.log.clear()
    asked = len(gemini.requests)
    replay = ["replay", "rec", "--rdp", open_rdp.address, "--tolerance", "off"]
    replayed = Watched([*replay, "--replay-id", "again", *runs], rdp_env(tmp_path), None)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    again = rdp_probe.log.wait_type("press")
    assert (again["x"], again["y"]) == (first["x"], first["y"])
    assert len(gemini.requests) == asked  # no model in a replay
    assert replayed.alive_children() == []
    assert any("xfreerdp" in n or "stdbuf" in n for n in replayed.children.values())
    assert (tmp_path / "runs" / "again" / "freerdp.log").exists()
    saved = json.loads((tmp_path / "runs" / "again" / "run.json").read_text())
    assert saved["vnc_server"] == f"rdp://{open_rdp.address} (via FreeRDP)"


def test_a_served_run_on_an_rdp_desktop_lands_its_click(
    rdp_probe: Probe, nla_rdp: RdpShadowServer, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """``vnc-use run --server URL --rdp HOST``: the spec names the RDP server and the server's
    variable with the password; the leg's bridge runs on the server and is stopped after it."""
    from vnc_use.testing.langgraph_dev import LangGraphDev

    click = rdp_probe.canvas_point()
    gemini.script(Reply.calls(call_at("click_at", click, rdp_probe.size)), Reply.text("Clicked."))
    runs = tmp_path / "runs"
    server_env = {"RDP_PASSWORD_W7": PASSWORD, "VNC_USE_RDP_DIR": str(tmp_path / "rdp-state")}
    with LangGraphDev(server_env, jobs=1) as dev:
        where = [
            "--rdp",
            nla_rdp.address,
            "--rdp-user",
            USER,
            "--rdp-password-env",
            "RDP_PASSWORD_W7",
        ]
        args = ["run", "--server", dev.url, *where, "--runs-dir", str(runs), "--task", "Click"]
        run = Watched(args, rdp_env(tmp_path), PASSWORD)
        assert run.returncode == 0, run.stdout + run.stderr + dev.log()[-3000:]
        press = rdp_probe.log.wait_type("press")
        assert abs(press["x"] - click[0]) <= 2 and abs(press["y"] - click[1]) <= 2
        time.sleep(1.5)  # the in-memory runtime writes its records to disk on a timer
        records = dev.records()
        assert _gone(nla_rdp.address)  # LiveRun.close stopped the leg's bridge
    (folder,) = [p.parent for p in runs.glob("*/run.json")]
    saved = json.loads((folder / "run.json").read_text())
    assert saved["vnc_server"] == f"rdp://{nla_rdp.address} (via FreeRDP)"
    assert saved["rdp"]["protocol"] == "NLA" and saved["rdp"]["username"] == USER
    assert (folder / "freerdp.log").exists()
    assert PASSWORD.encode() not in records
    assert files_containing(tmp_path, PASSWORD.encode()) == []
    assert PASSWORD not in run.stdout + run.stderr and not run.leaks


def test_a_run_spec_names_the_rdp_server_and_never_its_password() -> None:
    from vnc_use.agent.spec import RunSpec

    spec = RunSpec.from_context({"rdp_server": "winbox", "rdp_username": "bob"})
    assert spec.rdp_password_env == "RDP_PASSWORD" and spec.desktop_key == "winbox::3389"
    assert spec.rdp_options().target == RdpTarget("winbox", 3389)
    assert RunSpec.from_context({"rdp_server": "[::1]:3390"}).desktop_key == "[::1]::3390"
    assert RunSpec().rdp_options() is None and RunSpec().desktop_key == "localhost::5901"
    opts = spec.rdp_options()
    assert not opts.paste_text and not opts.allow_unverified_login
    both = {"rdp_paste_text": True, "rdp_allow_unverified_login": True}
    opts = RunSpec.from_context({"rdp_server": "winbox", **both}).rdp_options()
    assert opts.paste_text and opts.allow_unverified_login
    assert opts.to_json()["paste_text"] is True  # run.json keeps it for resume
    with pytest.raises(ConfigError, match="never send a secret"):
        RunSpec.from_context({"rdp_server": "winbox", "rdp_password": "x"})
    for bad in ({"rdp_server": "a b"}, {"rdp_server": "w", "rdp_size": "big"}):
        with pytest.raises(ConfigError):
            RunSpec.from_context(bad)


# --------------------------------------------------------------------------- eval --rdp


def test_eval_runs_a_task_on_one_rdp_desktop(
    rdp_probe: Probe, open_rdp: RdpShadowServer, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """`vnc-use eval --rdp`: the task's setup and check run here (in tests the shadow's screen
    is local, so the check reads the probe's log), the agent types through the bridge; the
    bridge is gone afterwards."""
    log = rdp_probe.log.path
    task = {
        "id": "rdp-type",
        "task": "Type Mississippi into the entry and press Enter",
        "setup": f'wc -l < {log} > "$EVAL_TASK_DIR/mark"',
        "check": "for _ in $(seq 50); do "  # a check may wait for the screen to settle
        f'tail -n +$(( $(cat "$EVAL_TASK_DIR/mark") + 1 )) {log}'
        ' | grep -q \'"type": "submit".*"text": "Mississippi"\' && exit 0; sleep 0.1; done; exit 1',
    }
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(task) + "\n")
    entry = rdp_probe.entry_center
    gemini.script(
        Reply.calls(
            call_at("type_text_at", entry, rdp_probe.size, text="Mississippi", press_enter=True)
        ),
        Reply.text("Typed."),
    )
    out = tmp_path / "out"
    run = Watched(
        ["eval", str(tasks), "--out", str(out), "--rdp", open_rdp.address], rdp_env(tmp_path), None
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (got,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert (got["outcome"], got["status"], got["steps"]) == ("passed", "done", 1), got
    started = {Path(name).name for name in run.children.values()}
    assert {"Xvnc", "xfreerdp"} <= started and run.alive_children() == []
    run_json = json.loads((out / got["report"]).with_name("run.json").read_text())
    assert run_json["rdp"]["label"] == f"rdp://{open_rdp.address} (via FreeRDP)"


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--server", "http://127.0.0.1:9"], "--rdp and --server do not go together"),
        (["--desktops", "2"], "--rdp is one desktop"),
        (["--vnc", "127.0.0.1::5999"], "--vnc and --rdp were both given"),
    ],
)
def test_eval_refuses_rdp_combinations_that_cannot_work(
    extra: list[str], says: str, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "t", "task": "x", "check": "true"}) + "\n")
    argv = ["eval", str(tasks), "--out", str(tmp_path / "out"), "--rdp", "127.0.0.1:9", *extra]
    done = subprocess.run(CLI + argv, env=rdp_env(tmp_path), capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert says in one_line(done.stderr)
