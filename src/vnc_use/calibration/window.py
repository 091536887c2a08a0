"""The calibration window: a full-screen Tk canvas showing the targets of a
``calibration.json``, each a coloured box with its label in the middle.

Run by ``vnc-use calibrate`` on the desktop being calibrated::

    DISPLAY=:1 python -m vnc_use.calibration.window --layout RUN/calibration.json --ready FILE

It is override-redirect at ``+0+0`` and covers the whole screen (no window manager needed);
once it is mapped it writes ``{"ready": true, "width": W, "height": H}`` to ``--ready``. Each
left click draws a small cross where it landed, so a person watching sees the model's aim.
This module imports :mod:`tkinter` only when the window runs.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["COLORS", "main"]

_BACKGROUND = "#fafafa"
COLORS = ("#d9480f", "#1971c2", "#2b8a3e", "#9c36b5", "#e67700", "#0b7285")


class _Window:
    def __init__(self, layout: dict[str, Any], ready: Path) -> None:
        import tkinter as tk

        self.tk = tk
        self.ready = ready
        self.root = tk.Tk()
        width, height = self.root.winfo_screenwidth(), self.root.winfo_screenheight()
        self.size = (width, height)
        self.root.overrideredirect(True)
        self.root.geometry(f"{width}x{height}+0+0")
        self.canvas = tk.Canvas(
            self.root, width=width, height=height, bg=_BACKGROUND, highlightthickness=0
        )
        self.canvas.pack()
        self.canvas.create_text(
            width // 2,
            height // 3,
            text="vnc-use calibrate: the model is asked to click each labelled target",
            fill="#868e96",
            font=("Helvetica", 12),
        )
        for i, target in enumerate(layout["targets"]):
            self._draw(target, COLORS[i % len(COLORS)])
        self.canvas.bind("<Button-1>", self._mark)

    def _draw(self, target: dict[str, Any], color: str) -> None:
        left, top, right, bottom = target["box"]
        self.canvas.create_rectangle(
            left, top, right - 1, bottom - 1, fill=color, outline="#212529"
        )
        size = max(9, min(16, (bottom - top) // 2))
        self.canvas.create_text(
            (left + right) / 2,
            (top + bottom) / 2,
            text=target["label"],
            fill="white",
            font=("Helvetica", size, "bold"),
        )

    def _mark(self, event: Any) -> None:
        x, y = event.x, event.y
        self.canvas.create_line(x - 6, y, x + 7, y, fill="black", width=2)
        self.canvas.create_line(x, y - 6, x, y + 7, fill="black", width=2)

    def announce(self, deadline: float) -> None:
        if self.root.winfo_ismapped() or time.monotonic() > deadline:
            width, height = self.size
            # written whole, then renamed: the waiting process reads it as soon as it exists
            partial = self.ready.with_name(self.ready.name + ".part")
            partial.write_text(json.dumps({"ready": True, "width": width, "height": height}))
            os.replace(partial, self.ready)
            return
        self.root.after(20, self.announce, deadline)

    def run(self) -> None:
        self.root.after(50, self.announce, time.monotonic() + 10.0)
        self.root.mainloop()


def main(argv: Sequence[str] | None = None) -> int:
    """Show the window until the process is ended."""
    parser = argparse.ArgumentParser(description="The vnc-use calibration window.")
    parser.add_argument("--layout", required=True, help="the run's calibration.json")
    parser.add_argument("--ready", required=True, help="file written once the window shows")
    args = parser.parse_args(argv)
    layout = json.loads(Path(args.layout).read_text("utf-8"))
    _Window(layout, Path(args.ready)).run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
