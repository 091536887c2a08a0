"""``run.json``: the one typed record of a run, written and read here alone.

Every host that starts a run writes its ``run.json`` through :func:`write` and changes it
through :func:`update`; every reader goes through :func:`read` (strict: a missing or broken
file is a :class:`~vnc_use.errors.ConfigError`) or :func:`load` (lenient: an empty record).
The record is the same whichever host wrote it; ``kind`` says which:

``local``
    a run of :class:`~vnc_use.agent.VncUseAgent` (``vnc-use run``, ``eval``, ``replay``, an
    MCP ``run_task``, Python);
``served``
    a run a LangGraph Server served (``vnc-use run --server``, ``eval --server``); also
    ``served: true``, as older readers look for;
``fleet``
    a leg of a fleet's run on one of its workers (``vnc-use run --fleet``);
``mcp-session``
    the MCP server's session of low-level tool calls (no model, no approvals).

Every kind has the same keys (:data:`vnc_use.runs.leg.RECORD_KEYS`, composed in one place:
:func:`vnc_use.runs.leg.run_record_of`); a value a run does not have is null.

The common fields are typed below; a planner's own settings (``tool_version``, ``dialect``,
``base_url``, ``api_version``, ...; see :meth:`Planner.run_settings`) and a served spec's fields
ride along as extra keys, as they always have, so ``planner_from_settings`` rebuilds a planner
from :meth:`RunRecord.settings`. Older folders' files read as they are: a file without
``kind`` is ``served`` when it says ``served: true``, else ``local``.

Nothing secret is written: the run folder redacts every value under a secret-looking key and
every known secret value, and the storage location keeps its password as ``***``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from vnc_use.errors import ConfigError
from vnc_use.record.folder import RunFolder, json_default

__all__ = ["FILE_NAME", "KINDS", "RunKind", "RunRecord", "load", "read", "update", "write"]

FILE_NAME = "run.json"

RunKind = Literal["local", "served", "fleet", "mcp-session"]
KINDS: tuple[RunKind, ...] = ("local", "served", "fleet", "mcp-session")

Number = int | float


class RunRecord(BaseModel):
    """What ``run.json`` holds. Unknown keys (a planner's settings) are kept as they are."""

    model_config = ConfigDict(extra="allow")

    kind: RunKind = "local"
    thread_id: str | None = None
    task: str = ""
    started: Number | None = None
    status: str | None = None
    reason: str | None = None
    # the desktop: a VNC address (or an RDP server's label), or a given desktop's class name
    vnc_server: str | None = None
    desktop: str | None = None
    rdp: dict[str, Any] | None = None
    vnc_username: str | None = None
    vnc_ca: str | None = None
    connect_timeout: Number | None = None
    security: dict[str, Any] | None = None
    screen_region: str | None = None
    local_desktop_dir: str | None = None
    """The state folder of the managed local desktop the run acts on (its password is there)."""
    # the model and the run's budgets and behaviour
    provider: str | None = None
    model: str | None = None
    keep_screenshots: int | None = None
    confirm_actions: list[str] | None = None
    step_limit: int | None = None
    seconds_timeout: Number | None = None
    hitl_mode: bool | None = None
    include_initial_screenshot: bool | None = None
    sensitive_names: list[str] | None = None
    stall_after: int | None = None
    max_cost: Number | None = None
    price: list[Number] | None = None
    video: bool | None = None
    """Whether the run records video.mp4 (its approve/deny/resume legs keep it)."""
    video_fps: Number | None = None
    """``[INPUT, OUTPUT]`` USD per million tokens given with ``--price`` (else the table's)."""
    cost_usd: Number | None = None
    """What the run's model calls cost (None: unknown: no price for its model)."""
    human: dict[str, Any] | None = None
    """While the run is ``awaiting_human``: who asked for a person (``asked_by``: ``model`` or
    ``person``), the model's ``question``, who holds the desktop (``holder``) and ``since``."""
    checkpointer: str | None = None
    replay: dict[str, Any] | None = None
    served: bool | None = None

    @classmethod
    def from_json(cls, data: Any) -> RunRecord:
        """A record from a parsed ``run.json`` of any age (a ``ConfigError`` if it is not one)."""
        if not isinstance(data, dict):
            raise ConfigError("run.json does not hold a JSON object")
        # as the file will hold them: paths and other objects as text, tuples as lists
        return cls._validated(json.loads(json.dumps(data, default=json_default)))

    @classmethod
    def _validated(cls, fields: dict[str, Any]) -> RunRecord:
        """A record from the fields of a ``run.json`` (JSON values only)."""
        if "kind" not in fields:
            fields["kind"] = "served" if fields.get("served") is True else "local"
        try:
            return cls.model_validate(fields)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ConfigError(f"run.json: {where}: {first['msg']}") from None

    def settings(self) -> dict[str, Any]:
        """The record as the plain dict it was written as (what ``planner_from_settings``,
        the report and the MCP tools read): only the keys the file holds, plus ``kind``."""
        data = self.model_dump(exclude_unset=True)
        data["kind"] = self.kind
        return data

    @property
    def is_mcp_session(self) -> bool:
        """The MCP server's tool session (it has no model and no approvals)."""
        return self.kind == "mcp-session"


def path_of(run_dir: str | Path) -> Path:
    """Where a run folder's record lives."""
    return Path(run_dir) / FILE_NAME


def read(run_dir: str | Path) -> RunRecord:
    """The record of the run folder ``run_dir``; a one-line ``ConfigError`` when it has none
    or the file is not a record."""
    path = path_of(run_dir)
    try:
        text = path.read_text("utf-8")
    except OSError:
        raise ConfigError(f"no run in {Path(run_dir).parent} (looked for {path})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError("run.json does not hold a JSON object")
    return RunRecord._validated(data)  # parsed JSON already: no round trip (10,000 runs list)


def load(run_dir: str | Path) -> RunRecord | None:
    """The record of ``run_dir``, or None when it has none that reads (for listings and
    reports, which show what there is)."""
    try:
        return read(run_dir)
    except ConfigError:
        return None


def write(folder: RunFolder, record: RunRecord) -> Path:
    """Write ``record`` as the run folder's ``run.json`` (redacted like all the folder holds)."""
    return folder.write_json(FILE_NAME, record.settings())


def update(folder: RunFolder, **fields: Any) -> Path:
    """Set ``fields`` in the run folder's record (a new ``local`` record when it has none)."""
    record = load(folder.path) or RunRecord()
    data = {**record.settings(), **fields}
    return write(folder, RunRecord.from_json(data))
