"""The task file of ``vnc-use eval``: YAML (a list of tasks) or JSONL (one task a line).

>>> tasks = load_tasks("tasks.yaml")      # doctest: +SKIP
>>> tasks[0].id, tasks[0].check           # doctest: +SKIP

Each task::

    - id: save-note                      # unique: letters, digits, '.', '_', '-'
      task: "Write the word 'ready' into ~/note.txt"
      setup: ["rm -f ~/note.txt"]        # optional shell commands, run before the agent
      check: "grep -qx ready ~/note.txt" # a shell command: exit status 0 means success
      step_limit: 15                     # optional; default from the command line
      timeout: 120                       # optional seconds for the agent's run

A bad file is refused with one line that names the entry and the field
(:class:`~vnc_use.errors.ConfigError`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from vnc_use.errors import ConfigError

__all__ = ["SUITES", "Task", "TaskFile", "load_tasks", "suite_path"]

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

#: Suites shipped with the package (``vnc-use eval --suite NAME``).
SUITES = ("builtin",)


class Task(BaseModel):
    """One entry of a task file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    task: str = Field(min_length=1)
    setup: list[str] = Field(default_factory=list)
    check: str = Field(min_length=1)
    step_limit: int | None = Field(default=None, ge=1, le=1000)
    timeout: float | None = Field(default=None, gt=0, le=86400)
    #: Seconds each setup command and the check may take (default 60).
    command_timeout: float = Field(default=60.0, gt=0, le=3600)

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not _ID_RE.match(value):
            raise ValueError("use 1-64 letters, digits, '.', '_' or '-' (a file-name-safe id)")
        return value

    @field_validator("setup", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class TaskFile(BaseModel):
    """A loaded task file: its tasks and the folder they came from."""

    path: Path
    tasks: list[Task]

    @property
    def folder(self) -> Path:
        """The task file's folder (setup and check see it as ``$EVAL_SUITE_DIR``)."""
        return self.path.parent


def suite_path(name: str) -> Path:
    """The task file of a built-in suite."""
    if name not in SUITES:
        raise ConfigError(f"unknown suite {name!r}; the built-in suites are: {', '.join(SUITES)}")
    return Path(__file__).parent / "suites" / name / "tasks.yaml"


def _entries(path: Path) -> list[Any]:
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the task file {path} ({exc.strerror or exc})") from None
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        entries = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                entries.append(json.loads(line))
            except ValueError as exc:
                raise ConfigError(f"{path}: line {number} is not JSON ({exc})") from None
        return entries
    try:
        import yaml
    except ImportError:
        raise ConfigError(
            f"{path}: YAML task files need PyYAML: pip install 'vnc-use[eval]' (or use JSONL)"
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}" if where is not None else ""
        raise ConfigError(f"{path}: not valid YAML{at}; fix the file's syntax") from None
    if data is None:
        return []
    if not isinstance(data, list):
        raise ConfigError(f"{path}: the file must be a list of tasks ('- id: ...' entries)")
    return data


def _one_line(path: Path, number: int, entry: Any, exc: ValidationError) -> str:
    error = exc.errors()[0]
    field = ".".join(str(p) for p in error["loc"]) or "(the entry)"
    name = entry.get("id") if isinstance(entry, dict) else None
    which = f"entry {number}" + (f" (id {name!r})" if isinstance(name, str) else "")
    message = ": " + error["msg"][:1].lower() + error["msg"][1:]
    if error["type"] == "value_error":
        message = f": {error.get('ctx', {}).get('error', error['msg'])}"
    elif error["type"] == "missing":
        message = " is required"
    elif error["type"] == "extra_forbidden":
        message = " is not a task field (known: " + ", ".join(Task.model_fields) + ")"
    return f"{path}: {which}: field {field!r}{message}"


def load_tasks(path: str | Path, only: Sequence[str] | None = None) -> TaskFile:
    """Read and check a task file; ``only`` keeps the tasks with those ids (in file order)."""
    path = Path(path)
    tasks: list[Task] = []
    seen: set[str] = set()
    for number, entry in enumerate(_entries(path), 1):
        if not isinstance(entry, dict):
            raise ConfigError(f"{path}: entry {number} is not a mapping of task fields")
        try:
            task = Task.model_validate(entry)
        except ValidationError as exc:
            raise ConfigError(_one_line(path, number, entry, exc)) from None
        if task.id in seen:
            raise ConfigError(f"{path}: entry {number}: field 'id' {task.id!r} is used twice")
        seen.add(task.id)
        tasks.append(task)
    if not tasks:
        raise ConfigError(f"{path}: no tasks in the file")
    if only:
        unknown = [i for i in only if i not in seen]
        if unknown:
            raise ConfigError(f"--only {unknown[0]}: no task with that id in {path}")
        tasks = [t for t in tasks if t.id in only]
    return TaskFile(path=path.resolve(), tasks=tasks)
