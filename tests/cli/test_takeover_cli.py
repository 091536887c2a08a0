"""``vnc-use takeover`` / ``handback`` refusals: one line, exit 2, nothing started."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_tools import run_cli


@pytest.mark.parametrize(
    ("where", "said", "code"),
    [
        (["--server", "http://127.0.0.1:9"], "cannot reach the server", 2),
        # a fleet run is taken over through the fleet's database (as approve --fleet reaches it)
        (["--fleet", "postgresql://ann@127.0.0.1:1/f"], "cannot connect", 1),
    ],
)
def test_an_unreachable_server_or_fleet_is_one_line(
    where: list[str], said: str, code: int, tmp_path: Path
) -> None:
    for verb in (["takeover", "r1"], ["handback", "r1", "--note", "done"]):
        proc = run_cli([*verb, *where], cwd=tmp_path)
        assert proc.returncode == code, proc.stdout + proc.stderr
        assert proc.stderr.count("\n") == 1 and said in proc.stderr, proc.stderr


def test_an_unknown_run_is_one_line(tmp_path: Path) -> None:
    for verb in (["takeover", "nope"], ["handback", "nope"], ["view", "--interactive", "nope"]):
        proc = run_cli([*verb, "--runs-dir", str(tmp_path)])
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr.count("\n") == 1 and "nope" in proc.stderr, proc.stderr
