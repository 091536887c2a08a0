"""Help text once (issue 40, item 5): a run's setting is described in one place, its field of
``RunSpec`` or ``DesktopTarget``, and the doors are built from it: ``vnc-use run --help`` (and
the other commands' option tables) and the MCP ``run_task`` tool's input schema carry the
field's own description, and a setting added to the spec reaches both without a change in
``cli/`` or ``mcp_server/``."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

import vnc_use.runs.spec
from vnc_use.cli import build_parser
from vnc_use.cli.options import setting_help
from vnc_use.cli.spec import run_spec
from vnc_use.desktops.target import DesktopTarget, ReachedDesktop
from vnc_use.mcp_server.runs import _spec
from vnc_use.mcp_server.server import build_server
from vnc_use.mcp_server.session import DesktopSession
from vnc_use.runs.spec import RunSpec
from vnc_use.setting import setting, settings_of

NOT_SETTINGS = {"desktop", "local", "label", "local_desktop_dir"}
"""Fields no person sets: the spec's desktop (its own fields are settings), and what a run
records about the desktop it reached."""


def _options(command: str) -> dict[str, argparse.Action]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a for a in sub.choices[command]._actions if a.option_strings}


def _field(cls: type, name: str) -> Any:
    return next((f, s) for f, s in settings_of(cls) if f.name == name)


def _tool_schema(spec: RunSpec, tmp_path: Path) -> dict[str, Any]:
    """The input schema of ``run_task`` as an MCP client lists it (in-process server)."""
    session = DesktopSession(ReachedDesktop(server="127.0.0.1::5999"), tmp_path, spec=spec)
    found: dict[str, Any] = {}

    async def main() -> None:
        async with Client(build_server(session)) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            found.update(tools["run_task"].input_schema)

    anyio.run(main)
    return found


def test_every_setting_is_described_once_and_each_door_shows_that_description(
    tmp_path: Path,
) -> None:
    settings = [*settings_of(RunSpec), *settings_of(DesktopTarget)]
    described = {f.name for f, _ in settings}
    every = {f.name for cls in (RunSpec, DesktopTarget) for f in dataclasses.fields(cls)}
    assert every - described == NOT_SETTINGS  # a new field comes with its description
    run = _options("run")
    for f, s in settings:
        assert s.help and s.flag.startswith("--"), f.name
        option = run[s.name]  # every setting is an option of `vnc-use run`...
        assert s.flag in option.option_strings, (f.name, option.option_strings)
        # ...with its own text (and how the command names the default: --vnc, the run's own)
        assert option.help is not None and option.help.replace("%%", "%").startswith(s.help)
    assert run["step_limit"].help == setting_help(*_field(RunSpec, "step_limit"))
    schema = _tool_schema(RunSpec(), tmp_path)
    properties = schema["properties"]
    offered = {f.name: s for f, s in settings if s.tool}
    assert (
        set(properties)
        == {"task", *offered}
        == {
            "task",
            "provider",
            "model",
            "step_limit",
            "max_cost",
        }
    )
    for name, s in offered.items():  # the tool's arguments carry the same description
        assert properties[name]["description"].startswith(s.help + " (default: vnc-use mcp ")
        assert properties[name]["default"] is None  # null: the session's (vnc-use mcp's)
    assert {"minimum": 1, "type": "integer"} in properties["step_limit"]["anyOf"]
    assert {"exclusiveMinimum": 0, "type": "number"} in properties["max_cost"]["anyOf"]
    assert schema["additionalProperties"] is False


@dataclasses.dataclass
class _GrownSpec(RunSpec):
    """The spec with a setting it does not have today, declared in its field only."""

    patience: float | None = setting(
        None,
        group="budget",
        flag="--patience",
        metavar="S",
        parse="float",
        tool=True,
        bounds=(("gt", 0),),
        help="seconds to wait for a slow page before the model is told",
    )


def test_a_setting_added_to_the_spec_reaches_the_cli_and_the_mcp_tool(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(vnc_use.runs.spec, "RunSpec", _GrownSpec)
    said = "seconds to wait for a slow page before the model is told"
    for command in ("run", "eval", "mcp"):  # each command that has the budget group
        option = _options(command)["patience"]
        assert option.option_strings == ["--patience"] and option.metavar == "S"
        assert option.help == said
    parser = build_parser()
    args = parser.parse_args(["run", "--task", "t", "--vnc", "127.0.0.1::5999", "--patience", "7"])
    spec = run_spec(args)
    assert isinstance(spec, _GrownSpec) and spec.patience == 7.0
    assert run_spec(parser.parse_args(["run", "--task", "t"])).patience is None

    properties = _tool_schema(_GrownSpec(), tmp_path)["properties"]
    assert properties["patience"]["description"] == f"{said} (default: vnc-use mcp --patience)"
    assert {"exclusiveMinimum": 0, "type": "number"} in properties["patience"]["anyOf"]
    session = DesktopSession(
        ReachedDesktop(server="127.0.0.1::5999"), tmp_path, spec=_GrownSpec(patience=1.0)
    )
    assert _spec(session, patience=3.0).patience == 3.0  # a call's value reaches the run
    assert _spec(session).patience == 1.0  # none given: the session's


def test_the_executors_option_tables_are_the_settings_marked_where() -> None:
    """What an executor may refuse, and how a refusal spells each option, come from the
    settings: every setting marked ``where`` is in the door's table with its option's default,
    and the fleet refuses each but the cost cap, named by its own flag."""
    from vnc_use.cli.outcome import DOOR_DEFAULTS
    from vnc_use.fleet.executor import FLEET_REFUSES
    from vnc_use.runs.executor import flag_of
    from vnc_use.runs.spec import where_settings

    where = {s.name: (f, s) for f, s in where_settings()}
    assert {"vnc", "rdp", "runs_dir", "lease_timeout", "video", "max_cost"} <= set(where)
    assert not {"step_limit", "provider", "confirm", "price"} & set(where)  # the spec's own
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    run_defaults = {a.dest: a.default for a in sub.choices["run"]._actions}
    for name in where:
        assert DOOR_DEFAULTS[name] == run_defaults[name], name
        if name != "max_cost":
            assert FLEET_REFUSES[name] == flag_of(name), name
    assert flag_of("video") == "--video/--no-video"
    assert (
        flag_of("vnc_user") == "--vnc-user" and flag_of("reconnect_window") == "--reconnect-window"
    )
    assert flag_of("checkpointer") == "--checkpointer"  # a door's own option: its name
