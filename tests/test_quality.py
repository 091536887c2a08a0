"""Lint, format and type checks are part of the test suite, so CI cannot land unchecked code."""

from __future__ import annotations

import ast
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
def test_vnc_libraries_are_imported_in_one_package_only(package: str) -> None:
    """Only the VNC desktop (the package desktops/vnc/) talks to vncdotool and Twisted; the
    graph, the executor and every other desktop stay free of them (see
    tests/testing/test_fake_desktop.py for the runtime check)."""
    users = [
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "src").rglob("*.py")
        if any(
            line.lstrip().startswith((f"import {package}", f"from {package}"))
            for line in p.read_text("utf-8").splitlines()
        )
    ]
    assert users and all(u.startswith("src/vnc_use/desktops/vnc/") for u in users), users


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


def _imported_modules(path: Path) -> set[str]:
    """The modules a source file imports (``import a.b`` and ``from a.b import c``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_only_the_gemini_provider_imports_google_genai() -> None:
    """The model boundary: google.genai stays under providers/gemini/ (and the stand-in)."""
    users = sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "src").rglob("*.py")
        if any(m == "google.genai" or m.startswith("google.genai.") for m in _imported_modules(p))
    )
    allowed = ("src/vnc_use/providers/gemini/", "src/vnc_use/testing/gemini_standin.py")
    assert users and all(u.startswith(allowed) for u in users), users


def test_only_the_anthropic_planner_imports_anthropic() -> None:
    """The anthropic SDK is imported in one place: providers/anthropic/planner.py."""
    users = sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "src").rglob("*.py")
        if any(m == "anthropic" or m.startswith("anthropic.") for m in _imported_modules(p))
    )
    assert users == ["src/vnc_use/providers/anthropic/planner.py"]


def test_the_graph_does_not_load_the_model_sdk() -> None:
    code = (
        "import sys\n"
        "import vnc_use.agent.graph, vnc_use.providers.history, vnc_use.providers.base\n"
        "print(sorted(m for m in sys.modules if m == 'google' or m.startswith('google.')))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_only_the_postgres_module_imports_psycopg() -> None:
    """PostgreSQL (checkpoints, journal, leases) is reached through one module."""
    users = sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "src").rglob("*.py")
        if any(
            m == "psycopg" or m.startswith(("psycopg.", "psycopg_pool"))
            for m in _imported_modules(p)
        )
    )
    assert users == ["src/vnc_use/store/postgres.py"]
