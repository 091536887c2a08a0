"""The command line's run specs: one function per door turns its options into a
:class:`~vnc_use.runs.spec.RunSpec`.

- :func:`run_spec` -- ``vnc-use run`` (in this process, or ``--server``);
- :func:`saved_run_spec` -- ``approve`` / ``deny`` / ``resume`` / ``replay``: the recorded
  run's spec (its ``run.json``) with the options given on top;
- :func:`eval_spec` -- ``vnc-use eval``: what every task of the suite shares;
- :func:`mcp_spec` -- ``vnc-use mcp``: the session's desktop, and the runs ``run_task`` starts.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from vnc_use.cli.options import (
    budget_fields,
    desktop_target,
    model_fields,
    spec_fields,
    video_fields,
)
from vnc_use.desktops.target import DesktopTarget

if TYPE_CHECKING:  # the spec pulls in LangGraph: imported when a command builds one
    from vnc_use.runs.spec import RunSpec

__all__ = ["eval_spec", "mcp_spec", "run_spec", "saved_run_spec"]


def _local_fields(args: argparse.Namespace) -> dict[str, Any]:
    """What every run-family command sets on the spec: the video, the runs folder, the lease
    timeout, the reconnect window (those given)."""
    return spec_fields(args, "recording", "runs_dir", "local")


def run_spec(args: argparse.Namespace) -> RunSpec:
    """``vnc-use run``: the spec of a new run (checked): every setting its options gave."""
    from vnc_use.runs.spec import RunSpec

    spec = RunSpec(**spec_fields(args), desktop=desktop_target(args))
    spec.check()
    return spec


def saved_run_spec(args: argparse.Namespace, saved: Mapping[str, Any]) -> RunSpec:
    """``approve`` / ``deny`` / ``resume`` / ``replay``: the recorded run's spec, on the
    desktop the options name (default: the run's own) and in the folder they name."""
    from vnc_use.runs.spec import RunSpec

    recorded = RunSpec.from_run_json(saved)
    if args.command == "replay":  # the model a --heal hands the task to: the recorded run's
        healer = (saved.get("replay") or {}).get("heal_planner")
        model = RunSpec.from_run_json(healer) if healer else recorded
        for name in ("provider", *model.model_settings()):
            setattr(recorded, name, getattr(model, name))
    spec = RunSpec.from_json({**recorded.to_json(), **_local_fields(args)})
    spec.desktop = desktop_target(args, recorded.desktop)
    if getattr(args, "max_cost", None) is not None:  # resume --max-cost: the run's new cap
        spec.max_cost = args.max_cost
    spec.check()
    return spec


def eval_spec(args: argparse.Namespace) -> RunSpec:
    """``vnc-use eval``: the spec every task starts from (the model, the budgets, whether
    actions that ask are approved); each task's own budgets and desktop go on top."""
    from vnc_use.runs.spec import RunSpec

    spec = RunSpec(
        **model_fields(args),
        **budget_fields(args),
        hitl_mode=args.approve_all,
        **video_fields(args),
        desktop=DesktopTarget(
            vnc_password_env=args.vnc_password_env,
            connect_timeout=args.connect_timeout or DesktopTarget.connect_timeout,
        ),
    )
    spec.check()
    return spec


def mcp_spec(args: argparse.Namespace) -> RunSpec:
    """``vnc-use mcp``: the session's desktop (default: the local one) and the model and
    budgets of the runs ``run_task`` starts (a call may choose its own provider, model and
    step limit)."""
    from vnc_use.runs.spec import RunSpec

    spec = RunSpec(
        **model_fields(args),
        **budget_fields(args),
        runs_dir=args.runs_dir,
        **video_fields(args),
        desktop=desktop_target(args),
    )
    spec.check()
    return spec
