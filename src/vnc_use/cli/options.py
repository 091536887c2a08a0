"""The options several commands share, defined once: the model, the budgets, the desktop.

``run`` (and ``--server``), ``eval``, ``mcp``, ``replay`` and ``approve``/``deny``/``resume``
add them with the ``add_*`` functions; :func:`model_fields`, :func:`budget_fields` and
:func:`desktop_target` read them back into a :class:`~vnc_use.runs.spec.RunSpec`'s fields and
its :class:`~vnc_use.desktops.target.DesktopTarget` (the door builders in
:mod:`vnc_use.cli.spec`). Nothing is written onto the parsed arguments.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from vnc_use import config
from vnc_use.desktops.target import DesktopTarget
from vnc_use.errors import ConfigError
from vnc_use.providers.pricing import parse_price

__all__ = [
    "add_budget_options",
    "add_connection_options",
    "add_cost_options",
    "add_login_and_paste",
    "add_max_cost",
    "add_model_options",
    "add_rdp_options",
    "add_rdp_session_options",
    "budget_fields",
    "desktop_target",
    "model_fields",
    "non_negative_int",
    "positive_seconds",
    "positive_usd",
    "price_arg",
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


# --------------------------------------------------------------------------- the model

_MODEL_FLAGS = (
    "provider",
    "model",
    "tool_version",
    "base_url",
    "dialect",
    "keep_screenshots",
    "environment",
    "model_family",
    "keep_browser_actions",
    "api_version",
)


def add_model_options(p: argparse.ArgumentParser) -> None:
    """Who serves the model and how it is configured (``--provider`` ... ``--exclude``)."""
    p.add_argument(
        "--provider",
        default=None,
        metavar="NAME",
        help="who serves the model: gemini (default), anthropic (Claude), openai, or "
        "openai-compatible (any OpenAI-compatible server: LM Studio, Ollama, vLLM, llama.cpp); "
        "left out, a model id starting claude- means anthropic and gpt- openai; kept for "
        "approve/deny/resume",
    )
    p.add_argument(
        "--tool-version",
        default=None,
        metavar="VERSION",
        help="anthropic: the computer tool to send instead of the model's own "
        "(computer_toolset_20260801, computer_20251124, computer_20250124); kept for "
        "approve/deny/resume",
    )
    p.add_argument(
        "--model",
        default=None,
        help="model id: for Gemini e.g. gemini-3.5-flash (its family decides the action set); "
        "for openai-compatible the id the server lists at BASE_URL/models",
    )
    p.add_argument(
        "--base-url",
        default=None,
        metavar="URL",
        help="openai-compatible: the server's address, e.g. http://localhost:1234/v1 (LM Studio), "
        "http://localhost:11434/v1 (Ollama), http://localhost:8000/v1 (vLLM); the API key, if "
        "any, comes from OPENAI_API_KEY and is never recorded",
    )
    p.add_argument(
        "--dialect",
        default=None,
        metavar="NAME",
        help="openai-compatible: how the model answers: tools, qwen3-vl, qwen2.5-vl, ui-tars, "
        "holo, ui-venus, opencua (run vnc-use calibrate to check) "
        "(default: from the model id, else tools)",
    )
    p.add_argument(
        "--keep-screenshots",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="send the model only the last N screenshots (default: the provider's, 3 for "
        "Gemini and Claude, 2 for openai-compatible)",
    )
    p.add_argument(
        "--environment",
        choices=("browser", "desktop"),
        default=None,
        help="what the model is driving (default: the model family's; desktop for 3.5 Flash)",
    )
    p.add_argument(
        "--model-family",
        default=None,
        metavar="NAME",
        help="action set for a model id vnc-use does not know: gemini-2.5, gemini-3, gemini-3.5",
    )
    p.add_argument(
        "--keep-browser-actions",
        action="store_true",
        help="on a desktop, keep navigate/search/go_back/... (2.5 and 3 Flash families)",
    )
    p.add_argument(
        "--api-version",
        default=None,
        metavar="VERSION",
        help="Gemini API version requests go to (default: the GEMINI_API_VERSION environment "
        "variable, else v1beta, the version of Google's Computer Use examples); kept for "
        "approve/deny/resume",
    )
    p.add_argument("--exclude", nargs="+", default=[], metavar="NAME", help="actions to forbid")


def model_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The RunSpec fields :func:`add_model_options` gave (those given only)."""
    fields = {name: getattr(args, name) for name in _MODEL_FLAGS}
    fields["excluded_actions"] = list(args.exclude)
    return {k: v for k, v in fields.items() if v is not None}


