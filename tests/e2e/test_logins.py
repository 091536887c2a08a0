"""Issue 24 end to end: `vnc-use run` against macOS, RealVNC, UltraVNC and wayvnc logins.

No Mac or Windows server runs here: :class:`~vnc_use.testing.rfb_front.RfbFront` greets as
they do (and performs macOS's type-30 login, checked against vncdotool's own client in
``test_rfb_front.py``) and relays to the session's Xvnc with the probe app. wayvnc runs for
real on headless sway (:mod:`vnc_use.testing.wayland`). The CLI runs in subprocesses, the
Gemini stand-in answers in this process; each test asserts on what the probe app or the
terminal received, on the one-line message, and that no password was written or printed.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.rfb_front import RfbFront
from vnc_use.testing.wayland import WaylandDesktop

from desktop_fixtures import Probe

pytestmark = pytest.mark.desktop

CLI = [sys.executable, "-m", "vnc_use.cli"]
USER = "alice"
PASSWORD = "Sh4red-secret!"  # 14 characters: sent whole by type 30, never cut to 8
VNC_PASSWORD = "legacy12"  # the Mac's "VNC viewers may control screen with password"
WAYLAND_USER, WAYLAND_PASSWORD = "wayuser", "wayland-pass14"
_ENV_DROP = ("VNC_PASSWORD", "VNC_USERNAME")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _ENV_DROP}
    env.update(extra)
    return env


def run_cli(
    args: list[str], env: dict[str, str], timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        CLI + args,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def one_line_error(output: str) -> str:
    """The single ``vnc-use:`` line of ``output``; no traceback, no Python reprs."""
    assert "Traceback" not in output, output
    assert "Unhandled Error" not in output, output
    lines = [line for line in output.splitlines() if line.startswith("vnc-use:")]
    assert len(lines) == 1, output
    assert "bytearray(" not in lines[0] and "b'" not in lines[0], lines[0]
    return lines[0]


def assert_no_secret(folder: Path, output: str, *secrets: str) -> None:
    """No secret in the output nor in any byte of any file under ``folder``."""
    files = [p for p in folder.rglob("*") if p.is_file()]
    for secret in secrets:
        assert secret not in output
        raw = secret.encode()
        leaked = [str(p) for p in files if raw in p.read_bytes()]
        assert leaked == [], f"a password was written to {leaked}"


def entry_reply(probe: Probe, text: str) -> Reply:
    w, h = probe.size
    ex, ey = (round(v * 1000 / s) for v, s in zip(probe.entry_center, (w, h), strict=True))
    return Reply.calls(FunctionCallSpec("type_text_at", x=ex, y=ey, text=text, press_enter=True))


def run_json(runs: Path) -> dict[str, Any]:
    (path,) = runs.rglob("run.json")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@pytest.fixture
def mac(desktop: TestDesktop) -> Iterator[RfbFront]:
    """macOS Screen Sharing as a current Mac greets: types 30, 33, 36, 35 (no VNC password)."""
    with RfbFront(
        "macos", desktop.server, backend_password=desktop.password, username=USER, password=PASSWORD
    ) as front:
        yield front


# ------------------------------------------------------------------ macOS without a user name


def _no_user_checks(output: str, elapsed: float, mac: RfbFront) -> None:
    line = one_line_error(output)
    assert "VNC_USERNAME" in line and "--vnc-user" in line, line
    assert "username:" not in output and "password:" not in output.lower().replace(
        "vnc_password", ""
    ), output
    assert PASSWORD not in output
    assert elapsed < 20, f"took {elapsed:.1f} s"  # the issue: ends within a few seconds
    assert all(a.chosen is None for a in mac.attempts)  # no login was even tried


@pytest.mark.parametrize("with_password", [True, False], ids=["password", "no-password"])
def test_macos_without_a_user_name_no_terminal(
    with_password: bool, mac: RfbFront, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """Before: a bare `username: `, 41 lines of Twisted tracebacks, EOFError."""
    start = time.monotonic()
    proc = run_cli(
        ["run", "--vnc", mac.server, "--task", "x", "--runs-dir", str(tmp_path)],
        _env(VNC_PASSWORD=PASSWORD) if with_password else _env(),
    )
    elapsed = time.monotonic() - start
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    _no_user_checks(output, elapsed, mac)
    if not with_password:
        assert "VNC_PASSWORD" in one_line_error(output)
    assert gemini.requests == []


def _run_on_a_terminal(args: list[str], env: dict[str, str], timeout: float) -> tuple[int, str]:
    """Run the CLI with stdin, stdout and stderr on a pseudo-terminal; (exit code, output)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(CLI + args, env=env, stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every holder of the terminal's slave side has exited
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
        output = b"".join(chunks).decode(errors="replace")
        pytest.fail(f"vnc-use did not exit within {timeout:g} s on a terminal: {output}")
    finally:
        os.close(master)
    text = _ANSI.sub("", b"".join(chunks).decode(errors="replace")).replace("\r\n", "\n")
    return code, text


def test_macos_without_a_user_name_on_a_terminal(
    mac: RfbFront, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """Before: a `username: ` prompt, a message blaming the server, a process that never exits."""
    start = time.monotonic()
    code, output = _run_on_a_terminal(
        ["run", "--vnc", mac.server, "--task", "x", "--runs-dir", str(tmp_path)],
        _env(VNC_PASSWORD=PASSWORD),
        timeout=60,
    )
    elapsed = time.monotonic() - start
    assert code == 1, output
    _no_user_checks(output, elapsed, mac)


# ------------------------------------------------------------------ macOS with a user name


@pytest.mark.parametrize("how", ["VNC_USERNAME", "--vnc-user"])
def test_macos_login_types_exactly(
    how: str, mac: RfbFront, probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """Type 30 with a 14-character password; the typed text reaches the probe exactly."""
    text = f"Mac login via {how}: 100% ok"
    gemini.script(entry_reply(probe, text), Reply.text("Typed."))
    args = ["run", "--vnc", mac.server, "--task", "Type it", "--runs-dir", str(tmp_path)]
    env = _env(VNC_PASSWORD=PASSWORD)
    if how == "VNC_USERNAME":
        env["VNC_USERNAME"] = USER
    else:
        args += ["--vnc-user", USER]
    proc = run_cli(args, env)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert probe.log.wait_type("submit")["text"] == text
    attempt = mac.wait_attempt(0)
    assert (attempt.chosen, attempt.username, attempt.success) == (30, USER, True)
    assert "Apple" in output.splitlines()[0]  # the first progress line names the type
    assert run_json(tmp_path)["security"]["type"] == 30
    assert_no_secret(tmp_path, output, PASSWORD)


def test_macos_wrong_password_is_one_line_naming_the_user(
    mac: RfbFront, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    wrong = "Not-the-right1"
    proc = run_cli(
        ["run", "--vnc", mac.server, "--task", "x", "--runs-dir", str(tmp_path)],
        _env(VNC_PASSWORD=wrong, VNC_USERNAME=USER),
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    line = one_line_error(output)
    assert USER in line and "macOS" in line, line
    assert mac.wait_attempt(0).username == USER
    assert_no_secret(tmp_path, output, wrong, PASSWORD)
    assert gemini.requests == []


@pytest.mark.parametrize(("user", "expected"), [(None, 2), (USER, 30)])
def test_macos_with_the_vnc_password_option(
    user: str | None,
    expected: int,
    desktop: TestDesktop,
    gemini: GeminiStandIn,
    tmp_path: Path,
) -> None:
    """Types 30 and 2: no user name uses 2 (before: 30 and a prompt); a user name uses 30."""
    gemini.script(Reply.text("Nothing to do."))
    with RfbFront(
        "macos",
        desktop.server,
        backend_password=desktop.password,
        username=USER,
        password=PASSWORD,
        vnc_password=VNC_PASSWORD,
        types=(30, 2),
    ) as front:
        env = _env(VNC_PASSWORD=VNC_PASSWORD if user is None else PASSWORD)
        if user is not None:
            env["VNC_USERNAME"] = user
        proc = run_cli(
            ["run", "--vnc", front.server, "--task", "x", "--runs-dir", str(tmp_path)], env
        )
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0, output
        attempt = front.wait_attempt(0)
        assert (attempt.chosen, attempt.success) == (expected, True)
    assert run_json(tmp_path)["security"]["type"] == expected
    assert_no_secret(tmp_path, output, PASSWORD, VNC_PASSWORD)


# ------------------------------------------------------------------ Windows servers


@pytest.mark.parametrize(
    ("profile", "names", "setting"),
    [
        ("realvnc", ("5 RA2", "6 RA2ne", "13 RA2_256"), '"VNC password"'),
        ("ultravnc", ("113 MS-Logon II",), "MS-Logon off"),
    ],
)
def test_windows_servers_name_their_types_and_the_setting(
    profile: str,
    names: tuple[str, ...],
    setting: str,
    desktop: TestDesktop,
    gemini: GeminiStandIn,
    tmp_path: Path,
) -> None:
    """Before: `did not speak the VNC protocol (unknown security types: (5, 6, 13))`."""
    with RfbFront(profile, desktop.server) as front:
        proc = run_cli(
            ["run", "--vnc", front.server, "--task", "x", "--runs-dir", str(tmp_path)],
            _env(VNC_PASSWORD=VNC_PASSWORD),
        )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    line = one_line_error(output)
    for name in names:
        assert name in line, line
    assert setting in line, line
    assert "did not speak the VNC protocol" not in line
    assert_no_secret(tmp_path, output, VNC_PASSWORD)


# ------------------------------------------------------------------ wayvnc with its password


@pytest.fixture(scope="module")
def wayvnc() -> Iterator[WaylandDesktop]:
    """wayvnc with enable_auth (VeNCrypt X509Plain) on headless sway, a terminal open."""
    with WaylandDesktop(auth=True, username=WAYLAND_USER, password=WAYLAND_PASSWORD) as desk:
        desk.start_typing_terminal()
        yield desk


def test_wayvnc_with_its_password_and_the_ca(
    wayvnc: WaylandDesktop, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    text = "wayvnc over TLS: {ok} 42"
    gemini.script(
        Reply.calls(
            FunctionCallSpec(
                "type_text_at",
                x=500,
                y=500,
                text=text,
                press_enter=True,
                clear_before_typing=False,
            )
        ),
        Reply.text("Typed."),
    )
    before = len(wayvnc.typed_lines())
    assert wayvnc.ca_file is not None
    proc = run_cli(
        [
            *("run", "--vnc", wayvnc.server, "--task", "Type it", "--runs-dir", str(tmp_path)),
            *("--vnc-user", WAYLAND_USER, "--vnc-ca", str(wayvnc.ca_file)),
        ],
        _env(VNC_PASSWORD=WAYLAND_PASSWORD),
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert wayvnc.wait_typed(before + 1)[before] == text
    security = run_json(tmp_path)["security"]
    assert (security["type"], security["encrypted"]) == (262, True)
    assert_no_secret(tmp_path, output, WAYLAND_PASSWORD)


def test_wayvnc_without_the_ca_fails_cleanly(
    wayvnc: WaylandDesktop, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    proc = run_cli(
        [
            *("run", "--vnc", wayvnc.server, "--task", "x", "--runs-dir", str(tmp_path)),
            *("--vnc-user", WAYLAND_USER),
        ],
        _env(VNC_PASSWORD=WAYLAND_PASSWORD),
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    line = one_line_error(output)
    assert "certificate" in line and "--vnc-ca" in line, line
    assert_no_secret(tmp_path, output, WAYLAND_PASSWORD)
    assert gemini.requests == []


def test_wayvnc_wrong_password_is_one_line(
    wayvnc: WaylandDesktop, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """wayvnc 0.5 answers a wrong password with a broken "OK" and hangs up (see
    test_wayland.py): still one line, no traceback, nothing leaked."""
    wrong = "wrong-wayland1"
    assert wayvnc.ca_file is not None
    proc = run_cli(
        [
            *("run", "--vnc", wayvnc.server, "--task", "x", "--runs-dir", str(tmp_path)),
            *("--vnc-user", WAYLAND_USER, "--vnc-ca", str(wayvnc.ca_file)),
        ],
        _env(VNC_PASSWORD=wrong),
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    one_line_error(output)
    assert_no_secret(tmp_path, output, wrong, WAYLAND_PASSWORD)
    assert gemini.requests == []


# ------------------------------------------------------------------ TightVNC


def test_tightvnc_uses_the_vnc_password(
    desktop: TestDesktop, probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """TightVNC 1.3 offers 2 and 16 (Tight): vnc-use logs in with 2 and types exactly."""
    text = "TightVNC: typed"
    gemini.script(entry_reply(probe, text), Reply.text("Typed."))
    with RfbFront(
        "tightvnc", desktop.server, backend_password=desktop.password, vnc_password=VNC_PASSWORD
    ) as front:
        proc = run_cli(
            ["run", "--vnc", front.server, "--task", "Type it", "--runs-dir", str(tmp_path)],
            _env(VNC_PASSWORD=VNC_PASSWORD),
        )
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0, output
        assert front.wait_attempt(0).chosen == 2
    assert probe.log.wait_type("submit")["text"] == text
    assert run_json(tmp_path)["security"]["type"] == 2
    assert_no_secret(tmp_path, output, VNC_PASSWORD)
