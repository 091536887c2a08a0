"""Which desktop a run acts on and how to reach it: :class:`DesktopTarget`, and :func:`reach`.

A :class:`DesktopTarget` is plain JSON and holds no secret: a VNC address (or the local
desktop vnc-use starts itself, or an RDP host reached through a FreeRDP bridge), the user name,
the *name* of the environment variable with the password, the CA file, the connect timeout, the
screen region, the RDP session's size/domain/certificate pin, and a label. Every front door
builds one from its own input; :func:`reach` is the one place that turns it into a desktop the
agent can connect to (:class:`ReachedDesktop`), and the one place that knows where passwords
come from:

- a VNC address: the password given by the caller, else the managed local desktop's (or the
  kept RDP bridge's) own when the address is theirs, else the variable ``vnc_password_env``;
- the local desktop (``local``): started, or reused when it runs;
- an RDP host: the kept bridge (``vnc-use desktop rdp HOST``) when it runs for that host, else a
  new bridge for as long as the ``with`` block lasts (password: the variable
  ``rdp_password_env``).

A caller that needs a model checks the model first (its API key): :func:`reach` may start a
desktop.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vnc_use import config
from vnc_use.desktops.region import ScreenRegion
from vnc_use.errors import ConfigError, VncConnectionError
from vnc_use.setting import setting

if TYPE_CHECKING:
    from vnc_use.desktops.keyboard import KeyboardLimits
    from vnc_use.desktops.rdp import RdpOptions
    from vnc_use.desktops.vnc import VNCController

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_VNC_SERVER",
    "DesktopTarget",
    "ReachedDesktop",
    "managed_password",
    "reach",
    "view_password",
]

DEFAULT_VNC_SERVER = "localhost::5901"
"""The VNC address of a target that names none (``VncUseAgent()``, a served spec without one)."""
DEFAULT_CONNECT_TIMEOUT = 5.0


@dataclass
class DesktopTarget:
    """Where a run's desktop is and how to reach it (JSON, never a secret; see the module)."""

    vnc_server: str = setting(
        DEFAULT_VNC_SERVER,
        where=True,
        group="vnc",
        flag="--vnc",
        metavar="HOST::PORT",
        help="the VNC server's address, HOST::PORT; ignored with local or an RDP desktop",
    )
    local: bool = False
    """The local desktop vnc-use starts (or reuses) on the machine the run acts from."""
    vnc_username: str | None = setting(
        None,
        where=True,
        group="connection",
        flag="--vnc-user",
        metavar="USER",
        shown_default="the VNC_USERNAME environment variable",
        help="user name for servers that log in with one (macOS Screen Sharing, VeNCrypt "
        "Plain such as wayvnc)",
    )
    vnc_password_env: str = setting(
        "VNC_PASSWORD",
        where=True,
        group="password_env",
        flag="--vnc-password-env",
        metavar="NAME",
        cli_default=True,
        help="the environment variable that holds the VNC password (with --server: the "
        "server's; the password itself never travels)",
    )
    vnc_ca: str | None = setting(
        None,
        where=True,
        group="connection",
        flag="--vnc-ca",
        metavar="FILE",
        shown_default="the system's trust store",
        help="PEM file of the CA that signed the VNC server's TLS certificate (VeNCrypt X509 "
        "types)",
    )
    connect_timeout: float = setting(
        DEFAULT_CONNECT_TIMEOUT,
        where=True,
        group="connection",
        flag="--connect-timeout",
        metavar="S",
        parse="seconds",
        help="seconds to wait for the VNC connection and handshake",
    )
    screen_region: str | None = setting(
        None,
        where=True,
        group="screen",
        flag="--screen-region",
        metavar="WxH+X+Y",
        help="the part of the VNC framebuffer that is the screen, for servers that export "
        "more (several monitors, x11vnc -ncache); kept for approve/deny/resume",
    )
    rdp_server: str | None = setting(
        None,
        where=True,
        group="rdp",
        flag="--rdp",
        metavar="HOST[:PORT]",
        help="an RDP desktop (Windows, xrdp), reached through FreeRDP (xfreerdp) rendered into "
        "a private local VNC desktop",
    )
    rdp_username: str | None = setting(
        None,
        where=True,
        group="rdp_session",
        flag="--rdp-user",
        metavar="USER",
        shown_default="RDP_USERNAME",
        help="RDP user name; the password comes from RDP_PASSWORD only",
    )
    rdp_password_env: str = setting(
        "RDP_PASSWORD",
        where=True,
        group="password_env",
        flag="--rdp-password-env",
        metavar="NAME",
        cli_default=True,
        help="the environment variable that holds the RDP password (with --server --rdp: "
        "the server's)",
    )
    rdp_domain: str | None = setting(
        None,
        where=True,
        group="rdp_session",
        flag="--rdp-domain",
        metavar="DOMAIN",
        help="RDP (Windows) domain",
    )
    rdp_size: str | None = setting(
        None,
        where=True,
        group="rdp_session",
        flag="--rdp-size",
        metavar="WxH",
        shown_default="1280x800",
        help="size of the remote session",
    )
    rdp_cert_fingerprint: str | None = setting(
        None,
        where=True,
        group="rdp_session",
        flag="--rdp-cert-fingerprint",
        metavar="SHA256",
        shown_default="trust on first use, recorded under vnc-use's state folder",
        help="accept only the RDP server certificate with this SHA-256",
    )
    rdp_paste_text: bool = setting(
        False,
        where=True,
        group="rdp_login",
        flag="--rdp-paste-text",
        kind="switch",
        help="text the RDP keyboard cannot type (beyond US ASCII) goes through the RDP "
        "clipboard and Ctrl+V; the clipboard is restored after",
    )
    rdp_allow_unverified_login: bool = setting(
        False,
        where=True,
        group="rdp_login",
        flag="--rdp-allow-unverified-login",
        kind="switch",
        help="give the credentials to an RDP server without NLA (such as xrdp), which checks "
        "them in its own login screen: a wrong password then cannot end the run as an error",
    )
    label: str | None = None
    """How records name the desktop (default: its address)."""
    local_desktop_dir: str | None = None
    """The state folder of the managed local desktop whose address ``vnc_server`` is (what
    run.json recorded): a later ``approve`` / ``resume`` from a shell whose local desktop
    state is elsewhere finds its password there, or says so in one line."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DesktopTarget:
        """A target from its JSON (unknown keys are ignored, ``None`` means the default)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known and v is not None})

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def check(self) -> None:
        """Refuse a target that cannot work, with one line naming the fix."""
        if not self.connect_timeout > 0:
            raise ConfigError(f"connect_timeout must be positive, got {self.connect_timeout}")
        if self.local and self.rdp_server:
            raise ConfigError("the local desktop and an RDP desktop were both asked for")
        if self.screen_region is not None:
            ScreenRegion.parse(self.screen_region)
        if not self.local and not self.rdp_server:
            from vnc_use.desktops.address import parse_server

            parse_server(self.vnc_server)
        self.rdp_options()  # a bad RDP address, size or fingerprint fails here

    @property
    def region(self) -> ScreenRegion | None:
        return ScreenRegion.parse(self.screen_region) if self.screen_region else None

    def rdp_options(self) -> RdpOptions | None:
        """The :class:`~vnc_use.desktops.rdp.RdpOptions` of an RDP target (None otherwise)."""
        if not self.rdp_server:
            return None
        from vnc_use.desktops.local import parse_size
        from vnc_use.desktops.rdp import DEFAULT_RDP_SIZE, RdpOptions, RdpTarget, parse_fingerprint

        pin = self.rdp_cert_fingerprint
        return RdpOptions(
            target=RdpTarget.parse(self.rdp_server),
            username=self.rdp_username,
            domain=self.rdp_domain,
            size=parse_size(self.rdp_size) if self.rdp_size else DEFAULT_RDP_SIZE,
            fingerprint=parse_fingerprint(pin) if pin else None,
            connect_timeout=self.connect_timeout,
            allow_unverified_login=self.rdp_allow_unverified_login,
            paste_text=self.rdp_paste_text,
        )

    @property
    def lease_key(self) -> str:
        """The desktop a run's lease is on: the RDP server (as ``host::port``: one address
        cannot be both), else the VNC server."""
        options = self.rdp_options()
        if options is None:
            return self.vnc_server
        host, port = options.target.host, options.target.port
        return f"[{host}]::{port}" if ":" in host else f"{host}::{port}"