# --------------------------------------------------------------------------- budgets


def add_budget_options(
    p: argparse.ArgumentParser,
    *,
    step_limit: int | None = None,
    step_type: Any = int,
    timeout: float | None = None,
    timeout_help: str = "seconds budget",
    stall_help: str | None = None,
    stall_type: Any = non_negative_int,
) -> None:
    """``--step-limit`` and ``--timeout`` (left out: the run spec's defaults, unless the
    command has its own); with ``stall_help``, also ``--stall-after``, ``--max-cost`` and
    ``--price`` (the stall limit, the cost cap and the model's price)."""
    p.add_argument("--step-limit", type=step_type, default=step_limit, metavar="N")
    p.add_argument("--timeout", type=float, default=timeout, metavar="S", help=timeout_help)
    if stall_help is not None:
        p.add_argument("--stall-after", type=stall_type, default=None, metavar="N", help=stall_help)
        add_cost_options(p)


def add_cost_options(p: argparse.ArgumentParser) -> None:
    """``--max-cost`` and ``--price``: the run's cost cap and the model's price."""
    p.add_argument(
        "--max-cost",
        type=positive_usd,
        default=None,
        metavar="USD",
        help="stop the run (status cost_limit, exit 5) before a model call once its cost "
        "reached this; resume --max-cost HIGHER continues it",
    )
    p.add_argument(
        "--price",
        type=price_arg,
        default=None,
        metavar="INPUT/OUTPUT",
        help="the model's price in USD per million input and output tokens, e.g. 1.25/10 "
        "(default: vnc-use's price table; a model not in it costs 'unknown', a local "
        "openai-compatible model 0)",
    )


def add_max_cost(p: argparse.ArgumentParser) -> None:
    """``resume --max-cost``: a new cap for a run that stopped at its own."""
    p.add_argument(
        "--max-cost",
        type=positive_usd,
        default=None,
        metavar="USD",
        help="a new cost cap: a run that stopped at its cap (cost_limit) goes on up to "
        "this one (the cost so far counts)",
    )


