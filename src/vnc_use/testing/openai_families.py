"""The OpenAI-compatible stand-in answering like each open model family.

:func:`family_reply` writes "click here" in a family's exact output format and coordinate
convention; :class:`TargetClicker` is a stand-in script (``OpenAIStandIn(TargetClicker(...))``)
that answers every request by clicking the calibration target the request's newest text names,
reading the targets from the newest ``calibration.json`` under a runs directory (``vnc-use
calibrate`` writes it before its first model call). Conventions can be chosen wrong on purpose
(:data:`CONVENTIONS`), to test that a wrong dialect is diagnosed:

* ``relative`` -- 0-1000 of the image (Qwen3-VL, Holo, UI-Venus, the ``tools`` grid);
* ``qwen25-pixels`` -- pixels of the image resized by Qwen2.5-VL's rule (factor 28);
* ``ui-tars-pixels`` -- the same with UI-TARS' limits;
* any convention plus ``offset=(dx, dy)`` screen pixels.

>>> family_reply("ui-venus", (640, 400), (1280, 800))        # doctest: +ELLIPSIS
Reply(status=200, content='<think>...</think>\\n<action>Click(point=(500, 500))</action>', ...)
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vnc_use.providers.openai_compat.resize import QWEN25_VL, UI_TARS, smart_resize
from vnc_use.testing.openai_replies import Reply, ToolCall

__all__ = [
    "CONVENTIONS",
    "FAMILIES",
    "FAMILY_CONVENTION",
    "TargetClicker",
    "family_reply",
    "model_units",
    "newest_label",
]

FAMILY_CONVENTION = {
    "tools": "relative",
    "qwen3-vl": "relative",
    "qwen2.5-vl": "qwen25-pixels",
    "ui-tars": "ui-tars-pixels",
    "holo": "relative",
    "ui-venus": "relative",
    "opencua": "qwen25-pixels",
}
"""Each family's own coordinate convention (what its dialect expects)."""

FAMILIES = tuple(FAMILY_CONVENTION)
CONVENTIONS = ("relative", "qwen25-pixels", "ui-tars-pixels")

Point = tuple[float, float]


def model_units(xy: Point, screen: tuple[int, int], convention: str) -> tuple[int, int]:
    """A screen pixel ``xy`` in a convention's units (integers, as models write them)."""
    width, height = screen
    if convention == "relative":
        return min(999, round(xy[0] * 1000 / width)), min(999, round(xy[1] * 1000 / height))
    limits = {"qwen25-pixels": QWEN25_VL, "ui-tars-pixels": UI_TARS}.get(convention)
    if limits is None:
        raise ValueError(f"unknown convention {convention!r}; known: {', '.join(CONVENTIONS)}")
    sent_h, sent_w = smart_resize(height, width, limits)
    return round(xy[0] * sent_w / width), round(xy[1] * sent_h / height)


def _qwen_call(action: str, x: int, y: int) -> str:
    body = {"name": "computer_use", "arguments": {"action": action, "coordinate": [x, y]}}
    return f"<tool_call>\n{json.dumps(body)}\n</tool_call>"


def _text(family: str, x: int, y: int, what: str) -> str:
    if family in ("qwen3-vl", "qwen2.5-vl"):
        return f"Thought: I click {what}.\n{_qwen_call('left_click', x, y)}"
    if family == "ui-tars":
        box = f"<|box_start|>({x},{y})<|box_end|>"
        return f"Thought: I click {what}.\nAction: click(start_box='{box}')"
    if family == "holo":
        call = {"tool_name": "click", "element": what, "x": x, "y": y}
        return json.dumps({"note": None, "thought": f"Click {what}.", "tool_call": call})
    if family == "ui-venus":
        return f"<think>I click {what}.</think>\n<action>Click(point=({x}, {y}))</action>"
    if family == "opencua":
        return (
            f"## Thought:\nI click {what}.\n\n## Action:\nClick {what}.\n\n"
            f"## Code:\n```python\npyautogui.click(x={x}, y={y})\n```"
        )
    raise ValueError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")


def family_reply(
    family: str,
    xy: Point,
    screen: tuple[int, int],
    *,
    convention: str | None = None,
    what: str = "the target",
) -> Reply:
    """A reply clicking screen pixel ``xy`` in ``family``'s format, with its own coordinate
    convention unless ``convention`` says otherwise."""
    x, y = model_units(xy, screen, convention or FAMILY_CONVENTION[family])
    if family == "tools":
        return Reply.tool_calls(ToolCall("click", {"x": x, "y": y, "intent": f"click {what}"}))
    return Reply.text(_text(family, x, y, what))


_LABEL = re.compile(r"labelled\s+['\"“]([A-Za-z0-9_-]+)")


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [p["text"] for p in content if isinstance(p, Mapping) and p.get("type") == "text"]
    return []


def newest_label(body: Any) -> str | None:
    """The target label the newest user text of a chat request names (``labelled 'K7'``)."""
    messages = body.get("messages") if isinstance(body, Mapping) else None
    for message in reversed(messages if isinstance(messages, list) else []):
        if isinstance(message, Mapping) and message.get("role") == "user":
            for text in reversed(_texts(message.get("content"))):
                found = _LABEL.search(text)
                if found:
                    return found.group(1)
    return None


class TargetClicker:
    """A stand-in script clicking the calibration target each request names.

    ``runs_dir``: where ``vnc-use calibrate`` makes its run folders; the newest
    ``calibration.json`` below it gives the screen size and the targets' boxes. Answers in
    ``family``'s format with ``convention`` (default the family's own) and ``offset`` screen
    pixels added; a request naming no known target is answered with a finish.
    """

    def __init__(
        self,
        family: str,
        runs_dir: str | Path,
        *,
        convention: str | None = None,
        offset: tuple[float, float] = (0.0, 0.0),
    ) -> None:
        if family not in FAMILY_CONVENTION:
            raise ValueError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
        self.family = family
        self.runs_dir = Path(runs_dir)
        self.convention = convention
        self.offset = offset
        self.labels: list[str] = []
        """Every label asked for, in order."""

    def _layout(self) -> dict[str, Any]:
        files = sorted(self.runs_dir.glob("*/calibration.json"), key=lambda p: p.stat().st_mtime)
        if not files:
            raise RuntimeError(f"no calibration.json under {self.runs_dir}")
        layout: dict[str, Any] = json.loads(files[-1].read_text("utf-8"))
        return layout

    def __call__(self, body: Any, index: int) -> Reply:
        label = newest_label(body)
        layout = self._layout()
        centres = {t["label"]: t["center"] for t in layout["targets"]}
        if label is None or label not in centres:
            return Reply.text("Nothing to click.")
        self.labels.append(label)
        cx, cy = centres[label]
        xy = (cx + self.offset[0], cy + self.offset[1])
        screen = (int(layout["screen"]["width"]), int(layout["screen"]["height"]))
        return family_reply(
            self.family, xy, screen, convention=self.convention, what=f"target {label}"
        )
