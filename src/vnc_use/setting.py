"""A run setting, described once: its help text, its default, and how the doors spell it.

Each field of :class:`~vnc_use.runs.spec.RunSpec` and
:class:`~vnc_use.desktops.target.DesktopTarget` that a person can set is declared with
:func:`setting`: the field keeps its type and default, and its ``metadata["setting"]`` holds
a :class:`Setting`: the one description every door shows (``vnc-use run --help``, the MCP
``run_task`` tool's input schema) and how the command line spells it (flag, metavar, choices).
The command line's option tables (:func:`vnc_use.cli.options.add_settings`) and the MCP tool
schema (:mod:`vnc_use.mcp_server.server`) are built from these fields, so a new setting is
added in one place: its field.

Plain data only (this module is in the base layer): the command line turns :attr:`Setting.parse`
(a name of a kind of value) into its argument check.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["SETTING", "Kind", "Setting", "default_text", "setting", "settings_of"]

SETTING = "setting"
"""The key of a field's :class:`Setting` in its ``metadata``."""

Kind = Literal["value", "switch", "negated", "many", "each", "on_off"]
"""How the command line takes it: ``value`` (``--flag VALUE``), ``switch`` (``--flag``: true),
``negated`` (``--no-thing``: false), ``many`` (``--flag A B``), ``each`` (``--flag A --flag B``),
``on_off`` (``--flag`` / ``--no-flag``)."""


@dataclass(frozen=True)
class Setting:
    """What a door needs to offer a setting (see the module's doc)."""

    help: str
    """The one description: the command line's help and the MCP schema's ``description``."""
    group: str
    """Which option group adds it (``planner``, ``budget``, ``cost``, ``rdp``, ...): a command
    adds groups, so a new setting of a group reaches every command that has the group."""
    flag: str
    """How the command line spells it (``--timeout``); a user contract, never renamed."""
    dest: str | None = None
    """The parsed argument's name, when not the flag's (``--no-hitl``: ``no_hitl``)."""
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    kind: Kind = "value"
    parse: str | None = None
    """The kind of value the command line checks (``seconds``, ``count``, ``usd``, ``price``,
    ``fps``, ``wait``, ``int``, ``float``); None: text."""
    shown_default: str | None = None
    """How help names the default when the field's value does not say it (``the provider's``)."""
    cli_default: bool = False
    """The command line's default is the field's (else None: left out, the spec's or the
    recorded run's own)."""
    tool: bool = False
    """The MCP ``run_task`` tool takes it (default: the ``vnc-use mcp`` session's)."""
    where: bool = False
    """It says where and how the run executes (its desktop, runs folder, lease, video, a
    later leg's cost cap) rather than what the model does: an executor may refuse it."""
    bounds: tuple[tuple[str, float], ...] = ()
    """Bounds a tool schema states (``(("ge", 1),)``); the spec's ``check`` refuses the rest."""

    @property
    def name(self) -> str:
        """The parsed argument's name."""
        return self.dest or self.flag.removeprefix("--").replace("-", "_")

    @property
    def flags(self) -> str:
        """How a refusal names the option (``--video/--no-video``)."""
        return f"{self.flag}/--no-{self.flag[2:]}" if self.kind == "on_off" else self.flag


def setting(
    default: Any = dataclasses.MISSING,
    *,
    default_factory: Any = dataclasses.MISSING,
    **described: Any,
) -> Any:
    """A dataclass field with its :class:`Setting` (the keywords) in its metadata."""
    meta = {SETTING: Setting(**described)}
    if default_factory is not dataclasses.MISSING:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


def settings_of(cls: type) -> Iterator[tuple[dataclasses.Field[Any], Setting]]:
    """The fields of dataclass ``cls`` that are settings, in their order, with their
    :class:`Setting`."""
    for f in dataclasses.fields(cls):
        described = f.metadata.get(SETTING)
        if isinstance(described, Setting):
            yield f, described


def default_text(f: dataclasses.Field[Any], described: Setting, default: Any = None) -> str | None:
    """How help names the default (``default`` overrides the field's); None: say nothing."""
    if described.shown_default is not None:
        return described.shown_default
    if default is None:
        default = f.default if f.default is not dataclasses.MISSING else None
    if default is None or isinstance(default, bool) or default == []:
        return None
    if isinstance(default, float) and default.is_integer():
        return str(int(default))
    return str(default)