def budget_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The RunSpec fields :func:`add_budget_options` gave (those given only)."""
    price = getattr(args, "price", None)
    fields = {
        "step_limit": args.step_limit,
        "seconds_timeout": args.timeout,
        "stall_after": getattr(args, "stall_after", None),
        "max_cost": getattr(args, "max_cost", None),
        "price": [float(price[0]), float(price[1])] if price else None,
    }
    return {k: v for k, v in fields.items() if v is not None}


# --------------------------------------------------------------------------- the desktop


def add_connection_options(
    p: argparse.ArgumentParser, *, user_help: str | None = None, ca_help: str | None = None
) -> None:
    """``--vnc-user``, ``--vnc-ca``, ``--connect-timeout``: how to log in to the VNC server."""
    p.add_argument(
        "--vnc-user",
        default=None,
        metavar="USER",
        help=user_help
        or "user name for servers that log in with one (macOS Screen Sharing, VeNCrypt "
        "Plain such as wayvnc); default: the VNC_USERNAME environment variable",
    )
    p.add_argument(
        "--vnc-ca",
        default=None,
        metavar="FILE",
        help=ca_help
        or "PEM file of the CA that signed the VNC server's TLS certificate (VeNCrypt X509 "
        "types); default: the system's trust store",
    )
    p.add_argument(
        "--connect-timeout",
        type=positive_seconds,
        default=None,
        metavar="S",
        help="seconds to wait for the VNC connection and handshake (default 5)",
    )


def add_screen_region(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--screen-region",
        default=None,
        metavar="WxH+X+Y",
        help="the part of the VNC framebuffer that is the screen, for servers that export "
        "more (several monitors, x11vnc -ncache); kept for approve/deny/resume",
    )


def add_rdp_options(p: argparse.ArgumentParser, *, default_help: str) -> None:
    """``--rdp`` and the ``--rdp-*`` options."""
    p.add_argument(
        "--rdp",
        default=None,
        metavar="HOST[:PORT]",
        help="an RDP desktop (Windows, xrdp), reached through FreeRDP (xfreerdp) rendered into a "
        f"private local VNC desktop; {default_help}",
    )
    add_rdp_session_options(p)


def add_rdp_session_options(p: argparse.ArgumentParser) -> None:
    """The ``--rdp-*`` options (how to log in to an RDP host and the session's shape), without
    ``--rdp`` itself (``vnc-use worker`` takes several hosts)."""
    p.add_argument(
        "--rdp-user",
        default=None,
        metavar="USER",
        help="RDP user name (default: RDP_USERNAME); the password comes from RDP_PASSWORD only",
    )
    p.add_argument("--rdp-domain", default=None, metavar="DOMAIN", help="RDP (Windows) domain")
    p.add_argument(
        "--rdp-size",
        default=None,
        metavar="WxH",
        help="size of the remote session (default 1280x800)",
    )
    p.add_argument(
        "--rdp-cert-fingerprint",
        default=None,
        metavar="SHA256",
        help="accept only the RDP server certificate with this SHA-256 (default: trust on "
        "first use, recorded under vnc-use's state folder)",
    )
    add_login_and_paste(p)


def add_login_and_paste(p: argparse.ArgumentParser) -> None:
    """``--rdp-allow-unverified-login`` and ``--rdp-paste-text`` (left out: the run's own)."""
    p.add_argument(
        "--rdp-allow-unverified-login",
        action="store_true",
        default=None,
        help="give the credentials to an RDP server without NLA (such as xrdp), which checks "
        "them in its own login screen: a wrong password then cannot end the run as an error",
    )
    p.add_argument(
        "--rdp-paste-text",
        action="store_true",
        default=None,
        help="text the RDP keyboard cannot type (beyond US ASCII) goes through the RDP "
        "clipboard and Ctrl+V; the clipboard is restored after",
    )


def video_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The RunSpec fields of ``--video`` / ``--no-video`` / ``--video-fps`` that were given
    (the others stay the spec's: its default, or the recorded run's)."""
    fields = {"video": args.video, "video_fps": args.video_fps}
    return {k: v for k, v in fields.items() if v is not None}


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
    """The desktop fields the options (and the user-name variables) set."""
    read: Mapping[str, Any] = {
        "vnc_username": getattr(args, "vnc_user", None) or config.vnc_username(),
        "vnc_ca": getattr(args, "vnc_ca", None),
        "connect_timeout": getattr(args, "connect_timeout", None),
        "screen_region": getattr(args, "screen_region", None),
        "vnc_password_env": getattr(args, "vnc_password_env", None),
        "rdp_password_env": getattr(args, "rdp_password_env", None),
        "rdp_domain": getattr(args, "rdp_domain", None),
        "rdp_size": getattr(args, "rdp_size", None),
        "rdp_cert_fingerprint": getattr(args, "rdp_cert_fingerprint", None),
        "rdp_paste_text": getattr(args, "rdp_paste_text", None),
        "rdp_allow_unverified_login": getattr(args, "rdp_allow_unverified_login", None),
    }
    given = {k: v for k, v in read.items() if v is not None}
    if target.rdp_server:
        user = getattr(args, "rdp_user", None) or config.rdp_username()
        if user:
            given["rdp_username"] = user
    return given
