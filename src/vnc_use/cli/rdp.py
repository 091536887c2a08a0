"""``--rdp HOST[:PORT]`` and its options: runs on an RDP desktop through a FreeRDP bridge.

:func:`add_options` adds the flags, :func:`bridge_for_run` starts the bridge of a run (a new
one for every ``run``/``resume``/``approve``/``deny``) and always stops it, and
:func:`agent_kwargs` aims the agent at it. The password comes from ``RDP_PASSWORD`` only.
"""

from __future__ import annotations

import argparse
import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vnc_use import config
from vnc_use.desktops.local import parse_size
from vnc_use.errors import ConfigError

__all__ = [
    "add_options",
    "agent_kwargs",
    "bridge_for_run",
    "command_rdp",
    "down_lines",
    "open_bridge",
    "options_from",
    "register_desktop_rdp",
    "status_lines",
]


def add_options(p: argparse.ArgumentParser, *, default_help: str) -> None:
    """``--rdp`` and the ``--rdp-*`` options."""
    p.add_argument(
        "--rdp",
        default=None,
        metavar="HOST[:PORT]",
        help="an RDP desktop (Windows, xrdp), reached through FreeRDP (xfreerdp) rendered into a "
        f"private local VNC desktop; {default_help}",
    )
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
    _add_login_and_paste(p)


def _add_login_and_paste(p: argparse.ArgumentParser) -> None:
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


def options_from(args: argparse.Namespace, saved: dict[str, Any] | None) -> Any:
    """The :class:`~vnc_use.desktops.rdp.RdpOptions` of the command line (over the run's
    saved ones), or None when this is no RDP run."""
    from vnc_use.desktops.rdp import DEFAULT_RDP_SIZE, RdpOptions, RdpTarget, parse_fingerprint

    old: dict[str, Any] = dict((saved or {}).get("rdp") or {})
    server = getattr(args, "rdp", None) or old.get("server")
    if not server:
        return None
    if getattr(args, "vnc", None):
        if getattr(args, "rdp", None):
            raise ConfigError("--vnc and --rdp were both given; a run uses one desktop")
        return None  # --vnc on a run that had an RDP desktop: that VNC server now
    size_text = args.rdp_size or old.get("size")
    pin = args.rdp_cert_fingerprint or old.get("cert_fingerprint")
    timeout = getattr(args, "connect_timeout", None)  # `vnc-use mcp` has none
    return RdpOptions(
        target=RdpTarget.parse(server),
        username=args.rdp_user or config.rdp_username() or old.get("username"),
        domain=args.rdp_domain or old.get("domain"),
        size=parse_size(size_text) if size_text else DEFAULT_RDP_SIZE,
        fingerprint=parse_fingerprint(pin) if pin else None,
        connect_timeout=timeout or (saved or {}).get("connect_timeout") or 5.0,
        allow_unverified_login=_flag(args, old, "allow_unverified_login"),
        paste_text=_flag(args, old, "paste_text"),
    )


def _flag(args: argparse.Namespace, old: dict[str, Any], name: str) -> bool:
    """``--rdp-NAME`` given now, else what the run recorded."""
    given = getattr(args, f"rdp_{name}", None)
    return bool(given if given is not None else old.get(name))


@contextlib.contextmanager
def bridge_for_run(args: argparse.Namespace, saved: dict[str, Any] | None) -> Iterator[Any]:
    """Start the run's RDP bridge (None when this is no RDP run); stop it whatever happens.

    FreeRDP's output goes to the run folder's ``freerdp.log`` (a replay's: its own folder).
    """
    options = options_from(args, saved)
    if options is None:
        yield None
        return
    if args.command == "run" and not args.thread_id:
        args.thread_id = uuid.uuid4().hex[:12]
    if args.command == "replay" and not args.replay_id:  # its log is not the recorded run's
        args.replay_id = uuid.uuid4().hex[:12]
    folder = args.replay_id if args.command == "replay" else args.thread_id
    with open_bridge(options, Path(args.runs_dir) / folder / "freerdp.log") as bridge:
        args.vnc = bridge.server
        args.bridge_passwords = (bridge.vnc_password, bridge.view_password)
        yield bridge


@contextlib.contextmanager
def open_bridge(options: Any, log_path: Path) -> Iterator[Any]:
    """The bridge to ``options``' server: the kept one (``vnc-use desktop rdp HOST``) when it
    runs, left up; else a new one (password: ``RDP_PASSWORD``), stopped whatever happens."""
    from vnc_use.desktops.rdp import RdpBridge
    from vnc_use.desktops.rdp_kept import KeptRdpBridge

    kept = KeptRdpBridge()
    state = kept.running_for(options.target)
    if state is not None:
        yield _KeptInUse(kept, state, options)
        return
    with RdpBridge(options, config.rdp_password(), log_path=log_path) as bridge:
        yield bridge


