"""A walk over every option of ``vnc-use run`` (and ``resume``, ``approve``, ``deny``) on each
executor (this process, ``--server``, ``--fleet``), each with a value that is not its default:
the option is honoured, or refused in one line with exit 2 before anything starts. None is
dropped silently.

*Honoured* means: its value is in the run's spec (what the run acts with, sent as the served
run's context and onto the fleet's runs table, kept in ``run.json`` whatever the executor:
``tests/runs/test_leg.py``), or it is one of the few options that act outside the spec, each
checked here for where it goes. *Refused* is checked through the real command line, against
a server and a database that cannot be reached: exit 2, one line naming the option, so the
refusal came before any connection.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from vnc_use.cli import build_parser
from vnc_use.cli.outcome import given_options
from vnc_use.cli.spec import run_spec, saved_run_spec
from vnc_use.fleet.executor import FleetExecutor
from vnc_use.runs.executor import LocalExecutor, ServedExecutor
from vnc_use.runs.spec import RunSpec

from cli_tools import run_cli

SERVER = "http://127.0.0.1:9"
FLEET = "postgresql://ann@127.0.0.1:1/fleet"
VNC = "127.0.0.1::5999"

VALUES: dict[str, list[str]] = {
    "vnc": ["--vnc", "127.0.0.1::5998"],
    "rdp": ["--rdp", "rdp.example:3390"],
    "rdp_user": ["--rdp-user", "ann"],
    "rdp_domain": ["--rdp-domain", "CORP"],
    "rdp_size": ["--rdp-size", "1024x768"],
    "rdp_cert_fingerprint": ["--rdp-cert-fingerprint", "ab" * 32],
    "rdp_allow_unverified_login": ["--rdp-allow-unverified-login"],
    "rdp_paste_text": ["--rdp-paste-text"],
    "view": ["--view"],
    "screen_region": ["--screen-region", "800x600+10+20"],
    "step_limit": ["--step-limit", "7"],
    "timeout": ["--timeout", "99"],
    "stall_after": ["--stall-after", "2"],
    "max_cost": ["--max-cost", "3"],
    "price": ["--price", "1/2"],
    "provider": ["--provider", "anthropic"],
    "tool_version": ["--tool-version", "computer_20250124"],
    "model": ["--model", "gemini-3-flash-preview"],
    "base_url": ["--base-url", "http://127.0.0.1:8/v1"],
    "dialect": ["--dialect", "qwen"],
    "keep_screenshots": ["--keep-screenshots", "5"],
    "environment": ["--environment", "browser"],
    "model_family": ["--model-family", "gemini-3"],
    "keep_browser_actions": ["--keep-browser-actions"],
    "api_version": ["--api-version", "v1"],
    "exclude": ["--exclude", "drag_and_drop"],
    "confirm": ["--confirm", "type_text_at"],
    "no_hitl": ["--no-hitl"],
    "no_initial_screenshot": ["--no-initial-screenshot"],
    "sensitive": ["--sensitive", "PIN"],
    "runs_dir": ["--runs-dir", "other-runs"],
    "video": ["--no-video"],
    "video_fps": ["--video-fps", "4"],
    "vnc_password": ["--vnc-password", "pw"],
    "reconnect_window": ["--reconnect-window", "5"],
    "vnc_user": ["--vnc-user", "bob"],
    "vnc_ca": ["--vnc-ca", "/etc/ca.pem"],
    "connect_timeout": ["--connect-timeout", "9"],
    "checkpointer": ["--checkpointer", "other.sqlite"],
    "lease_timeout": ["--lease-timeout", "5"],
    "vnc_password_env": ["--vnc-password-env", "MY_VNC_PW"],
    "rdp_password_env": ["--rdp-password-env", "MY_RDP_PW"],
    "label": ["--label", "gpu"],
    "answer": ["--answer", "yes"],
}
"""A value other than the default for each option that sets something."""

CONTEXT: dict[str, list[str]] = {
    "tool_version": ["--provider", "anthropic"],
    "base_url": ["--provider", "openai-compatible"],
    "dialect": ["--provider", "openai-compatible", "--base-url", "http://127.0.0.1:8/v1"],
}
"""What an option needs beside it to mean anything (given to the run without it too)."""

NOT_SETTINGS = {"help", "task", "thread_id", "quiet", "json", "server", "fleet"}
"""What is not a setting of the run: the task and its id, the output mode, the executor."""

OUTSIDE_THE_SPEC: dict[tuple[str, str], str] = {
    ("local", "view"): "the live view serves the desktop this process reached",
    ("local", "vnc_password"): "the password reach() connects with (never recorded)",
    ("local", "checkpointer"): "the storage the local executor opens",
    ("fleet", "label"): "the fleet's queue",
}
"""Options honoured outside the spec, by executor (each checked below)."""

RDP_OPTIONS = {
    "rdp_user",
    "rdp_domain",
    "rdp_size",
    "rdp_cert_fingerprint",
    "rdp_allow_unverified_login",
    "rdp_paste_text",
    "rdp_password_env",
}


def _parser_options(command: str) -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [a.dest for a in sub.choices[command]._actions if a.option_strings]


def _plain(command: str, executor: str, dest: str) -> list[str]:
    """The command line without the option (with what it needs beside it)."""
    head = ["run", "--task", "t"] if command == "run" else [command, "t1"]
    where = {"local": [], "server": ["--server", SERVER], "fleet": ["--fleet", FLEET]}[executor]
    desk: list[str] = []
    if dest in RDP_OPTIONS and executor != "fleet":
        desk = ["--rdp", "rdp.example"]
    elif command == "run" and executor != "fleet" and dest not in ("vnc", "rdp"):
        desk = ["--vnc", VNC]
    return [*head, *where, *desk, *CONTEXT.get(dest, [])]


def _argv(command: str, executor: str, dest: str) -> list[str]:
    return [*_plain(command, executor, dest), *VALUES[dest]]


def _executor(kind: str) -> Any:
    if kind == "local":
        return LocalExecutor()
    if kind == "server":
        return ServedExecutor(SERVER)
    return FleetExecutor(FLEET)


def _given(args: argparse.Namespace, kind: str) -> dict[str, Any]:
    given = given_options(args)
    given.pop({"server": "server", "fleet": "fleet"}.get(kind, ""), None)
    return given


def _flag(dest: str) -> str:
    return VALUES[dest][0]


def _walk(command: str) -> list[Any]:
    cells = []
    for dest in _parser_options(command):
        if dest in NOT_SETTINGS:
            continue
        assert dest in VALUES, f"{command} --{dest}: give the walk a value for it"
        for kind in ("local", "server", "fleet"):
            cells.append(pytest.param(command, kind, dest, id=f"{command}-{kind}-{dest}"))
    return cells


@pytest.mark.parametrize(("command", "kind", "dest"), _walk("run"))
def test_every_option_of_run_is_honoured_or_refused(
    command: str, kind: str, dest: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = _argv(command, kind, dest)
    args = build_parser().parse_args(argv)
    executor = _executor(kind)
    given = _given(args, kind)
    line = executor.refuse(None, given, command) or executor.refuse(run_spec(args), given, command)
    if line is not None:
        assert _flag(dest) in line.replace("--video/--no-video", "--no-video"), line
        _refused_on_the_command_line(argv, _flag(dest))
        return
    if (kind, dest) in OUTSIDE_THE_SPEC:
        _honoured_outside_the_spec(kind, dest, args)
        return
    plain = build_parser().parse_args(_plain(command, kind, dest))
    assert run_spec(args).to_json() != run_spec(plain).to_json(), (
        f"{' '.join(argv)}: the option changes nothing the run acts with"
    )


def _honoured_outside_the_spec(kind: str, dest: str, args: argparse.Namespace) -> None:
    if dest == "label":
        assert FleetExecutor(FLEET, label=args.label).label == "gpu"
    elif dest == "view":
        assert args.view is True  # cli/desktop.py live_view_for_run serves it for this run
    elif dest == "vnc_password":
        from vnc_use.desktops.target import reach

        with reach(run_spec(args).desktop, password=args.vnc_password) as reached:
            assert reached.password == "pw"
    elif dest == "checkpointer":
        assert LocalExecutor(checkpointer=args.checkpointer).checkpointer == "other.sqlite"


def _refused_on_the_command_line(argv: list[str], flag: str) -> None:
    done = run_cli(argv, env={"VNC_USE_DATABASE_URL": "", "GOOGLE_API_KEY": ""}, timeout=60)
    assert done.returncode == 2, (argv, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0].replace("--video/--no-video", "--no-video"), lines


# -- resume, approve, deny -----------------------------------------------------------------


def _saved(tmp_path: Path) -> dict[str, Any]:
    """A recorded VNC run's settings (its run.json)."""
    spec = RunSpec(runs_dir=str(tmp_path / "runs"))
    spec = replace(spec, desktop=replace(spec.desktop, vnc_server=VNC))
    return spec.to_record()


