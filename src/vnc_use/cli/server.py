"""``--server URL``: the option, and ``vnc-use runs --server URL``.

``vnc-use run --server URL ...`` and ``approve`` / ``deny`` / ``resume --server URL THREAD``
go through :class:`~vnc_use.runs.executor.ServedExecutor` (:mod:`vnc_use.cli.run`): a thread
and a run on the server (the run spec as the run's ``context``, the task as its input), its
events followed on the custom stream. ``runs --server URL`` lists the server's threads, those
awaiting approval first. Secrets never travel: the VNC password stays in an environment
variable of the server, named by ``--vnc-password-env``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from vnc_use.cli.common import EXIT_DONE
from vnc_use.cli.options import add_password_envs
from vnc_use.runs.remote import GRAPH_ID
from vnc_use.runs.remote import client as _client
from vnc_use.runs.remote import reaching as _reaching
from vnc_use.status import RunStatus

__all__ = ["GRAPH_ID", "add_server_options", "runs_command"]


def add_server_options(p: argparse.ArgumentParser, *, run: bool = False) -> None:
    """``--server URL`` (and for ``run``, ``--vnc-password-env NAME``)."""
    p.add_argument(
        "--server",
        default=None,
        metavar="URL",
        help="a LangGraph Server serving vnc-use (langgraph dev / langgraph up), e.g. "
        "http://127.0.0.1:2024: the run happens there",
    )
    if run:  # the variables of the server that hold the passwords (never the passwords)
        add_password_envs(p)


def runs_command(args: argparse.Namespace) -> int:
    """``vnc-use runs --server URL``: the server's threads, awaiting approval first."""
    client = _client(args.server)
    with _reaching(args.server):
        threads = client.threads.search(limit=args.limit or 100)
    rows = sorted((_row(t) for t in threads), key=lambda r: r["updated"], reverse=True)
    rows.sort(key=lambda r: r["status"] != RunStatus.AWAITING_APPROVAL)  # stable: newest first
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return EXIT_DONE
    if not rows:
        print(f"no runs on {args.server}")
        return EXIT_DONE
    print(f"{'THREAD':<36}  {'STATUS':<17}  {'WAITING ON':<14}  TASK")
    for r in rows:
        print(f"{r['thread_id']:<36}  {r['status']:<17}  {r['waiting_on']:<14}  {r['task'][:60]}")
    return EXIT_DONE


def _row(thread: dict[str, Any]) -> dict[str, Any]:
    """One thread as ``runs --server`` shows it."""
    values = thread.get("values") or {}
    waiting = [i for found in (thread.get("interrupts") or {}).values() for i in found]
    status = str(values.get("status") or thread.get("status") or "")
    if thread.get("status") == "interrupted" and waiting:
        status = RunStatus.AWAITING_APPROVAL.value
    elif thread.get("status") == "error":
        status = RunStatus.ERROR.value
    elif thread.get("status") == "busy":
        status = RunStatus.RUNNING.value
    return {
        "thread_id": str(thread["thread_id"]),
        "status": status,
        "waiting_on": str(waiting[0]["value"].get("name", "")) if waiting else "",
        "task": " ".join(str(values.get("task") or thread["metadata"].get("task", "")).split()),
        "steps": values.get("step", 0),
        "updated": str(thread.get("updated_at") or ""),
    }
