"""Scripted models for the built-in suite: an oracle that solves every task and an anti-oracle
that never does (no action, or wrong actions). They prove the suite's setups and checks right
(the oracle passes them all) and its checks discriminating (the anti-oracle fails them all).

Each is a script function for :class:`~vnc_use.testing.gemini_standin.GeminiStandIn`: it finds
the task by its text in the request's first turn and answers that task's next step (the
number of model turns so far), so one stand-in serves many desktops at once. The oracle knows
where the suite's pages put things (app-mode Chromium filling the screen puts the page's
origin at (1, 20): openbox's border and title bar) and what to type into the terminal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from vnc_use.evaluation.tasks import Task
from vnc_use.testing.gemini_standin import FunctionCallSpec, Reply

__all__ = ["SIZE", "anti_oracle", "oracle"]

#: The desktops' size the coordinates below are for (``vnc-use eval --size``'s default).
SIZE = (1280, 800)
_ORIGIN = (1, 20)  # the page's (0, 0) on the screen
_TERMINAL = (200, 300)  # a point inside the desktop's xterm (screen pixels)

Step = list[FunctionCallSpec]


def _grid(x: int, y: int) -> tuple[int, int]:
    w, h = SIZE
    return min(999, round(x * 1000 / w)), min(999, round(y * 1000 / h))


def _page(x: int, y: int) -> tuple[int, int]:
    return _grid(x + _ORIGIN[0], y + _ORIGIN[1])


def click(x: int, y: int) -> Step:
    gx, gy = _page(x, y)
    return [FunctionCallSpec("click_at", x=gx, y=gy)]


def type_at(x: int, y: int, text: str, enter: bool = False) -> Step:
    gx, gy = _page(x, y)
    return [
        FunctionCallSpec(
            "type_text_at", x=gx, y=gy, text=text, press_enter=enter, clear_before_typing=False
        )
    ]


def drag(x0: int, y0: int, x1: int, y1: int) -> Step:
    gx0, gy0 = _page(x0, y0)
    gx1, gy1 = _page(x1, y1)
    return [FunctionCallSpec("drag_and_drop", x=gx0, y=gy0, destination_x=gx1, destination_y=gy1)]


def keys(combo: str) -> Step:
    return [FunctionCallSpec("key_combination", keys=combo)]


def shell(command: str) -> Step:
    gx, gy = _grid(*_TERMINAL)
    return [
        FunctionCallSpec(
            "type_text_at", x=gx, y=gy, text=command, press_enter=True, clear_before_typing=False
        )
    ]


_VIEW_HEIGHT = SIZE[1] - 25  # the page's viewport (the window less openbox's decorations)
_END_BUTTON_Y = 12100 - (12200 - _VIEW_HEIGHT) + 30  # long.html's last button, after End

#: The oracle's steps per task (each step: the calls of one model turn).
SOLUTIONS: dict[str, list[Step]] = {
    "term-note": [shell("echo ready > ~/note.txt")],
    "term-mkdir": [shell("mkdir -p ~/projects/alpha")],
    "term-chmod": [shell("chmod u+x ~/run.sh")],
    "term-rename": [shell("mv ~/report.draft ~/report.final")],
    "term-count": [shell("ls ~/data | wc -l > ~/count.txt")],
    "term-sum": [shell("awk '{s+=$1} END {print s}' ~/numbers.txt > ~/sum.txt")],
    "term-sort": [shell("sort ~/names.txt > ~/sorted.txt")],
    "term-config": [shell("sed -i 's/^mode=draft$/mode=final/' ~/config.ini")],
    "term-archive": [shell("cd ~ && tar -czf docs.tar.gz docs")],
    "web-button": [click(500, 140)],
    "web-shortcut": [click(600, 400), keys("control+shift+k")],
    "web-form-name": [type_at(400, 96, "Ada Lovelace", enter=True)],
    "web-confirm": [click(220, 130), keys("Enter")],
    "web-scroll-end": [click(1000, 300), keys("End"), click(230, _END_BUTTON_Y)],
    "web-drag-top": [drag(250, 305, 250, 125)],
    "web-canvas-line": [drag(201, 311, 801, 311)],
    "web-settings": [click(220, 130), click(190, 284), click(184, 374)],
    "web-scroll-find": [type_at(350, 36, "lighthouse", enter=True)],
    "web-canvas-path": [drag(501, 141, 201, 311), drag(201, 311, 801, 311)],
    "web-form-full": [
        type_at(400, 96, "Grace Hopper"),
        type_at(400, 156, "grace@example.org"),
        click(488, 212),
        click(278, 272),
        click(280, 342),
    ],
    "web-drag-sort": [drag(250, 185, 250, 125), drag(250, 305, 250, 185), drag(250, 365, 250, 305)],
    "copy-code": [shell("grep -o 'CODE-[0-9a-f]*' ~/page/code.html > ~/code.txt")],
}

#: Wrong actions: in the terminal a harmless wrong command, in the browser a click on an
#: empty spot and a wrong word typed there.
_WRONG_TERMINAL: list[Step] = [shell("echo wrong > ~/wrong.txt")]
_WRONG_PAGE: list[Step] = [click(1000, 600), type_at(1000, 600, "wrong", enter=True)]


def _task_text(request: dict[str, Any]) -> str:
    contents = request.get("contents") or []
    parts = contents[0].get("parts", []) if contents else []
    return " ".join(p.get("text", "") for p in parts if isinstance(p, dict))


def _model_turns(request: dict[str, Any]) -> int:
    return sum(1 for c in request.get("contents") or [] if c.get("role") == "model")


def _script(steps_for: Callable[[int, Task], list[Step]], tasks: Sequence[Task]) -> Any:
    def script(request: dict[str, Any], index: int) -> Reply:
        text = _task_text(request)
        for number, task in enumerate(tasks):
            if task.task in text:
                steps = steps_for(number, task)
                turn = _model_turns(request)
                if turn < len(steps):
                    return Reply.calls(*steps[turn])
                return Reply.text("The task is done.")
        return Reply.text("(no such task in the oracle)")

    return script


def oracle(tasks: Sequence[Task]) -> Any:
    """The script that solves every task of the built-in suite."""
    return _script(lambda number, task: SOLUTIONS[task.id], tasks)


def anti_oracle(tasks: Sequence[Task]) -> Any:
    """The script that fails every task: every other task no action at all, the rest wrong
    actions (then it claims success)."""

    def steps(number: int, task: Task) -> list[Step]:
        if number % 2 == 0:
            return []
        return _WRONG_TERMINAL if task.id.startswith("term-") else _WRONG_PAGE

    return _script(steps, tasks)
