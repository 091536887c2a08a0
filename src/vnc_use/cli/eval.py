"""``vnc-use eval``: run a task suite over a pool of desktops and report the success rate.

    vnc-use eval tasks.yaml --desktops 2 --out eval-out
    vnc-use eval --suite builtin --desktops 2 --out eval-out
    vnc-use eval --suite builtin --desktops 2 --out eval-out --server http://127.0.0.1:2024
    vnc-use eval tasks.yaml --rdp winbox.local --out eval-out

Progress: on a terminal, one live line per desktop and an overall bar (rich); otherwise one
line per finished task run. Ctrl-C stops cleanly (the runs in progress stop at their next
step and are not recorded); the same command again goes on where it stopped.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vnc_use import config
from vnc_use.cli import fleet as fleet_commands
from vnc_use.cli.common import (
    EXIT_DONE,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    add_video_options,
    stop_on_signals,
)
from vnc_use.cli.options import (
    add_budget_options,
    add_model_options,
    add_password_envs,
    add_rdp_options,
    add_settings,
    desktop_target,
    positive_int,
)
from vnc_use.cli.spec import eval_spec
from vnc_use.desktops.local import parse_size
from vnc_use.errors import ConfigError

if TYPE_CHECKING:
    from vnc_use.runs.spec import RunSpec

_STOPPING = "stopping the evaluation; run the same command again to go on"


__all__ = ["command", "register"]


def register(sub: Any) -> None:
    """Add ``eval`` to the sub-command parsers."""
    p = sub.add_parser("eval", help="run a task suite over desktops and report the success rate")
    p.add_argument("tasks", nargs="?", default=None, metavar="TASKS", help="YAML or JSONL file")
    p.add_argument("--suite", default=None, metavar="NAME", help="a built-in suite: builtin")
    p.add_argument("--out", required=True, metavar="DIR", help="results folder (rerun: resume)")
    p.add_argument("--desktops", type=positive_int, default=1, metavar="N")
    p.add_argument("--repeat", type=positive_int, default=1, metavar="K")
    p.add_argument("--only", nargs="+", default=None, metavar="ID", help="run these tasks only")
    p.add_argument(
        "--reuse-desktops",
        action="store_true",
        help="keep each desktop between tasks (default: a fresh desktop per task)",
    )
    p.add_argument(
        "--vnc",
        action="append",
        default=None,
        metavar="ADDR",
        help="use this running desktop instead of starting local ones (repeat for several; "
        "password from VNC_PASSWORD)",
    )
    p.add_argument("--size", default="1280x800", metavar="WxH", help="local desktops' size")
    add_rdp_options(
        p, default_help="one desktop, the tasks one at a time on it (setup and check run here)"
    )
    add_settings(p, "connect_timeout")
    p.add_argument(
        "--server",
        default=None,
        metavar="URL",
        help="run each task as a thread on this LangGraph Server (setup and check still run "
        "here); the server connects to the desktops: --vnc ADDR it can reach, or the local "
        "desktops eval starts, all with the password in VNC_PASSWORD",
    )
    add_password_envs(p, "vnc_password_env")
    hitl = p.add_mutually_exclusive_group()
    hitl.add_argument(
        "--no-hitl",
        action="store_true",
        help="(the default) an action that asks for confirmation ends the task as denied",
    )
    hitl.add_argument(
        "--approve-all", action="store_true", help="approve every action that asks for it"
    )
    add_budget_options(  # a task's own budgets go on top of these
        p,
        stall=True,
        defaults={"step_limit": 15},
        parse={"step_limit": "positive_int", "stall_after": "int"},
    )
    add_model_options(p)
    p.add_argument("--quiet", action="store_true", help="print only the summary")
    add_video_options(p)
    fleet_commands.add_fleet_options(p, run=True)
    p.set_defaults(func=command)


def _task_file(args: argparse.Namespace) -> Any:
    from vnc_use.evaluation.tasks import load_tasks, suite_path

    if (args.tasks is None) == (args.suite is None):
        raise ConfigError("give a task file (vnc-use eval TASKS ...) or --suite builtin, not both")
    elsewhere = "--vnc" if args.vnc else "--rdp" if args.rdp else None
    if args.suite and elsewhere:
        raise ConfigError(
            f"--suite {args.suite} sets up and checks its tasks on the local desktops eval "
            f"starts (their DISPLAY and HOME), which {elsewhere} replaces: drop {elsewhere}, or "
            "give a task file whose setup and check reach that desktop"
        )
    return load_tasks(args.tasks or suite_path(args.suite), only=args.only)


def _slots(args: argparse.Namespace, spec: RunSpec, out: Path) -> list[Any]:
    from vnc_use.evaluation.desktops import LocalSlot, VncSlot

    if args.rdp:
        from vnc_use.evaluation.rdp import RdpSlot

        if args.vnc:
            raise ConfigError("--vnc and --rdp were both given; a run uses one desktop")

        if args.server:
            raise ConfigError(
                "--rdp and --server do not go together: the RDP bridge is private to this "
                "machine; drop --server (the agent runs here)"
            )
        if args.desktops > 1:
            raise ConfigError("--rdp is one desktop (tasks run one at a time); drop --desktops")
        target = desktop_target(args, spec.desktop)  # the RDP password: the variable it names
        return [RdpSlot(target, out.resolve() / "logs" / "freerdp.log")]
    if args.vnc:
        password = config.vnc_password() or None
        return [VncSlot(f"vnc-{i + 1}", addr, password) for i, addr in enumerate(args.vnc)]
    shared = None
    if args.server:  # the server reads the local desktops' password from its own variable
        shared = config.vnc_password()
        if not shared:
            raise ConfigError(
                "eval --server starts local desktops with the password in VNC_PASSWORD (the "
                "server has it in the variable --vnc-password-env names): set VNC_PASSWORD, or "
                "give --vnc ADDR desktops the server can reach"
            )
    size = parse_size(args.size)
    return [  # absolute: Xvnc and the commands run in another folder
        LocalSlot(
            out.resolve() / "desktops" / f"desktop-{i + 1}",
            size,
            reuse=args.reuse_desktops,
            password=shared,
        )
        for i in range(args.desktops)
    ]


def _runner(args: argparse.Namespace, spec: RunSpec, out: Path) -> Any:
    """Where the agent runs: in this process, or on ``--server`` (its key is the server's)."""
    from vnc_use.evaluation.runner import AgentRunner

    if args.server:
        from vnc_use.evaluation.served import ServerRunner

        runs_dir = str(out.resolve() / "runs")  # on the server's machine
        runner = ServerRunner(args.server, runs_dir, spec)
        runner.check()  # an unreachable server fails before any desktop starts
        return runner
    from vnc_use.runs.open import open_planner

    open_planner(spec, ready=True)  # a missing key fails before any desktop starts
    return AgentRunner(out / "runs", spec)


class _Display:
    """One live line per desktop and an overall bar (terminal), else a line per result."""

    def __init__(self, slots: list[str], total: int, done: int, quiet: bool) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.console = Console()
        self.quiet = quiet
        self.lock = threading.Lock()
        self.lines = dict.fromkeys(slots, "idle")
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn()
        )
        self.overall = self.progress.add_task("all tasks", total=total, completed=done)
        self.live: Any = None
        if self.console.is_terminal and not quiet:
            from rich.live import Live

            self.live = Live(
                console=self.console, get_renderable=self._render, refresh_per_second=4
            )

    def _render(self) -> Any:
        from rich.console import Group
        from rich.text import Text

        rows = [
            Text(f"{name}: {text}", overflow="ellipsis", no_wrap=True)
            for name, text in self.lines.items()
        ]
        return Group(*rows, self.progress)

    def __enter__(self) -> _Display:
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()

    def __call__(self, kind: str, fields: dict[str, Any]) -> None:
        with self.lock:
            if kind == "slot":
                self.lines[fields["slot"]] = fields["text"]
            elif kind == "result":
                r = fields["result"]
                self.progress.advance(self.overall)
                if not self.quiet:
                    why = f" ({r.error})" if r.error and not r.success else ""
                    self.console.print(
                        f"{r.id} #{r.repeat}: {r.outcome} in {r.steps} steps, "
                        f"{r.seconds:.1f} s{why}",
                        markup=False,
                        highlight=False,
                    )


