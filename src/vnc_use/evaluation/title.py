"""A check for the suite's pages: wait until a window has the title given, for task checks.

    python -m vnc_use.evaluation.title 'Buttons: go' [--startswith] [--timeout S]

A page reports its state in its title; Chromium passes a new title on to its X window a
little later (measured here: more than 100 ms), so the check looks for it a few times (every
0.1 s for ``--timeout`` seconds, default 2) before it fails. Exit status 0: such a window is
there; 1: none (the exit message lists the titles seen).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from collections.abc import Sequence

__all__ = ["main", "window_titles"]

# One window of ``xwininfo -root -tree``: 0x600002 "the title": ("instance" "Class") ...
_NAME_RE = re.compile(r'^\s*0x[0-9a-f]+ "(.*)": \(', re.M)


def window_titles() -> list[str]:
    """The names of every window on ``$DISPLAY``."""
    out = subprocess.run(
        ["xwininfo", "-root", "-tree"], capture_output=True, text=True, timeout=10, check=False
    ).stdout
    return _NAME_RE.findall(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vnc_use.evaluation.title")
    parser.add_argument("title")
    parser.add_argument("--startswith", action="store_true", help="a title that starts so")
    parser.add_argument("--timeout", type=float, default=2.0)
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.timeout
    while True:
        titles = window_titles()
        if any(t.startswith(args.title) if args.startswith else t == args.title for t in titles):
            return 0
        if time.monotonic() >= deadline:
            sys.exit(f"no window titled {args.title!r}; titles: {titles}")
        time.sleep(0.1)


if __name__ == "__main__":
    sys.exit(main())
