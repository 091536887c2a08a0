"""Backends: where an action becomes input events on a real desktop.

``vnc_use.backends.vnc`` holds :class:`~vnc_use.backends.vnc.VNCController`, the only module
of the project that talks to vncdotool and Twisted. This package module imports nothing heavy.
"""
