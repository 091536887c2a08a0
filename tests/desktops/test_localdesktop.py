"""The managed local desktop (`vnc-use desktop up|status|down`) and `run` without `--vnc`.

Every desktop here lives in a temporary state folder (never the user's own), is started by
the real `vnc-use` command in a subprocess (so its processes must outlive that command), and
is stopped by `vnc-use desktop down`, which must leave no process behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from vnc_use.desktops.local import (
    ENV_STATE_DIR,
    LocalDesktop,
    default_state_dir,
    marked_processes,
    process_start_time,
    session_members,
)
from vnc_use.desktops.settle import SettlePolicy
from vnc_use.desktops.vnc import VNCController
from vnc_use.desktops.xkeymap import XKeymap, plan_rounds, xvnc_display
from vnc_use.errors import VncAuthError
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.probe import ProbeLog

from cli_tools import listening_addresses, vnc_use

pytestmark = pytest.mark.desktop


def leftovers(state_json: dict[str, object]) -> list[int]:
    """Live processes of a stopped desktop: recorded PIDs, their sessions, marked helpers."""
    procs = state_json["processes"]
    assert isinstance(procs, list)
    alive = [p["pid"] for p in procs if process_start_time(p["pid"]) == p["start_time"]]
    for p in procs:
        alive += list(session_members(p["pid"]))
    alive += list(marked_processes(str(state_json["desktop_id"])))
    return sorted(set(alive))


@dataclass
class Managed:
    """A desktop started by `vnc-use desktop up` in a temporary state folder."""

    desk: LocalDesktop
    up: subprocess.CompletedProcess[str]

    @property
    def state(self) -> dict[str, object]:
        data: dict[str, object] = json.loads(self.desk.state_file.read_text())
        return data

    @property
    def server(self) -> str:
        return f"127.0.0.1::{self.state['port']}"


@pytest.fixture(scope="module")
def managed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Managed]:
    state_dir = tmp_path_factory.mktemp("desktop-state")
    up = vnc_use("desktop", "up", "--size", "1024x768", "--state-dir", str(state_dir))
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        yield Managed(LocalDesktop(state_dir), up)
    finally:
        vnc_use("desktop", "down", "--state-dir", str(state_dir))


def test_up_prints_the_address_and_its_processes_outlive_the_command(managed: Managed) -> None:
    out = managed.up.stdout
    assert re.search(r"local desktop started at 127\.0\.0\.1::\d+ \(display :\d+, 1024x768\)", out)
    assert managed.server in out and "vnc-use view" in out and "vnc-use desktop down" in out
    # The command has exited; every process it started still runs, each in its own session.
    procs = managed.state["processes"]
    assert isinstance(procs, list)
    assert [p["name"] for p in procs] == ["Xvnc", "openbox", "xterm", "browser"]
    for p in procs:
        assert process_start_time(p["pid"]) == p["start_time"], p["name"]
        assert p["pid"] in session_members(p["pid"])  # a session leader
    status = vnc_use("desktop", "status", "--state-dir", str(managed.desk.state_dir))
    assert status.returncode == 0, status.stdout + status.stderr
    assert f"running at {managed.server}" in status.stdout
    assert status.stdout.count(" running\n") == 4


def test_a_second_up_reuses_the_running_desktop(managed: Managed) -> None:
    before = managed.state
    again = vnc_use("desktop", "up", "--state-dir", str(managed.desk.state_dir))
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"already running at {managed.server}" in again.stdout
    assert managed.state["processes"] == before["processes"]


def test_reachable_with_its_password_and_not_without(managed: Managed) -> None:
    creds = managed.desk.credentials()
    with VNCController(connect_timeout=5).connect(managed.server, creds.password) as vnc:
        assert vnc.screen_size() == (1024, 768)
        assert vnc.screenshot().size == (1024, 768)
    with pytest.raises(VncAuthError, match="rejected"):
        VNCController(connect_timeout=5).connect(managed.server, "wrong-pw")
    with pytest.raises(VncAuthError, match="asks for a password"):
        VNCController(connect_timeout=5).connect(managed.server, None)


def test_the_first_settled_frame_of_a_connection_is_whole(managed: Managed) -> None:
    """On this desktop TigerVNC's first rectangle is not at the origin, and a fresh connection
    may first get a cursor-only update: both once left black holes or a hung wait."""
    creds = managed.desk.credentials()
    for _ in range(4):
        with VNCController(connect_timeout=5).connect(managed.server, creds.password) as vnc:
            frame, _ = vnc.settled_frame(SettlePolicy())
            assert frame.tobytes() == vnc.screenshot().tobytes()


def test_typing_on_it_finds_its_keymap_and_spare_keys(managed: Managed) -> None:
    """Text in other scripts (issue 38): a connection to the local desktop finds its Xvnc's
    display and keymap, whose spare keycodes it maps characters onto before typing."""
    display = str(managed.state["display"])
    assert xvnc_display("127.0.0.1", int(str(managed.state["port"]))) == display
    keymap = XKeymap.open(display)
    assert keymap is not None
    rounds = plan_rounds("Съешь же ещё этих мягких французских булок", keymap.mapping())
    assert len(rounds) >= 2 and all(0 < len(r.assign) <= 19 for r in rounds)


def test_listens_on_loopback_only(managed: Managed) -> None:
    port = managed.state["port"]
    assert isinstance(port, int)
    assert listening_addresses(port) == ["127.0.0.1"]
    display = int(str(managed.state["display"]).lstrip(":"))
    assert listening_addresses(6000 + display) == []  # no X11 over TCP


def test_secrets_are_owner_only_and_never_printed(managed: Managed) -> None:
    desk = managed.desk
    assert stat.S_IMODE(desk.state_dir.stat().st_mode) == 0o700
    for path in (desk.credentials_file, desk.passwd_file, desk.state_file):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    creds = desk.credentials()
    assert len(creds.password) == 8 and creds.password != creds.view_password
    assert creds.password not in desk.state_file.read_text()
    assert creds.password not in managed.up.stdout + managed.up.stderr
    assert "***" in repr(creds) and creds.password not in repr(creds)


def test_the_view_only_password_cannot_send_input(managed: Managed, tmp_path: Path) -> None:
    """Xvnc itself drops the input of a session that logged in with the view-only password."""
    display = str(managed.state["display"])
    log = ProbeLog(tmp_path / "probe.jsonl")
    probe = subprocess.Popen(
        [sys.executable, "-m", "vnc_use.testing.probe", "--out", str(log.path)],
        env={**os.environ, "DISPLAY": display},
        stdin=subprocess.DEVNULL,
    )
    try:
        log.wait_type("ready", timeout=20)
        creds = managed.desk.credentials()
        with VNCController().connect(managed.server, creds.view_password) as viewer:
            assert viewer.screen_size() == (1024, 768)  # it may watch...
            viewer.click(700, 300)
            viewer.key_combo("a")
            viewer.screenshot()  # a round trip: the server has handled the events by now
        with VNCController().connect(managed.server, creds.password) as agent:
            agent.click(710, 310)  # ...the full password's session may act
        press = log.wait_type("press")
        assert (press["x"], press["y"]) == (710, 310)
        assert log.events("press") == [press] and log.events("key") == []
    finally:
        probe.terminate()
        probe.wait(timeout=10)


def test_down_stops_exactly_what_it_started(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    up = vnc_use("desktop", "up", "--browser", "none", "--state-dir", str(state_dir))
    assert up.returncode == 0, up.stdout + up.stderr
    desk = LocalDesktop(state_dir)
    state = json.loads(desk.state_file.read_text())
    assert leftovers(state) != []

    down = vnc_use("desktop", "down", "--state-dir", str(state_dir))
    assert down.returncode == 0, down.stdout + down.stderr
    assert "local desktop stopped: xterm" in down.stdout
    assert leftovers(state) == []
    assert not desk.state_file.exists() and not desk.credentials_file.exists()
    assert listening_addresses(state["port"]) == []
    assert not desk.status().running and desk.down() == []


def test_down_never_signals_a_recycled_pid(tmp_path: Path) -> None:
    """A recorded PID that now belongs to another process (other start time) is left alone."""
    bystander = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True
    )
    try:
        start = process_start_time(bystander.pid)
        assert start is not None
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        state_dir = tmp_path / "state"
        state_dir.mkdir(mode=0o700)
        for recorded_start, recorded_boot in ((start + 1, boot_id), (start, "another-boot")):
            record = {"name": "Xvnc", "pid": bystander.pid, "start_time": recorded_start}
            state = {
                **dict(display=":99", port=1, width=1024, height=768, browser="none"),
                **dict(boot_id=recorded_boot, started_at="then", desktop_id=""),
                "processes": [{**record, "argv": ["Xvnc"]}],
            }
            (state_dir / "state.json").write_text(json.dumps(state))
            desk = LocalDesktop(state_dir)
            assert desk.status().running is False
            assert desk.down() == []
            assert bystander.poll() is None and process_start_time(bystander.pid) == start
    finally:
        bystander.kill()
        bystander.wait()


def test_missing_programs_give_one_line_with_the_install_command(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in ("Xvnc", "vncpasswd"):  # the rest is "not installed"
        (bin_dir / program).symlink_to(str(shutil.which(program)))
    proc = vnc_use(
        "desktop", "up", "--state-dir", str(tmp_path / "state"), env={"PATH": str(bin_dir)}
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    sudo = "" if os.geteuid() == 0 else "sudo "
    assert line.startswith("vnc-use: the local desktop needs openbox, xterm, chromium")
    assert line.endswith(f"run: {sudo}apt-get install -y chromium openbox xterm")
    assert not (tmp_path / "state" / "state.json").exists()


def test_state_folder_choice(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv(ENV_STATE_DIR, raising=False)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    assert default_state_dir() == tmp_path / "home/.local/state/vnc-use/desktop"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert default_state_dir() == tmp_path / "xdg/vnc-use/desktop"
    monkeypatch.setenv(ENV_STATE_DIR, str(tmp_path / "mine"))
    assert default_state_dir() == tmp_path / "mine"
    assert LocalDesktop().state_dir == tmp_path / "mine"


def test_run_without_vnc_starts_the_local_desktop_and_completes(
    gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """README and docs/desktops/local-desktop.md: `vnc-use run --task ...` with no --vnc starts
    the local desktop; a second `vnc-use run --view --task ...` finds it running and serves a
    live view meanwhile."""
    state_dir, marker = tmp_path / "state", tmp_path / "typed-by-the-agent"
    gemini.script(
        # The terminal fills the left of the screen: click it (the window manager gives it
        # the focus), then type into it.
        Reply.calls(FunctionCallSpec("click_at", x=150, y=400)),
        Reply.calls(
            FunctionCallSpec(
                "type_text_at",
                x=150,
                y=400,
                text=f"touch {marker}",
                press_enter=True,
                clear_before_typing=False,
            )
        ),
        Reply.text("The file is there."),
        Reply.text("Hello."),  # the second run's only answer
    )
    env = {ENV_STATE_DIR: str(state_dir), "VNC_PASSWORD": ""}
    runs_dir = str(tmp_path / "runs")
    try:
        proc = vnc_use("run", "--task", "Create the file", "--runs-dir", runs_dir, env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "local desktop (started): 127.0.0.1::" in proc.stdout
        assert "status: done" in proc.stdout and "answer: The file is there." in proc.stdout
        deadline = time.monotonic() + 10
        while not marker.exists():
            assert time.monotonic() < deadline, "the typed command never ran in the terminal"
            time.sleep(0.05)

        # --view, and --json: then stdout holds only JSON lines, the notices go to stderr.
        again = vnc_use(
            *("run", "--view", "--task", "Say hello", "--json", "--runs-dir", runs_dir), env=env
        )
        assert again.returncode == 0, again.stdout + again.stderr
        assert "local desktop (running): 127.0.0.1::" in again.stderr
        assert re.search(
            r"live view \(view only\): http://127\.0\.0\.1:\d+/[\w-]{20,}/", again.stderr
        )
        events = [json.loads(line) for line in again.stdout.splitlines()]
        assert any("Hello." in json.dumps(e) for e in events)

        desk = LocalDesktop(state_dir)
        state = desk.read_state()
        assert state is not None
        runs = list((tmp_path / "runs").glob("*/run.json"))
        assert [json.loads(r.read_text())["vnc_server"] for r in runs] == [state.server] * 2
        creds = desk.credentials()
        for output in (proc.stdout + proc.stderr, again.stdout + again.stderr):
            assert creds.password not in output and creds.view_password not in output
        # The desktop's programs never see the caller's secrets (the model reads the screen).
        xterm = state.process("xterm")
        assert xterm is not None
        environ = Path(f"/proc/{xterm.pid}/environ").read_bytes()
        assert b"GOOGLE_API_KEY" not in environ and b"VNC_PASSWORD" not in environ
    finally:
        down = vnc_use("desktop", "down", env=env)
        assert down.returncode == 0, down.stdout + down.stderr


def test_run_without_a_key_says_the_key_is_missing_not_that_a_running_desktop_was_not_started(
    managed: Managed, tmp_path: Path
) -> None:
    """Issue 17 item 12: the local desktop runs; the one thing missing is the key."""
    env = {ENV_STATE_DIR: str(managed.desk.state_dir), "GOOGLE_API_KEY": "", "GEMINI_API_KEY": ""}
    proc = vnc_use("run", "--task", "x", "--runs-dir", str(tmp_path / "runs"), env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()  # the provider's own check, then the desktop
    assert line.startswith("vnc-use: No Gemini API key: set GOOGLE_API_KEY (or GEMINI_API_KEY)")
    assert line.endswith(
        f"; the local desktop at {managed.server} is running and was left as it is"
    )
    assert not list((tmp_path / "runs").glob("*/run.json"))


def test_approve_from_a_shell_with_another_desktop_folder(
    managed: Managed, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """Issue 38 item 9: ``approve`` from a shell without the local desktop's state folder
    said "set VNC_PASSWORD" and marked the waiting run ``error``. run.json now records the
    folder: the approval uses it, and when it cannot be read the run stays waiting and the
    one line names the folder."""
    asks = {"decision": "require_confirmation", "explanation": "Moves the pointer."}
    gemini.script(
        Reply.calls(FunctionCallSpec("hover_at", x=900, y=900, safety_decision=asks)),
        Reply.text("Hovered."),
    )
    state_dir = managed.desk.state_dir
    runs = tmp_path / "runs"
    base = ["--runs-dir", str(runs), "--no-video"]
    mine = {ENV_STATE_DIR: str(state_dir), "VNC_PASSWORD": ""}
    proc = vnc_use("run", "--task", "Hover", "--thread-id", "w", *base, env=mine)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    record = json.loads((runs / "w" / "run.json").read_text())
    assert record["local_desktop_dir"] == str(state_dir)

    other = {ENV_STATE_DIR: str(tmp_path / "another-shell"), "VNC_PASSWORD": ""}
    hidden = state_dir.with_name(state_dir.name + "-hidden")
    state_dir.rename(hidden)  # as if this shell could not see the folder
    try:
        proc = vnc_use("approve", "w", *base, env=other)
    finally:
        hidden.rename(state_dir)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert str(state_dir) in line and f"VNC_USE_DESKTOP_DIR={state_dir}" in line, line
    assert "VNC_PASSWORD" not in line
    assert json.loads((runs / "w" / "run.json").read_text())["status"] == "awaiting_approval"
    assert len(gemini.requests) == 1

    proc = vnc_use("approve", "w", *base, env=other)  # the folder readable: it is used
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "status: done" in proc.stdout and "answer: Hovered." in proc.stdout
    assert managed.desk.credentials().password not in proc.stdout + proc.stderr


def test_run_without_a_key_does_not_start_a_desktop(tmp_path: Path) -> None:
    env = {ENV_STATE_DIR: str(tmp_path / "state"), "GOOGLE_API_KEY": "", "GEMINI_API_KEY": ""}
    proc = vnc_use("run", "--task", "x", "--runs-dir", str(tmp_path / "runs"), env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("vnc-use: No Gemini API key") and "GOOGLE_API_KEY" in line
    assert not (tmp_path / "state" / "state.json").exists()


def test_up_on_a_chosen_display_refuses_a_busy_one(tmp_path: Path) -> None:
    """``--display N``: a display a real X server holds gives one line naming it; a free one
    is used, shown by ``status``; another ``--display`` while it runs is refused."""
    from vnc_use.desktops.xserver import display_free

    xvfb = shutil.which("Xvfb")
    assert xvfb, "Xvfb is missing: run ./scripts/install.sh"
    number = next(n for n in range(600, 700) if display_free(n))
    state_dir = str(tmp_path / "state")
    holder = subprocess.Popen(
        [xvfb, f":{number}", "-screen", "0", "640x480x24", "-nolisten", "tcp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while display_free(number) and time.monotonic() < deadline:
            time.sleep(0.02)
        busy = vnc_use(
            "desktop", "up", "--browser", "none", "--display", str(number), "--state-dir", state_dir
        )
        assert busy.returncode == 2, busy.stdout + busy.stderr
        (line,) = busy.stderr.strip().splitlines()
        assert f"display :{number} is busy" in line and "--display" in line
        assert not (tmp_path / "state" / "state.json").exists()
    finally:
        holder.terminate()
        holder.wait(timeout=10)
    free = next(n for n in range(number + 1, number + 100) if display_free(n))
    up = vnc_use(
        "desktop", "up", "--browser", "none", "--display", str(free), "--state-dir", state_dir
    )
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"(display :{free}, 1440x900)" in up.stdout
        assert json.loads(LocalDesktop(state_dir).state_file.read_text())["display"] == f":{free}"
        status = vnc_use("desktop", "status", "--state-dir", state_dir)
        assert status.returncode == 0, status.stdout + status.stderr
        assert f"  X display:    :{free} (DISPLAY=:{free} for X programs)" in status.stdout
        moved = vnc_use(
            "desktop",
            "up",
            "--display",
            str(free + 1),
            "--browser",
            "none",
            "--state-dir",
            state_dir,
        )
        assert moved.returncode == 2, moved.stdout + moved.stderr
        (line,) = moved.stderr.strip().splitlines()
        assert f"already runs on display :{free}, not :{free + 1}" in line
    finally:
        vnc_use("desktop", "down", "--state-dir", state_dir)
    bad = vnc_use("desktop", "up", "--display", "-3", "--state-dir", state_dir)
    assert bad.returncode == 2 and "out of range" in bad.stderr, bad.stdout + bad.stderr
