"""What the console knows before a run starts: its desktops, its defaults, and the one function
that turns a ``POST /api/runs`` body into a :class:`~vnc_use.runs.spec.RunSpec`.

The body is JSON: ``task`` (required), ``provider``, ``model``, ``desktop`` (the name of one of
the console's desktops, ``GET /api/desktops``), ``confirm`` (action names that need a person's
approval), ``step_limit``, ``max_cost``, and any other ``RunSpec`` field by its own name
(``seconds_timeout``, ``stall_after``, ``keep_screenshots``, ``video``, ...). A bad value is a
:class:`BadInput` naming the field (HTTP 400). The desktop's own settings and the runs folder
are the console's: a body cannot point a run at another address or folder.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from vnc_use.desktops.target import DesktopTarget
from vnc_use.errors import ConfigError
from vnc_use.runs.spec import RunSpec

__all__ = ["BadInput", "ConsoleDesktop", "Defaults", "spec_from_body"]

_SPEC_FIELDS = {f.name: f for f in dataclasses.fields(RunSpec)}
_CONSOLE_OWN = frozenset({"runs_dir", "desktop"})
"""RunSpec fields a body cannot set (the console's own)."""
_ALIASES = {"confirm": "confirm_actions"}
_NUMBERS = (int, float)


class BadInput(Exception):
    """A bad field of a request (HTTP 400): ``field`` and one line."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.field = name


@dataclass(frozen=True)
class ConsoleDesktop:
    """A desktop the console offers: its name in the form and the API, and how to reach it."""

    name: str
    kind: str
    """``local``, ``vnc`` or ``rdp``."""
    target: DesktopTarget

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind}


@dataclass
class Defaults:
    """The console's own options: the runs folder, the desktops, the model and budgets a form
    starts from."""

    runs_dir: str
    desktops: list[ConsoleDesktop]
    spec: dict[str, Any] = field(default_factory=dict)
    """RunSpec fields every run starts from (provider, model, step_limit, ...)."""

    def desktop(self, name: str | None) -> ConsoleDesktop:
        if not self.desktops:
            raise BadInput("desktop", "the console has no desktop")
        if name is None or name == "":
            return self.desktops[0]
        for desk in self.desktops:
            if desk.name == name:
                return desk
        names = ", ".join(d.name for d in self.desktops)
        raise BadInput("desktop", f"no desktop {name!r} here: use one of {names}")


def _default(name: str) -> Any:
    spec_field = _SPEC_FIELDS[name]
    if spec_field.default_factory is not dataclasses.MISSING:
        return spec_field.default_factory()
    return spec_field.default


def _kind(name: str) -> str:
    """What a field holds, as its default (or its name) tells: bool, int, number, list, text."""
    default = _default(name)
    if name in ("keep_screenshots",):
        return "int"
    if name in ("max_cost",):
        return "number"
    if name == "price":
        return "prices"
    for kind, types in (("bool", bool), ("int", int), ("number", float), ("list", list)):
        if isinstance(default, types):
            return kind
    return "text"


_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "bool": (lambda v: isinstance(v, bool), "must be true or false"),
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool), "must be a whole number"),
    "number": (
        lambda v: isinstance(v, _NUMBERS) and not isinstance(v, bool),
        "must be a number",
    ),
    "list": (
        lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
        "must be a list of names",
    ),
    "prices": (lambda v: isinstance(v, list), "must be [INPUT, OUTPUT] USD per million tokens"),
    "text": (lambda v: isinstance(v, str), "must be text"),
}


def _check_type(name: str, value: Any) -> Any:
    """The value if it fits the field's type, else :class:`BadInput`."""
    fits, wanted = _CHECKS[_kind(name)]
    if value is not None and not fits(value):
        raise BadInput(name, f"{wanted}, got {value!r}")
    return value


def _values(body: Mapping[str, Any], defaults: Defaults) -> dict[str, Any]:
    """The spec's fields from the body, over the console's defaults."""
    values: dict[str, Any] = dict(defaults.spec)
    for key, value in body.items():
        if key in ("task", "desktop"):
            continue
        name = _ALIASES.get(key, key)
        if name in _CONSOLE_OWN or name not in _SPEC_FIELDS:
            known = "provider, model, desktop, confirm, step_limit, max_cost or a RunSpec field"
            raise BadInput(key, f"not a setting of a run here (use {known})")
        if name in ("provider", "model") and value == "":
            continue  # an empty field of the form: the console's default
        if _check_type(name, value) is not None:
            values[name] = value
    return values


def spec_from_body(body: Any, defaults: Defaults) -> tuple[RunSpec, str]:
    """The spec and the task of a ``POST /api/runs`` body (see the module's doc)."""
    if not isinstance(body, Mapping):
        raise BadInput("body", "send a JSON object with at least a task")
    task = body.get("task")
    if not isinstance(task, str) or not task.strip():
        raise BadInput("task", "required: what to do, in plain words")
    values = _values(body, defaults)
    desk = defaults.desktop(body.get("desktop"))
    try:
        spec = RunSpec(**values, desktop=dataclasses.replace(desk.target))
    except TypeError as exc:
        raise BadInput("body", str(exc)) from None
    spec.runs_dir = defaults.runs_dir
    try:
        spec.check()
    except ConfigError as exc:
        text = str(exc)
        named = next((n for n in _SPEC_FIELDS if text.startswith(n)), None)
        if named is None and "confirm" in text:
            named = "confirm"
        raise BadInput(named or "body", text.removeprefix(f"{named} ") if named else text) from None
    return spec, task.strip()
