"""Desktops: where an action becomes input events and the screen becomes a PNG.

- :mod:`~vnc_use.desktops.base` -- :class:`~vnc_use.desktops.base.Desktop`, the protocol the
  graph and the executor depend on (one method per primitive), and the screenshot types;
- :mod:`~vnc_use.desktops.vnc` -- :class:`~vnc_use.desktops.vnc.VNCController`, the only
  module of the project that talks to vncdotool and Twisted (with its security handshake in
  :mod:`~vnc_use.desktops.rfb_security`);
- :mod:`~vnc_use.desktops.settle` and :mod:`~vnc_use.desktops.png` -- settled screenshots;
- :mod:`~vnc_use.desktops.address` -- VNC addresses (``host::port``), without Twisted;
- :mod:`~vnc_use.desktops.local`, :mod:`~vnc_use.desktops.liveview` -- the local desktop
  (``vnc-use desktop``) and its live view; :mod:`~vnc_use.desktops.xserver` -- the Xvnc
  start-up, ports and displays it shares with the test desktops; :mod:`~vnc_use.desktops.service`
  -- the start/stop context manager of servers and desktops;
- :mod:`~vnc_use.desktops.rdp` -- RDP desktops through a private FreeRDP bridge (``--rdp``),
  with :mod:`~vnc_use.desktops.rdp_probe` (the certificate and security check before FreeRDP
  starts), :mod:`~vnc_use.desktops.rdp_kept` (``vnc-use desktop rdp``) and
  :mod:`~vnc_use.desktops.keyboard` (what a scancode-only keyboard path can type).

This package module imports nothing heavy.
"""
