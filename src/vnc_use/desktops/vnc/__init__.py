"""VNC backend: :class:`~vnc_use.desktops.vnc.VNCController` turns actions into RFB input
events and frames.

This package is the only place in vnc-use that imports vncdotool and Twisted. It is three
modules along its seams: :mod:`~vnc_use.desktops.vnc.keys` (key names to keysyms),
:mod:`~vnc_use.desktops.vnc.client` (the connection: vncdotool's client with vnc-use's own
security handshake, TLS, the reactor thread, connect errors) and
:mod:`~vnc_use.desktops.vnc.controller` (:class:`VNCController`, the Desktop).

How it uses vncdotool (see ``reference/vncdotool-notes.md`` for the measured traps):

* vncdotool runs the Twisted reactor in one daemon thread. Every operation on a connection
  runs *inside that reactor thread* (it is the client's single owner thread); callers on any
  thread hand it over with ``reactor.callFromThread`` and wait on a per-call
  :class:`concurrent.futures.Future` with a timeout. vncdotool's ``ThreadedVNCClientProxy``
  and its shared result queue are not used for calls, so a late result can never be taken
  by the next call, and ``None``-returning methods such as ``keyEvent`` are safe.
* A per-controller lock serialises operations, so a click (move, press, release) is never
  interleaved with another thread's input.
* Every wait has a deadline. After a timeout the connection is aborted and marked dead.
* ``api.shutdown()`` is registered once with :mod:`atexit` (the reactor cannot restart).
* ``TCP_NODELAY`` is set on the socket (vncdotool's own check never fires).
* The security handshake is vnc-use's own (``_Client``): the type is chosen by
  :mod:`vnc_use.desktops.rfb_security` among those whose credentials were given (VeNCrypt TLS
  first), VeNCrypt 0.2 and Apple's type 30 are spoken here, nothing ever reads a terminal,
  and every failure ends the connect at once with one line naming host and TCP port.
* The connect is bounded by ``connect_timeout``; its message says how far it got (no TCP
  connection, no VNC greeting, or a greeting but no completed handshake).
"""

from vnc_use.desktops.address import parse_server
from vnc_use.desktops.vnc.controller import (
    INPUT_SETTLE,
    PIXELS_PER_NOTCH,
    UNMAPPED_KEY_PAUSE,
    VNCController,
)
from vnc_use.desktops.vnc.keys import to_vnc_keys

__all__ = [
    "INPUT_SETTLE",
    "PIXELS_PER_NOTCH",
    "UNMAPPED_KEY_PAUSE",
    "VNCController",
    "parse_server",
    "to_vnc_keys",
]
