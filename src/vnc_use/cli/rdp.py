"""``vnc-use desktop rdp HOST``: an RDP bridge kept up, and its lines in ``desktop status`` /
``down``.

The ``--rdp`` options of the run commands are in :mod:`vnc_use.cli.options`; a run's bridge is
started by :func:`vnc_use.desktops.target.reach`. The password comes from ``RDP_PASSWORD``
only.
"""

from __future__ import annotations

import argparse
from typing import Any

from vnc_use import config
from vnc_use.cli.options import add_login_and_paste
from vnc_use.desktops.target import DesktopTarget

__all__ = ["command_rdp", "down_lines", "register_desktop_rdp", "status_lines"]


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
    add_login_and_paste(p)
    p.set_defaults(func=command_rdp)


def command_rdp(args: argparse.Namespace) -> int:
    """Start the kept bridge (or report the one that runs)."""
    from vnc_use.desktops.rdp_kept import KeptRdpBridge

    target = DesktopTarget(
        rdp_server=args.host,
        rdp_username=args.rdp_user or config.rdp_username(),
        rdp_domain=args.rdp_domain,
        rdp_size=args.rdp_size,
        rdp_cert_fingerprint=args.rdp_cert_fingerprint,
        connect_timeout=args.connect_timeout or DesktopTarget.connect_timeout,
        rdp_paste_text=bool(args.rdp_paste_text),
        rdp_allow_unverified_login=bool(args.rdp_allow_unverified_login),
    )
    options = target.rdp_options()  # a bad address, size or fingerprint fails here
    assert options is not None
    kept = KeptRdpBridge()
    state, started = kept.up(options, config.named_secret(target.rdp_password_env))
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