def agent_kwargs(bridge: Any) -> dict[str, Any]:
    """What the agent needs to run on the bridge (its VNC password is random, per bridge)."""
    return {
        "vnc_server": bridge.server,
        "vnc_password": bridge.vnc_password,
        "keyboard": bridge.keyboard(),
        "rdp": bridge.describe(),
        "lost_reason": lambda: bridge.ended,
        "reconnect_window_s": 0.0,
    }


class _KeptInUse:
    """The kept bridge, as a run sees it (what :func:`agent_kwargs` reads)."""

    def __init__(self, kept: Any, state: dict[str, Any], options: Any) -> None:
        self.kept, self.state = kept, state
        self.server: str = state["server"]
        self.vnc_password: str = kept.password()
        self.view_password: str = kept.password(view_only=True)
        self.paste_text = bool(state["rdp"].get("paste_text"))
        if options.paste_text and not self.paste_text:
            raise ConfigError(
                f"the kept RDP bridge to {state['target']} runs without --rdp-paste-text; "
                "restart it with it: vnc-use desktop down, then vnc-use desktop rdp "
                f"{state['target']} --rdp-paste-text"
            )

    def describe(self) -> dict[str, Any]:
        return dict(self.state["rdp"])

    def keyboard(self) -> Any:
        from vnc_use.desktops.rdp import bridge_keyboard

        return bridge_keyboard(self.paste_text, self.state["display"], self.kept.log_path)

    @property
    def ended(self) -> str | None:
        if self.kept.status().running:
            return None
        return (
            f"the RDP session of the kept bridge to {self.state['target']} ended (see "
            f"{self.kept.log_path}); restart it with: vnc-use desktop rdp {self.state['target']}"
        )


# --------------------------------------------------------------------------- desktop rdp


def register_desktop_rdp(actions: Any) -> None:
    """``vnc-use desktop rdp HOST``: a bridge kept up for watching and several runs."""
    p = actions.add_parser(
        "rdp", help="keep an RDP bridge up (vnc-use view, several runs; stop: desktop down)"
    )
    p.add_argument("host", metavar="HOST[:PORT]", help="the RDP server")
    p.add_argument("--rdp-user", default=None, metavar="USER", help="default: RDP_USERNAME")
    p.add_argument("--rdp-domain", default=None, metavar="DOMAIN")
    p.add_argument("--rdp-size", default=None, metavar="WxH", help="default 1280x800")
    p.add_argument("--rdp-cert-fingerprint", default=None, metavar="SHA256")
    p.add_argument("--connect-timeout", type=float, default=None, metavar="S", help="default 5")
    _add_login_and_paste(p)
    p.set_defaults(func=command_rdp, rdp=None, vnc=None)


def command_rdp(args: argparse.Namespace) -> int:
    """Start the kept bridge (or report the one that runs)."""
    from vnc_use.desktops.rdp_kept import KeptRdpBridge

    args.rdp = args.host
    options = options_from(args, None)
    kept = KeptRdpBridge()
    state, started = kept.up(options, config.rdp_password())
    rdp = state["rdp"]
    what = "started" if started else "already running"
    print(f"RDP bridge {what}: {rdp['label']} at {state['server']} (display {state['display']})")
    if rdp.get("cert_sha256"):
        print(f"  certificate:      SHA-256 {rdp['cert_sha256']} ({rdp.get('cert_trust')})")
    if rdp.get("nla") is False:
        print(f"  login:            {rdp.get('protocol')} without NLA: the server checks it itself")
    print(f"  watch it live:    vnc-use view --vnc {state['server']}")
    print(f'  give it a task:   vnc-use run --rdp {state["target"]} --task "..."')
    print(f"  FreeRDP's log:    {kept.log_path}")
    print("  stop it:          vnc-use desktop down")
    return 0


def status_lines() -> tuple[list[str], bool]:
    """``desktop status``'s lines about the kept bridge, and whether it runs."""
    from vnc_use.desktops.rdp_kept import KeptRdpBridge

    status = KeptRdpBridge().status()
    if status.state is None:
        return [], False
    state = status.state
    how = "running" if status.running else "not running (its session ended; 'desktop down')"
    lines = [f"RDP bridge: {how}: {state['rdp']['label']} at {state['server']}"]
    lines += [f"  {name:<8} {'running' if up else 'gone'}" for name, up in status.alive.items()]
    return lines, status.running


def down_lines() -> list[str]:
    """``desktop down``'s line about the kept bridge (none when there was none)."""
    from vnc_use.desktops.rdp_kept import KeptRdpBridge

    stopped = KeptRdpBridge().down()
    return [f"RDP bridge stopped: {', '.join(stopped)}"] if stopped else []
