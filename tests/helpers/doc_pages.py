"""The user documentation as the tests read it: the front page (README.md) and the MkDocs pages
under docs/ (mkdocs.yml's nav). Tests that run a command "as the docs show it" take it from
here, so a command moved between pages stays tested."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path


def _root() -> Path:
    """The repository: the first folder above this file that holds mkdocs.yml (found by
    walking up, so this helper may live in any folder of tests/)."""
    here = Path(__file__).resolve()
    for folder in here.parents:
        if (folder / "mkdocs.yml").is_file():
            return folder
    raise AssertionError(f"no mkdocs.yml above {here}")


ROOT = _root()
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def all_pages() -> list[Path]:
    """README.md, then every page under docs/ in path order."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def page(name: str) -> str:
    """The text of one page: ``"README.md"`` or a path under docs/, e.g. ``"eval.md"``."""
    path = README if name == "README.md" else DOCS / name
    return path.read_text("utf-8")


def all_lines() -> list[str]:
    """Every line of every page (README.md first)."""
    return [line for path in all_pages() for line in path.read_text("utf-8").splitlines()]


def section(text: str, heading: str) -> str:
    """From the Markdown heading line ``heading`` (e.g. ``"## OpenAI"``) to the next heading of
    the same or a higher level (or the end of the page)."""
    level = len(heading) - len(heading.lstrip("#"))
    start = text.split(f"\n{heading}\n", 1)[1]
    end = re.search(rf"^#{{1,{level}}} ", start, re.M)
    return start[: end.start()] if end else start


def blocks(text: str, *langs: str) -> list[str]:
    """The bodies of the fenced blocks of ``text`` in one of ``langs`` (e.g. ``"sh"``), a block
    indented under a list item dedented."""
    found = re.findall(r"^([ \t]*)```(\w*)\n(.*?)^\1```", text, re.S | re.M)
    return [textwrap.dedent(body) for _, lang, body in found if lang in langs]


def shell_commands(text: str) -> list[str]:
    """The commands of ``text``'s ```bash and ```sh blocks, one per line: a trailing ``\\``
    joins the next line, a `` # `` comment is cut, ``export`` lines are left out."""
    found = []
    for body in blocks(text, "bash", "sh"):
        for line in re.sub(r"\\\n\s*", " ", body).splitlines():
            command = " ".join(re.split(r"\s#\s", line, maxsplit=1)[0].split())
            if command and not command.startswith("export "):
                found.append(command)
    return found
