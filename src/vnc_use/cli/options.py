"""The options of a run's settings, built from the settings' own fields.

Each option that sets a run's setting is generated from its field of
:class:`~vnc_use.runs.spec.RunSpec` or :class:`~vnc_use.desktops.target.DesktopTarget`
(:func:`add_settings`: the flag, metavar, choices, help and default its
:class:`~vnc_use.setting.Setting` declares), and read back the same way (:func:`spec_fields`,
:func:`desktop_target`; the door builders in :mod:`vnc_use.cli.spec`). ``run`` (and
``--server``), ``eval``, ``mcp``, ``replay`` and ``approve``/``deny``/``resume`` add the groups
they take with the ``add_*`` functions, so a setting added to a group reaches each of them
without a change here. Nothing is written onto the parsed arguments.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import Field, replace
from typing import Any

from vnc_use import config
from vnc_use.desktops.target import DesktopTarget
from vnc_use.errors import ConfigError
from vnc_use.providers.pricing import parse_price
from vnc_use.setting import Setting, default_text, settings_of

__all__ = [
    "PARSERS",
    "add_budget_options",
    "add_connection_options",
    "add_cost_options",
    "add_login_and_paste",
    "add_max_cost",
    "add_model_options",
    "add_password_envs",
    "add_rdp_options",
    "add_rdp_session_options",
    "add_settings",
    "add_vnc",
    "budget_fields",
    "desktop_target",
    "frames_per_second",
    "model_fields",
    "non_negative_int",
    "non_negative_seconds",
    "positive_seconds",
    "positive_usd",
    "price_arg",
    "setting_help",
    "spec_fields",
    "video_fields",
]


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a positive number of seconds")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be 0 or more")
    return value


def positive_int(text: str) -> int:
    value = non_negative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be 1 or more")
    return value


def positive_usd(text: str) -> float:
    """An amount of USD above 0 (``--max-cost``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an amount of USD") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a positive amount of USD")
    return value


def price_arg(text: str) -> tuple[float, float]:
    """``INPUT/OUTPUT``, USD per million tokens (``--price``)."""
    try:
        return parse_price(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(f"--price {text!r}: ")) from None


