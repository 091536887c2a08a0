"""Ctrl-C for the testing tools that run until a person stops them."""

from __future__ import annotations

import signal

__all__ = ["stop_on_ctrl_c"]


def stop_on_ctrl_c() -> None:
    """Make SIGINT raise KeyboardInterrupt in this process even when it was started with
    SIGINT ignored or blocked (a background job of a non-interactive shell, a CI runner, a
    test process that left it so): a tool stopped with Ctrl-C must stop."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
