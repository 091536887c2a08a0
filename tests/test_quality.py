"""Lint, format and type checks are part of the test suite, so CI cannot land unchecked code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "argv",
    [
        ["ruff", "check", "src", "tests", "benchmarks"],
        ["ruff", "format", "--check", "src", "tests", "benchmarks"],
        ["mypy"],
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_static_checks(argv: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("package", ["vncdotool", "twisted"])
def test_vnc_libraries_are_imported_in_one_module_only(package: str) -> None:
    """Only the VNC desktop talks to vncdotool and Twisted; the graph, the executor and every
    other desktop stay free of them (see tests/test_fake_desktop.py for the runtime check)."""
    users = [
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "src").rglob("*.py")
        if any(
            line.lstrip().startswith((f"import {package}", f"from {package}"))
            for line in p.read_text("utf-8").splitlines()
        )
    ]
    assert users == ["src/vnc_use/desktops/vnc.py"]


def test_only_the_cli_prints() -> None:
    offenders = [
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "src").rglob("*.py")
        if p.parent.name != "cli"
        and p.parent.name != "testing"
        and any(line.lstrip().startswith("print(") for line in p.read_text("utf-8").splitlines())
    ]
    assert offenders == []


def test_only_the_config_module_reads_the_environment() -> None:
    """Settings from the environment are read in one place (``vnc_use.config``) and handed on.

    The testing kit is exempt: it starts servers and children of its own.
    """
    readers = [
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "src" / "vnc_use").rglob("*.py")
        if p.parent.name != "testing"
        and any(word in p.read_text("utf-8") for word in ("os.environ", "os.getenv", "getenv("))
    ]
    assert readers == ["src/vnc_use/config.py"]