def non_negative_seconds(text: str) -> float:
    """A number of seconds, 0 or more (``--lease-timeout``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be 0 or more seconds")
    return value


def frames_per_second(text: str) -> float:
    """A frame rate above 0, at most 60 (``--video-fps``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of frames a second") from None
    if not 0 < value <= 60:
        raise argparse.ArgumentTypeError(f"{text} must be more than 0 and at most 60 (frames/s)")
    return value


PARSERS: Mapping[str, Callable[[str], Any]] = {
    "int": int,
    "float": float,
    "count": non_negative_int,
    "positive_int": positive_int,
    "seconds": positive_seconds,
    "wait": non_negative_seconds,
    "usd": positive_usd,
    "price": price_arg,
    "fps": frames_per_second,
}
"""The command line's check of each kind of value a :class:`~vnc_use.setting.Setting` names."""


# --------------------------------------------------------------------------- settings


def _owners() -> tuple[type, ...]:
    """The classes whose fields are a run's settings (read when a parser is built)."""
    from vnc_use.runs import spec

    return (spec.RunSpec, DesktopTarget)


def _settings(which: Sequence[str]) -> list[tuple[Field[Any], Setting]]:
    """The settings of the groups (or fields) ``which`` names, in that order, each in its
    field order (no group has a field's name)."""
    found = [(f, s) for cls in _owners() for f, s in settings_of(cls)]
    return [(f, s) for key in which for f, s in found if key in (s.group, f.name)]


def setting_help(f: Field[Any], s: Setting, *, shown: str | None = None) -> str:
    """The setting's one description, with how its default is named."""
    default = shown or default_text(f, s)
    return s.help + (f" (default: {default})" if default else "")


def add_settings(
    p: argparse.ArgumentParser,
    *which: str,
    defaults: Mapping[str, Any] | None = None,
    shown: Mapping[str, str] | None = None,
    notes: Mapping[str, str] | None = None,
    parse: Mapping[str, str] | None = None,
) -> None:
    """Add the options of the settings ``which`` names (groups such as ``planner``, or field
    names), built from the fields: flag, metavar, choices, help and default. A command may
    give a field its own default (``defaults``), name the default its own way (``shown``),
    add a note to the help (``notes``) or check the value as another kind (``parse``)."""
    for f, s in _settings(which):
        text = setting_help(f, s, shown=(shown or {}).get(f.name))
        note = (notes or {}).get(f.name)
        kwargs = _how(f, s, (parse or {}).get(f.name, s.parse))
        kwargs["help"] = (f"{text}; {note}" if note else text).replace("%", "%%")
        if defaults and f.name in defaults:
            kwargs["default"] = defaults[f.name]
        p.add_argument(s.flag, **kwargs)


def _how(f: Field[Any], s: Setting, kind: str | None) -> dict[str, Any]:
    """``add_argument``'s keywords for a setting (all but its help)."""
    how: dict[str, Any] = {"dest": s.dest} if s.dest else {}
    if s.kind in ("switch", "negated"):
        return {**how, "action": "store_true", "default": None}
    if s.kind == "on_off":
        return {**how, "action": argparse.BooleanOptionalAction, "default": None}
    if s.kind == "many":
        how.update(nargs="+", default=[])
    elif s.kind == "each":
        how.update(action="append", default=[])
    else:
        how["default"] = f.default if s.cli_default else None
    if kind is not None:
        how["type"] = PARSERS[kind]
    if s.metavar:
        how["metavar"] = s.metavar
    if s.choices:
        how["choices"] = s.choices
    return how


def spec_fields(args: argparse.Namespace, *which: str, owner: type | None = None) -> dict[str, Any]:
    """The fields the parsed options of the settings ``which`` names set (all of ``owner``'s,
    by default the run spec's, when none is named): those given only."""
    chosen = _settings(which) if which else list(settings_of(owner or _owners()[0]))
    found: dict[str, Any] = {}
    for f, s in chosen:
        value = getattr(args, s.name, None)
        if value is None:
            continue
        if s.kind == "negated":
            if value:
                found[f.name] = False
            continue
        if s.kind in ("many", "each") or s.parse == "price":
            value = [float(v) for v in value] if s.parse == "price" else list(value)
        found[f.name] = value
    return found


# --------------------------------------------------------------------------- the groups


def add_model_options(p: argparse.ArgumentParser) -> None:
    """Who serves the model and how it is configured (``--provider`` ... ``--exclude``)."""
    add_settings(p, "planner")


def model_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The RunSpec fields :func:`add_model_options` gave (those given only)."""
    return spec_fields(args, "planner")


def add_budget_options(
    p: argparse.ArgumentParser,
    *,
    stall: bool = False,
    defaults: Mapping[str, Any] | None = None,
    parse: Mapping[str, str] | None = None,
) -> None:
    """``--step-limit`` and ``--timeout`` (left out: the run spec's defaults, unless the
    command gives its own); with ``stall``, also ``--stall-after``, ``--max-cost`` and
    ``--price`` (the stall limit, the cost cap and the model's price)."""
    groups = ("budget", "stall", "cost") if stall else ("budget",)
    shown = {k: str(v) for k, v in (defaults or {}).items()}
    add_settings(p, *groups, defaults=defaults, shown=shown, parse=parse)


def add_cost_options(p: argparse.ArgumentParser) -> None:
    """``--max-cost`` and ``--price``: the run's cost cap and the model's price."""
    add_settings(p, "cost")


def add_max_cost(p: argparse.ArgumentParser) -> None:
    """``resume --max-cost``: a new cap for a run that stopped at its own."""
    add_settings(
        p,
        "max_cost",
        notes={
            "max_cost": "on resume: a run that stopped at its cap (cost_limit) goes on up to "
            "this one (the cost so far counts)"
        },
    )


def budget_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The RunSpec fields :func:`add_budget_options` gave (those given only)."""
    return spec_fields(args, "budget", "stall", "cost")


# --------------------------------------------------------------------------- the desktop


def add_connection_options(p: argparse.ArgumentParser) -> None:
    """``--vnc-user``, ``--vnc-ca``, ``--connect-timeout``: how to log in to the VNC server."""
    add_settings(p, "connection")


def add_screen_region(p: argparse.ArgumentParser) -> None:
    """``--screen-region``: the part of the framebuffer that is the screen."""
    add_settings(p, "screen")


def add_vnc(p: argparse.ArgumentParser, *, default: str) -> None:
    """``--vnc HOST::PORT`` (``default``: how the command names its default desktop)."""
    add_settings(p, "vnc", shown={"vnc_server": default})


def add_rdp_options(p: argparse.ArgumentParser, *, default_help: str) -> None:
    """``--rdp`` and the ``--rdp-*`` options."""
    add_settings(p, "rdp", notes={"rdp_server": default_help})
    add_rdp_session_options(p)


def add_rdp_session_options(p: argparse.ArgumentParser) -> None:
    """The ``--rdp-*`` options (how to log in to an RDP host and the session's shape), without
    ``--rdp`` itself (``vnc-use worker`` takes several hosts)."""
    add_settings(p, "rdp_session", "rdp_login")


def add_login_and_paste(p: argparse.ArgumentParser) -> None:
    """``--rdp-allow-unverified-login`` and ``--rdp-paste-text`` (left out: the run's own)."""
    add_settings(p, "rdp_login")


def add_password_envs(p: argparse.ArgumentParser, *which: str) -> None:
    """``--vnc-password-env`` / ``--rdp-password-env``: the variables that hold the passwords
    on the side that acts (default: all of them)."""
    add_settings(p, *(which or ("password_env",)))


def video_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The RunSpec fields of ``--video`` / ``--no-video`` / ``--video-fps`` that were given
    (the others stay the spec's: its default, or the recorded run's)."""
    return spec_fields(args, "recording")


def desktop_target(
    args: argparse.Namespace, saved: DesktopTarget | None = None, *, local: bool = True
) -> DesktopTarget:
    """The desktop the options name, over a recorded run's (``saved``): ``--vnc`` /
    ``--rdp``, else the saved one, else the local desktop (``local``) or the default
    address; the options given (and ``VNC_USERNAME`` / ``RDP_USERNAME``) over the saved ones."""
    vnc, rdp = getattr(args, "vnc", None), getattr(args, "rdp", None)
    if vnc and rdp:
        raise ConfigError("--vnc and --rdp were both given; a run uses one desktop")
    target = saved or DesktopTarget(local=local)
    if vnc:  # a VNC server (on a run that had an RDP desktop too: that server now)
        target = replace(
            target, vnc_server=vnc, local=False, rdp_server=None, label=None, local_desktop_dir=None
        )
    elif rdp:
        target = replace(target, rdp_server=rdp, local=False, local_desktop_dir=None)
    return replace(target, **_given(args, target))


def _given(args: argparse.Namespace, target: DesktopTarget) -> dict[str, Any]:
    """The desktop fields the options (and the user-name variables) set; the address
    (``--vnc`` / ``--rdp``) is :func:`desktop_target`'s."""
    given = {
        k: v
        for k, v in spec_fields(args, owner=DesktopTarget).items()
        if k not in ("vnc_server", "rdp_server", "rdp_username")
    }
    user = getattr(args, "vnc_user", None) or config.vnc_username()
    if user:
        given["vnc_username"] = user
    if target.rdp_server:
        user = getattr(args, "rdp_user", None) or config.rdp_username()
        if user:
            given["rdp_username"] = user
    return given
