"""The process helpers shared by the kept local desktop and the kept RDP bridge
(vnc_use.desktops.processes): stop a kept session whole and reap it, never touch a process
that is not the recorded one, write state privately and atomically."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from vnc_use.desktops.processes import (
    ProcessRecord,
    boot_id,
    keep_child,
    process_start_time,
    session_members,
    stop_session,
    write_private,
)

# A session leader that starts a helper of its own (as a browser does), both sleeping.
_LEADER = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); print('up', flush=True); time.sleep(120)"  # noqa: E501


def _start_kept() -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _LEADER], stdout=subprocess.PIPE, start_new_session=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"up\n"
    return proc


def test_stop_session_stops_the_helpers_too_and_reaps_the_leader() -> None:
    proc = _start_kept()
    try:
        start = process_start_time(proc.pid)
        assert start is not None
        members = session_members(proc.pid)
        assert len(members) == 2  # the leader and its helper
        keep_child(proc)
        record = ProcessRecord("leader", proc.pid, start, [sys.executable])

        assert stop_session(record, boot_id(), timeout=5.0) is True

        assert session_members(proc.pid) == {}
        assert proc.returncode is not None  # reaped: collected by the helper, no zombie
        assert not Path(f"/proc/{proc.pid}").exists()
        assert stop_session(record, boot_id()) is False  # stopped already: nothing to do
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()


def test_a_record_that_is_not_the_running_process_is_left_alone() -> None:
    proc = _start_kept()
    try:
        start = process_start_time(proc.pid)
        assert start is not None
        recycled = ProcessRecord("leader", proc.pid, start + 1)
        other_boot = ProcessRecord("leader", proc.pid, start)
        assert stop_session(recycled, boot_id()) is False
        assert stop_session(other_boot, "another-boot") is False
        assert proc.poll() is None and len(session_members(proc.pid)) == 2
    finally:
        for pid, member_start in session_members(proc.pid).items():
            if process_start_time(pid) == member_start:
                os.kill(pid, 9)
        proc.wait()


def test_write_private_replaces_the_file_whole_with_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text('{"old": true}')
    path.chmod(0o644)
    with path.open() as reader:  # a reader of the old file keeps reading the old file
        write_private(path, '{"new": true}')
        assert reader.read() == '{"old": true}'
    assert path.read_text() == '{"new": true}'
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temporary file left
