"""Opening a run: what :class:`~vnc_use.runs.agent.VncUseAgent` and the served graph factory
(:mod:`vnc_use.runs.serve`) both do before a run acts, done one way.

From a :class:`~vnc_use.runs.spec.RunSpec`: the planner (checked ready before any desktop
starts), the sensitive values, the storage (checkpoints, journal, leases), the run folder with
its listeners (the custom stream, the report at every pause and end), and the desktop
(:func:`~vnc_use.desktops.target.reach`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vnc_use import config
from vnc_use.errors import ConfigError
from vnc_use.runs.spec import RunSpec

if TYPE_CHECKING:  # LangGraph loads when a run's storage or folder opens, not for its planner
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from vnc_use.providers.base import Planner
    from vnc_use.record.folder import FolderStore, RunFolder
    from vnc_use.store.storage import Storage

__all__ = [
    "check_writable",
    "open_planner",
    "open_run_storage",
    "run_folder",
    "sensitive_values",
]


def open_planner(spec: RunSpec, given: Planner | None = None, *, ready: bool = False) -> Planner:
    """The run's planner: the one given, else the one the spec names; with ``ready``, its
    readiness check (an API key, say) runs now, before any desktop starts."""
    planner = given or spec.planner()
    if ready:
        planner.check_ready()
    return planner


MISSING_HERE = "--sensitive {name}: set the environment variable {variable} first"
MISSING_ON_SERVER = "sensitive name {name}: set {variable} in the server's environment"


def sensitive_values(names: Iterable[str], *, missing: str = MISSING_HERE) -> dict[str, str]:
    """The sensitive values the spec names, each read from ``VNC_USE_SECRET_<NAME>``; a
    missing one fails with one line (``missing``, formatted with its name and variable)."""
    values = {}
    for name in names:
        variable, value = config.sensitive_value(name)
        if not value:
            raise ConfigError(missing.format(name=name, variable=variable))
        values[name] = value
    return values


def open_run_storage(
    checkpointer: BaseCheckpointSaver[Any] | str | Path | None, runs_dir: Path
) -> Storage:
    """Checkpoints, journal and leases: around a checkpointer given, else at a
    ``postgresql://`` URL or SQLite file, else in the runs folder's SQLite file."""
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from vnc_use.store.storage import open_storage, storage_for_checkpointer

    if isinstance(checkpointer, BaseCheckpointSaver):  # e.g. a PostgresSaver of your own
        return storage_for_checkpointer(checkpointer, runs_dir)
    return open_storage(checkpointer, runs_dir)


def run_folder(
    runs_dir: Path,
    thread_id: str,
    secrets: Iterable[str | None],
    on_event: Callable[[dict[str, Any]], None] | None = None,
    store: FolderStore | None = None,
) -> RunFolder:
    """The run's folder, redacting ``secrets``, its events sent to ``on_event``, to the
    custom stream (clients of ``graph.stream(..., "custom")``) and to the report (written at
    every pause and end); what it writes also goes to ``store`` (a fleet's database)."""
    from vnc_use.agent.stream import to_custom_stream
    from vnc_use.record.folder import RunFolder
    from vnc_use.record.report import ReportOnRunEnd

    folder = RunFolder(runs_dir, thread_id, secrets=list(secrets), store=store)
    if on_event is not None:
        folder.add_listener(on_event)
    folder.add_listener(to_custom_stream)
    folder.add_listener(ReportOnRunEnd(folder))
    return folder


def check_writable(runs_dir: Path) -> None:
    """Create the runs folder and prove it writable, or say which folder to choose."""
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
        # a name of its own: agents in several threads of one process (vnc-use eval) check the
        # same folder at once
        with tempfile.NamedTemporaryFile(dir=runs_dir, prefix=".write-test-"):
            pass
    except OSError as exc:
        raise ConfigError(
            f"cannot write the runs folder {runs_dir} ({exc.strerror or exc}); "
            "choose a writable one (--runs-dir / runs_dir=)"
        ) from None
