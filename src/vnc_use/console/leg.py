"""One leg of a run the console started or continued, in a process of its own.

``python -m vnc_use.console.leg`` reads one order as JSON on stdin::

    {"verb": "start", "thread_id": "...", "task": "...", "spec": {...RunSpec JSON...}}
    {"verb": "approve" | "deny", "thread_id": "...", "runs_dir": "...", "reason": "..."}
    {"verb": "resume", "thread_id": "...", "runs_dir": "..."}
    {"verb": "handback", "thread_id": "...", "runs_dir": "...", "person": "...", "note": "..."}

and carries it out through the run's executor
(:class:`~vnc_use.runs.executor.LocalExecutor`; an order that names ``"fleet": URL`` through
the :class:`~vnc_use.fleet.executor.FleetExecutor`, one that names ``"server": URL`` through
the :class:`~vnc_use.runs.executor.ServedExecutor`, which follows the server's run), as
``vnc-use run`` / ``approve`` / ``deny`` / ``resume`` / ``handback`` do, in its own session: the
run goes on (or pauses, checkpointed) whether or not the console that started it is still
there. SIGINT or SIGTERM stops it at the next step boundary (``interrupted``, resumable), as
Ctrl-C does ``vnc-use run`` (a served run is stopped by the console through the served
executor: the server's cancel). The model's key and the desktop's password are read from the
environment this process inherited (a served run's: the server's); the order holds none (a
hand-back's note, which goes to the model, is in it).

Exit codes: 0 the leg ran (its outcome is in the run folder's events), 2 the order could not
be carried out (one line on stderr, which the console shows).
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from vnc_use import config
from vnc_use.errors import ConfigError, VncUseError

__all__ = ["main"]


def _spec(order: dict[str, Any]) -> Any:
    """The leg's spec: the order's (a new run), else the one the run keeps (its run.json)."""
    from vnc_use.record import run_record
    from vnc_use.runs.spec import RunSpec

    if order["verb"] == "start":
        spec = RunSpec.from_json(order["spec"])
    else:
        runs_dir = Path(order["runs_dir"])
        spec = RunSpec.from_run_json(run_record.read(runs_dir / order["thread_id"]).settings())
        spec.runs_dir = str(runs_dir)
    spec.check()
    return spec


def _on_fleet(order: dict[str, Any]) -> None:
    """The leg of a fleet's run: the fleet's executor queues it for a worker and follows it."""
    from vnc_use.fleet.executor import FleetExecutor
    from vnc_use.runs.spec import RunSpec

    executor = FleetExecutor(str(order["fleet"]), label=order.get("label") or None)
    thread_id = str(order["thread_id"])
    verb = order["verb"]
    if verb == "start":
        executor.start(RunSpec.from_json(order["spec"]), str(order["task"]), thread_id)
    elif verb in ("approve", "deny"):
        executor.answer(thread_id, verb, order.get("reason"))
    elif verb == "resume":
        executor.resume(thread_id)
    elif verb == "handback":
        executor.handback(thread_id, order.get("note"), person=order.get("person"))
    else:
        raise ConfigError(f"unknown verb {verb!r}")


def _on_server(order: dict[str, Any]) -> None:
    """The leg of a served run: the served executor runs it on the server and follows it
    until it ends or pauses (the model's key and the desktop's password are the server's)."""
    from vnc_use.runs.executor import ServedExecutor
    from vnc_use.runs.spec import RunSpec

    thread_id = str(order["thread_id"])
    verb = order["verb"]
    if verb == "start":
        spec = RunSpec.from_json(order["spec"])
        named = {"provider": spec.provider, "model": spec.model}
        metadata = {k: v for k, v in named.items() if v}  # the console's runs list shows them
        executor = ServedExecutor(str(order["server"]), metadata=metadata)
        executor.start(spec, str(order["task"]), thread_id)
        return
    executor = ServedExecutor(str(order["server"]))
    if verb in ("approve", "deny"):
        executor.answer(thread_id, verb, order.get("reason"))
    elif verb == "resume":
        executor.resume(thread_id)
    else:
        raise ConfigError(f"unknown verb {verb!r}")


def _carry_out(order: dict[str, Any]) -> None:
    if order.get("fleet"):
        _on_fleet(order)
        return
    if order.get("server"):
        _on_server(order)
        return
    from vnc_use.desktops.target import reach
    from vnc_use.runs.executor import LocalExecutor
    from vnc_use.runs.open import open_planner, sensitive_values

    spec = _spec(order)
    thread_id = str(order["thread_id"])
    log_path = Path(spec.runs_dir) / thread_id / "freerdp.log"
    with (
        reach(spec.desktop, log_path=log_path) as reached,
        LocalExecutor(
            spec.runs_dir,
            checkpointer=config.database_url(),
            reached=reached,
            planner=open_planner(spec),
            sensitive_text=sensitive_values(spec.sensitive_names),
        ) as executor,
    ):

        def on_signal(signum: int, frame: FrameType | None) -> None:
            # the executor's stop takes a lock this thread may hold: ask from another thread
            threading.Thread(target=executor.stop, args=(thread_id,), daemon=True).start()

        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        verb = order["verb"]
        if verb == "start":
            executor.start(spec, str(order["task"]), thread_id)
        elif verb in ("approve", "deny"):
            executor.answer(thread_id, verb, order.get("reason"), spec=spec)
        elif verb == "resume":
            executor.resume(thread_id, spec=spec)
        elif verb == "handback":
            executor.handback(thread_id, order.get("note"), person=order.get("person"), spec=spec)
        else:
            raise ConfigError(f"unknown verb {verb!r}")


def main() -> int:
    try:
        order = json.loads(sys.stdin.read())
        _carry_out(order)
    except (ConfigError, VncUseError) as exc:
        sys.stderr.write(f"vnc-use: {exc}\n")
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug of ours: one line, the run stays resumable
        sys.stderr.write(f"vnc-use: internal error: {type(exc).__name__}: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