def command(args: argparse.Namespace) -> int:
    """Run the evaluation; 0 when every planned task run has a result, 130 when stopped."""
    from vnc_use.evaluation.suite import Evaluation

    if args.fleet:  # each task a leg on the fleet's queue
        return fleet_commands.eval_command(args, _task_file(args), eval_spec(args), _print_summary)
    tasks = _task_file(args)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create --out {out} ({exc.strerror}); choose another") from None
    spec = eval_spec(args)
    slots = _slots(args, spec, out)  # refuses options that do not go together, starts nothing
    runner = _runner(args, spec, out)
    evaluation = Evaluation(tasks, out, slots, runner, repeat=args.repeat)
    planned, pending = len(evaluation.planned), len(evaluation.pending())
    if pending < planned and not args.quiet:
        print(f"{planned - pending} of {planned} task runs already done in {out}; skipping them")
    display = _Display([s.name for s in slots], planned, planned - pending, args.quiet)
    evaluation.on_event = display
    with display, stop_on_signals(evaluation.stop, _STOPPING):
        try:
            summary = evaluation.run()
        except KeyboardInterrupt:  # a second Ctrl-C: the runs stopped at once
            summary = evaluation.write_summary()
    _print_summary(summary, out)
    for failure in evaluation.failures:
        print(f"vnc-use: {failure}", file=sys.stderr)
    if evaluation.stopped:
        return EXIT_INTERRUPTED
    return EXIT_DONE if summary["complete"] else EXIT_ERROR


def _print_summary(summary: dict[str, Any], out: Path) -> None:
    rate = summary["success_rate"]
    low, high = summary["success_rate_95"]
    shown = "-" if rate is None else f"{rate:.1%} (95% CI {low:.1%}-{high:.1%})"
    outcomes = ", ".join(f"{k} {v}" for k, v in summary["outcomes"].items() if v)
    scored = summary.get("scored_runs", summary["runs"])
    unscored = summary["runs"] - scored
    aside = f" ({unscored} whose setup failed not counted)" if unscored else ""
    print(f"passed {summary['passed']} of {scored} runs{aside}: {shown}; {outcomes or 'no runs'}")
    print(f"results: {out / 'results.jsonl'}  summary: {out / 'summary.json'}")
    print(f"table: {out / 'index.html'}")
