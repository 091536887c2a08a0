#!/usr/bin/env python3
"""Check the import graph of ``src/vnc_use``: every layer imports only the layers below it,
and no two files import each other in a circle.

Run it from anywhere: ``python scripts/check_imports.py`` (exit 0 when the graph is clean,
1 with one line per offending arrow otherwise). The test suite runs it
(``tests/test_import_graph.py``). It reads the files with :mod:`ast` and imports nothing.

The layers, top to bottom (docs/architecture.md explains each)::

    front doors   cli/ console/ mcp_server/ evaluation/ calibration/ fleet/
                  vnc_use/__init__.py (face)
    runs/         what a run is, opening a run, the served graph factory
    agent/        the graph and its nodes
    replay/       a planner that replays a journal
    providers/    one package per vendor, the model history, a plain registry
    record/       the run folder and run.json, the report
    store/        journal, checkpoints, leases (SQLite / PostgreSQL)
    actions/      the action vocabulary on the 0-999 grid
    desktops/     VNC client, local desktops, RDP bridge, process helpers
    base          config.py  errors.py  setting.py  status.py  version.py

This is the order of DESIGN.md ("The house"), which the code now keeps without exception.
Three places it does not name are decided here: ``calibration/`` (``vnc-use calibrate``) is a
front door beside ``evaluation/``; the package root ``vnc_use/__init__.py`` is the public face,
a front door too (it loads ``VncUseAgent`` lazily), so no module below may import from it;
``version.py`` (``__version__``) joins the base, so the report and the CLI name the version
without importing the root.

``testing/`` (the vendors' stand-ins, test desktops and services) may import any layer, and
no module outside ``testing/`` may import it: only the tests do.

Two rules, each violation printed as one arrow ``importer -> imported``. Every import
counts for both: one at the top of a file, one inside a function (a lazy import is still a
dependency, it only runs later) and one under ``if TYPE_CHECKING:`` (a type is a dependency
too: it couples the two files for a reader and for mypy).

(a) **No arrow back up**: a module never imports a module of a higher layer. Modules in the
    same layer may import each other. A module whose first line is
    ``# compat-alias: <reason>`` and whose body only re-exports (a docstring, imports,
    ``__all__``, a ``__getattr__`` that imports lazily) keeps an old public import path
    working for users: it is not exempt, it is a *face* at the top, whatever folder it is in,
    and so (c) **nothing inside the package imports through a compat alias** (only users and
    the tests do): every module imports from where a name lives.
(b) **No circle between files**: the imports form no cycle, within a layer too. An import of
    a submodule does not count as an import of its parent package's ``__init__`` (Python runs
    that ``__init__`` first, but it is the package's face, not the importer's dependency).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "vnc_use"

# Top first. A module's layer is named by its first component under vnc_use.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "front doors",
        (
            "cli",
            "console",
            "mcp_server",
            "evaluation",
            "calibration",
            "fleet",
            "__init__",
            "__main__",
        ),
    ),
    ("runs", ("runs",)),
    ("agent", ("agent",)),
    ("replay", ("replay",)),
    ("providers", ("providers",)),
    ("record", ("record",)),
    ("store", ("store",)),
    ("actions", ("actions",)),
    ("desktops", ("desktops",)),
    ("base", ("config", "errors", "setting", "status", "version")),
]
TESTING = "testing"
COMPAT_MARK = "# compat-alias:"


@dataclass(frozen=True)
class Arrow:
    importer: str
    imported: str
    line: int


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> tuple[int, str]:
    """(rank, name): rank 0 is the top layer; testing/ ranks above everything."""
    parts = module.split(".")
    head = parts[1] if len(parts) > 1 else "__init__"
    if head == TESTING:
        return -1, TESTING
    for rank, (name, heads) in enumerate(LAYERS):
        if head in heads:
            return rank, name
    raise SystemExit(f"check_imports: {module} is in no layer: add {head!r} to LAYERS")


def _resolve(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(path: Path, importer: str, modules: set[str]) -> Iterator[Arrow]:
    tree = ast.parse(path.read_text("utf-8"), str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, importer, is_package)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.append(sub if sub in modules else base)
        for target in targets:
            # `import vnc_use.a.b.c` where c is a name: fall back to the longest module prefix.
            while target and target not in modules and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in modules and target != importer:
                yield Arrow(importer, target, node.lineno)


def is_compat_alias(path: Path) -> bool:
    text = path.read_text("utf-8")
    if not text.startswith(COMPAT_MARK):
        return False
    for node in ast.parse(text).body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.If | ast.FunctionDef) and _lazy_reexport(node):
            continue  # `if TYPE_CHECKING:` imports, a `__getattr__` that imports on use
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == [
            "__all__"
        ]:
            continue
        return False
    return True


def _lazy_reexport(node: ast.If | ast.FunctionDef) -> bool:
    """An ``if TYPE_CHECKING:`` block of imports, or a module ``__getattr__`` whose body only
    imports, returns and raises ``AttributeError``."""
    if isinstance(node, ast.If):
        return all(isinstance(n, ast.Import | ast.ImportFrom) for n in node.body)
    if node.name != "__getattr__":
        return False
    allowed = (ast.Import, ast.ImportFrom, ast.Return, ast.Raise, ast.If, ast.Expr)
    body = [n for n in ast.walk(node) if isinstance(n, ast.stmt) and n is not node]
    return all(isinstance(n, allowed) for n in body)


def collect(src: Path) -> tuple[list[Arrow], set[str]]:
    files = {module_name(p, src): p for p in sorted((src / PACKAGE).rglob("*.py"))}
    modules = set(files)
    arrows: list[Arrow] = []
    for name, path in files.items():
        arrows.extend(imports_of(path, name, modules))
    exempt = {name for name, path in files.items() if is_compat_alias(path)}
    return arrows, exempt


def back_arrows(arrows: list[Arrow], faces: set[str]) -> list[str]:
    """Arrows up a layer; a compat alias (``faces``) ranks at the top and may not be imported
    from inside the package."""

    def rank(module: str) -> tuple[int, str]:
        return (0, "compat alias") if module in faces else layer_of(module)

    found: set[str] = set()
    for a in arrows:
        (rank_from, name_from), (rank_to, name_to) = rank(a.importer), rank(a.imported)
        if a.imported in faces and rank_from != -1:
            found.add(f"{a.importer} -> {a.imported}  (imports through a compat alias)")
            continue
        if rank_to == -1 and rank_from != -1:
            found.add(f"{a.importer} -> {a.imported}  (only the tests import testing/)")
        elif rank_from != -1 and rank_to < rank_from:
            found.add(f"{a.importer} -> {a.imported}  ({name_from} imports {name_to}, above it)")
    return sorted(found)


def _path(graph: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    """The shortest chain of imports from ``start`` to ``goal`` (breadth first), or None."""
    came_from: dict[str, str] = {start: start}
    queue = [start]
    for node in queue:
        if node == goal:
            chain = [node]
            while chain[-1] != start:
                chain.append(came_from[chain[-1]])
            return chain[::-1]
        for child in sorted(graph.get(node, ())):
            if child not in came_from:
                came_from[child] = node
                queue.append(child)
    return None


def circles(arrows: list[Arrow]) -> list[str]:
    """Every arrow that lies on a cycle, with the way back that closes it."""
    graph: dict[str, set[str]] = {}
    for a in arrows:
        graph.setdefault(a.importer, set()).add(a.imported)
    lines = []
    for importer in sorted(graph):
        for imported in sorted(graph[importer]):
            back = _path(graph, imported, importer)
            if back:
                lines.append(f"{importer} -> {imported}  (and back: {' -> '.join(back)})")
    return lines


def check(src: Path = ROOT / "src") -> list[str]:
    """Every offending arrow, one line each; empty when the graph is clean."""
    arrows, exempt = collect(src)
    return [f"back up: {line}" for line in back_arrows(arrows, exempt)] + [
        f"circle: {line}" for line in circles(arrows)
    ]


def main() -> int:
    problems = check()
    for line in problems:
        print(line)
    if problems:
        print(f"{len(problems)} import arrow(s) break the layering (see scripts/check_imports.py)")
        return 1
    print("import graph: no arrow back up, no circle between files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
