"""Desktops: where an action becomes input events and the screen becomes a PNG.

- :mod:`~vnc_use.desktops.vnc` -- :class:`~vnc_use.desktops.vnc.VNCController`, the only
  module of the project that talks to vncdotool and Twisted (with its security handshake in
  :mod:`~vnc_use.desktops.rfb_security`);
- :mod:`~vnc_use.desktops.settle` and :mod:`~vnc_use.desktops.png` -- settled screenshots;
- :mod:`~vnc_use.desktops.local`, :mod:`~vnc_use.desktops.xserver`,
  :mod:`~vnc_use.desktops.liveview` -- the local desktop (``vnc-use desktop``) and its live view.

This package module imports nothing heavy.
"""
