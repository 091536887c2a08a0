"""The layering of docs/architecture.md holds: scripts/check_imports.py finds no import that
runs back up a layer and no circle between files."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "check_imports.py"


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_imports", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("check_imports", module)
    spec.loader.exec_module(module)
    return module


def test_the_package_imports_only_downwards_and_in_no_circle() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no arrow back up, no circle" in proc.stdout


def test_the_check_names_each_back_arrow_and_circle(tmp_path: Path) -> None:
    """The check itself on a made-up package: a back arrow (also lazy or typing-only), a
    circle, testing/ imported from the package, an import through a compat alias; a compat alias
    itself (a face at the top) and a downward arrow pass."""
    files = {
        "__init__.py": "",
        "errors.py": "",
        "agent/__init__.py": "",
        "agent/graph.py": "from vnc_use.desktops import vnc\n",
        "desktops/__init__.py": "",
        "desktops/vnc.py": "def f():\n    from vnc_use.agent.graph import x\n",
        "desktops/keys.py": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import base\n"
        ),
        "desktops/base.py": "from vnc_use.desktops.keys import KEYS\nfrom vnc_use import errors\n",
        "desktops/old.py": "# compat-alias: old path\nfrom vnc_use.agent.graph import x\n",
        "desktops/uses_old.py": "from vnc_use.desktops.old import x\n",
        "actions/__init__.py": "from vnc_use.testing import fake\n",
        "testing/__init__.py": "",
        "testing/fake.py": "from vnc_use.agent import graph\n",
    }
    for name, text in files.items():
        path = tmp_path / "vnc_use" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    problems = _checker().check(tmp_path)

    assert problems == [
        "back up: vnc_use.actions -> vnc_use.testing.fake  (only the tests import testing/)",
        "back up: vnc_use.desktops.uses_old -> vnc_use.desktops.old  (imports through a compat "
        "alias)",
        "back up: vnc_use.desktops.vnc -> vnc_use.agent.graph  (desktops imports agent, above it)",
        "circle: vnc_use.agent.graph -> vnc_use.desktops.vnc"
        "  (and back: vnc_use.desktops.vnc -> vnc_use.agent.graph)",
        "circle: vnc_use.desktops.base -> vnc_use.desktops.keys"
        "  (and back: vnc_use.desktops.keys -> vnc_use.desktops.base)",
        "circle: vnc_use.desktops.keys -> vnc_use.desktops.base"
        "  (and back: vnc_use.desktops.base -> vnc_use.desktops.keys)",
        "circle: vnc_use.desktops.vnc -> vnc_use.agent.graph"
        "  (and back: vnc_use.agent.graph -> vnc_use.desktops.vnc)",
    ]
