"""The desktop of one leg of a served run: the VNC server, or a FreeRDP bridge to the RDP one.

A spec with ``rdp_server`` (:class:`~vnc_use.agent.spec.RunSpec`) gets a new bridge per leg
(:class:`~vnc_use.desktops.rdp.RdpBridge`, its FreeRDP log in the run folder); the RDP
password comes from the server's environment variable ``rdp_password_env`` and is never
stored. :class:`~vnc_use.agent.serve.LiveRun` stops the bridge when the leg ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vnc_use import config as env
from vnc_use.agent.spec import RunSpec
from vnc_use.desktops.region import ScreenRegion
from vnc_use.record import run_record
from vnc_use.record.folder import RunFolder

if TYPE_CHECKING:
    from vnc_use.desktops.rdp import RdpBridge
    from vnc_use.desktops.vnc import VNCController

__all__ = ["connect_leg"]


def connect_leg(
    spec: RunSpec, password: str | None, folder: RunFolder
) -> tuple[VNCController, RdpBridge | None]:
    """Connect the leg's desktop (starting its RDP bridge first when the spec names one);
    a bridge whose desktop cannot be reached is stopped again."""
    from vnc_use.desktops.vnc import VNCController

    controller = VNCController(connect_timeout=spec.connect_timeout)
    controller.screen_region = (
        ScreenRegion.parse(spec.screen_region) if spec.screen_region else None
    )
    options = spec.rdp_options()
    if options is None:
        desktop = controller.connect(
            spec.vnc_server, password, username=spec.vnc_username, ca_file=spec.vnc_ca
        )
        return desktop, None
    from vnc_use.desktops.rdp import RdpBridge

    log_path = folder.path / "freerdp.log"
    bridge = RdpBridge(options, env.named_secret(spec.rdp_password_env), log_path=log_path)
    bridge.start()
    try:
        rdp = bridge.describe()
        run_record.update(folder, vnc_server=rdp["label"], rdp=rdp)
        controller.keyboard = bridge.keyboard()
        return controller.connect(bridge.server, bridge.vnc_password), bridge
    except BaseException:
        bridge.stop()
        raise