LEG_OUTSIDE_THE_SPEC: dict[tuple[str, str], str] = {
    ("local", "vnc_password"): "the password reach() connects with",
    ("local", "checkpointer"): "the storage the local executor opens",
    ("fleet", "vnc"): "the desktop the run moves to",
    ("fleet", "max_cost"): "the run's cap in the fleet's runs table",
    ("server", "max_cost"): "the cap in the spec the server keeps for the thread",
    ("local", "answer"): "resume --answer is handback --note: the note the model is told",
    ("server", "answer"): "resume --answer is handback --note: the note the model is told",
    ("fleet", "answer"): "the fleet's handback refuses it in one line (local and served only)",
}


@pytest.mark.parametrize(
    ("command", "kind", "dest"), [*_walk("resume"), *_walk("approve"), *_walk("deny")]
)
def test_every_option_of_a_later_leg_is_honoured_or_refused(
    command: str, kind: str, dest: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = _argv(command, kind, dest)
    args = build_parser().parse_args(argv)
    executor = _executor(kind) if not (kind == "fleet" and dest == "vnc") else None
    given = _given(args, kind)
    line = executor.refuse(None, given, command) if executor is not None else None
    if line is not None:
        assert _flag(dest) in line.replace("--video/--no-video", "--no-video"), line
        _refused_on_the_command_line(argv, _flag(dest))
        return
    if (kind, dest) in LEG_OUTSIDE_THE_SPEC:
        if dest == "vnc":
            assert FleetExecutor(FLEET, desktop=args.vnc).desktop == "127.0.0.1::5998"
        elif dest == "max_cost":
            assert args.max_cost == 3.0  # resume passes it: executor.resume(max_cost=...)
        elif dest == "answer":
            assert args.answer == "yes"  # cli/run.py: executor.handback(note=args.answer)
        elif dest == "vnc_password":
            assert args.vnc_password == "pw"  # cli/run.py: reach(..., password=)
        else:
            assert LocalExecutor(checkpointer=args.checkpointer).checkpointer == "other.sqlite"
        return
    assert kind == "local", f"{' '.join(argv)}: honoured by no rule of the walk"
    saved = _saved(tmp_path)
    plain = build_parser().parse_args(_plain(command, kind, dest))
    changed = saved_run_spec(args, saved).to_json() != saved_run_spec(plain, saved).to_json()
    assert changed, f"{' '.join(argv)}: the option changes nothing the run acts with"