@dataclass
class ReachedDesktop:
    """A target made reachable: the VNC server to connect to and how (see :func:`reach`)."""

    server: str
    password: str | None = None
    username: str | None = None
    ca_file: str | None = None
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    screen_region: ScreenRegion | None = None
    keyboard: KeyboardLimits | None = None
    """Limits of the keyboard path behind the server (an RDP bridge's)."""
    rdp: dict[str, Any] | None = None
    """The RDP connection behind the server (an RDP bridge's settings, no secrets)."""
    lost_reason: Callable[[], str | None] | None = None
    """Says why the desktop went away for good (the RDP session ended)."""
    view_password: str | None = None
    """A view-only password the server enforces (the managed desktop's, a bridge's)."""
    notice: str | None = None
    """One line a door may show (the local desktop was started / is running)."""
    local_desktop_dir: str | None = None
    """The state folder of the managed local desktop this is (run.json records it)."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """What records name: ``rdp://HOST:PORT (via FreeRDP)`` behind an RDP bridge, else
        the VNC address."""
        return str(self.rdp["label"]) if self.rdp else self.server

    @property
    def bridged(self) -> bool:
        return self.rdp is not None

    def connect(self) -> VNCController:
        """A new connection to the server (an RDP session that ended: one line why)."""
        from vnc_use.desktops.vnc import VNCController

        reason = self.lost_reason() if self.lost_reason is not None else None
        if reason:
            raise VncConnectionError(reason)
        controller = VNCController(connect_timeout=self.connect_timeout)
        controller.screen_region = self.screen_region
        controller.keyboard = self.keyboard
        return controller.connect(
            self.server, self.password, username=self.username, ca_file=self.ca_file
        )


def managed_password(server: str | None) -> str | None:
    """The managed local desktop's full password when ``server`` is its address (or the
    kept RDP bridge's password when it is that bridge's), else None."""
    if not server:
        return None
    from vnc_use.desktops.local import LocalDesktop
    from vnc_use.desktops.rdp_kept import KeptRdpBridge

    return LocalDesktop().password_for(server) or KeptRdpBridge().password_for(server)


def view_password(server: str) -> str | None:
    """The view-only password of the managed desktop or the kept RDP bridge at ``server``
    (None: it is neither)."""
    return _view_password(server) if managed_password(server) else None


def _view_password(server: str, state_dir: str | None = None) -> str | None:
    """The view-only password of the managed desktop or the kept bridge at ``server``."""
    from vnc_use.desktops.local import LocalDesktop
    from vnc_use.desktops.rdp_kept import KeptRdpBridge

    desk = LocalDesktop(state_dir=state_dir)
    if desk.password_for(server) is not None:
        return desk.credentials().view_password
    kept = KeptRdpBridge()
    if kept.password_for(server) is not None:
        return kept.password(view_only=True)
    return None


def _recorded_local(target: DesktopTarget, server: str) -> tuple[str | None, str | None]:
    """The password and state folder of the managed local desktop ``target`` recorded (a
    run started in another shell, whose local desktop state is elsewhere), when it still
    runs at ``server``; a one-line ``ConfigError`` naming the folder when it cannot be used."""
    from vnc_use.desktops.local import LocalDesktop

    recorded = target.local_desktop_dir
    if not recorded:
        return None, None
    here = LocalDesktop()
    if here.state_dir.resolve() == Path(recorded).expanduser().resolve():
        why = "it does not run there any more"
    else:
        try:
            password = LocalDesktop(state_dir=recorded).password_for(server)
        except (OSError, ValueError):
            password = None
        if password is not None:
            return password, recorded
        readable = Path(recorded, "credentials.json").is_file()
        why = (
            "it does not run there any more"
            if readable
            else f"that folder is not readable here (this shell's is {here.state_dir})"
        )
    raise ConfigError(
        f"the run acted on the local desktop at {server} whose state folder is {recorded}, "
        f"and {why}: continue it from a shell that sees that folder (VNC_USE_DESKTOP_DIR="
        f"{recorded}), with the desktop up (vnc-use desktop up)"
    )


def _vnc(target: DesktopTarget, server: str, password: str | None) -> ReachedDesktop:
    from vnc_use.desktops.local import LocalDesktop
    from vnc_use.desktops.rdp_kept import KeptRdpBridge

    desk = LocalDesktop()
    local_password = desk.password_for(server)
    state_dir = str(desk.state_dir) if local_password is not None else None
    managed = local_password or KeptRdpBridge().password_for(server)
    variable = config.named_secret(target.vnc_password_env)
    if managed is None and password is None and variable is None:
        managed, state_dir = _recorded_local(target, server)
    return ReachedDesktop(
        server=server,
        password=password or managed or variable,
        username=target.vnc_username or None,
        ca_file=target.vnc_ca or None,
        connect_timeout=target.connect_timeout,
        screen_region=target.region,
        view_password=_view_password(server, state_dir) if managed else None,
        local_desktop_dir=state_dir,
    )


def _local(target: DesktopTarget) -> ReachedDesktop:
    from vnc_use.desktops.local import LocalDesktop

    state, started = LocalDesktop().up()
    reached = _vnc(target, state.server, None)
    what = "started" if started else "running"
    reached.notice = (
        f"local desktop ({what}): {state.server} (display {state.display}, "
        f"{state.width}x{state.height}); watch it with: vnc-use view"
    )
    reached.extra["started"] = started
    return reached


@contextlib.contextmanager
def _rdp(target: DesktopTarget, log_path: Path | None) -> Iterator[ReachedDesktop]:
    from vnc_use.desktops.rdp import RdpBridge, bridge_keyboard
    from vnc_use.desktops.rdp_kept import KeptRdpBridge

    options = target.rdp_options()
    assert options is not None
    kept = KeptRdpBridge()
    state = kept.running_for(options.target)
    if state is not None:  # the kept bridge: left up
        pastes = bool(state["rdp"].get("paste_text"))
        if options.paste_text and not pastes:
            raise ConfigError(
                f"the kept RDP bridge to {state['target']} runs without --rdp-paste-text; "
                "restart it with it: vnc-use desktop down, then vnc-use desktop rdp "
                f"{state['target']} --rdp-paste-text"
            )

        def gone() -> str | None:
            if kept.status().running:
                return None
            return (
                f"the RDP session of the kept bridge to {state['target']} ended (see "
                f"{kept.log_path}); restart it with: vnc-use desktop rdp {state['target']}"
            )

        yield ReachedDesktop(
            server=str(state["server"]),
            password=kept.password(),
            view_password=kept.password(view_only=True),
            rdp=dict(state["rdp"]),
            lost_reason=gone,
            connect_timeout=target.connect_timeout,
            keyboard=bridge_keyboard(pastes, state["display"], kept.log_path),
        )
        return
    password = config.named_secret(target.rdp_password_env)
    log_path = log_path or config.rdp_state_dir() / "freerdp.log"
    with RdpBridge(options, password, log_path=log_path) as bridge:
        yield ReachedDesktop(
            server=bridge.server,
            password=bridge.vnc_password,
            view_password=bridge.view_password,
            rdp=dict(bridge.describe()),
            lost_reason=lambda: bridge.ended,
            connect_timeout=target.connect_timeout,
            keyboard=bridge.keyboard(),
        )


@contextlib.contextmanager
def reach(
    target: DesktopTarget, *, password: str | None = None, log_path: Path | None = None
) -> Iterator[ReachedDesktop]:
    """The target, reachable for as long as the block lasts (see the module's doc).

    ``password`` is a VNC password the caller was given (``--vnc-password``); ``log_path`` is
    where a new RDP bridge writes FreeRDP's output."""
    target.check()
    if target.rdp_server:
        with _rdp(target, log_path) as reached:
            yield reached
        return
    if target.local:
        yield _local(target)
        return
    yield _vnc(target, target.vnc_server, password)
