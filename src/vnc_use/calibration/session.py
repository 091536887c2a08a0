"""One calibration: write the targets, ask the model to click each, diagnose the clicks.

:class:`Calibration` is driven by ``vnc-use calibrate`` (which starts the desktop and the
window); it works with any planner. For an OpenAI-compatible server it sends the requests
itself (through the planner's own request builder and client) so that it keeps every raw
answer, even one its dialect cannot read, and re-reads them under every other dialect
without asking the model again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vnc_use.actions.pixels import denorm
from vnc_use.calibration.analysis import Diagnosis, diagnose, pick_dialect
from vnc_use.calibration.layout import Target, layout
from vnc_use.desktops.base import Desktop
from vnc_use.providers.base import HistoryRecord, Planner
from vnc_use.providers.openai_compat import request
from vnc_use.providers.openai_compat.dialects import (
    DIALECT_NAMES,
    Dialect,
    ParseError,
    dialect_by_name,
)
from vnc_use.providers.openai_compat.dialects.base import AssistantMessage, GridCall
from vnc_use.providers.openai_compat.resize import smart_resize

__all__ = ["FILE", "Attempt", "Calibration", "Result", "prompt_for"]

FILE = "calibration.json"
"""The file in the run folder: the targets (before the first model call), then the clicks."""

Point = tuple[float, float]
_POINTED = ("x", "y")


def prompt_for(label: str) -> str:
    """The request text for one target: it names exactly this label."""
    return (
        "This is a calibration screen: coloured boxes, each with a short name in it. Click "
        "the target labelled "
        f"'{label}' (the box with the text {label} in it), once, in its middle."
    )


@dataclass
class Attempt:
    """The model's answer for one target."""

    label: str
    click: Point | None
    answer: AssistantMessage | None = None
    """The raw assistant message (OpenAI-compatible servers only)."""
    problem: str | None = None


@dataclass
class Result:
    """The outcome: the diagnosis of the clicks, and each dialect's reading (when known)."""

    diagnosis: Diagnosis
    attempts: list[Attempt]
    dialects: dict[str, Diagnosis] = field(default_factory=dict)
    fits: str | None = None
    """The dialect whose reading of the answers is fine (None: none, or not applicable)."""


def _first_point(calls: Sequence[Mapping[str, Any]]) -> tuple[int, int] | None:
    for call in calls:
        args = call.get("args", {})
        if all(isinstance(args.get(k), int) for k in _POINTED):
            return int(args["x"]), int(args["y"])
    return None


def _grid_point(calls: Sequence[GridCall]) -> tuple[int, int] | None:
    return _first_point([{"args": c.args} for c in calls])


def sent_size(dialect: Dialect, screen: tuple[int, int]) -> tuple[int, int] | None:
    """The size of the image ``dialect`` sends for a screenshot of ``screen`` (None: any)."""
    if dialect.resize is None:
        return screen
    height, width = smart_resize(screen[1], screen[0], dialect.resize)
    return width, height


def read_click(
    dialect: Dialect, answer: AssistantMessage | None, screen: tuple[int, int]
) -> tuple[Point | None, str | None]:
    """Where ``answer`` clicks on the screen when read under ``dialect`` (or why nowhere)."""
    if answer is None:
        return None, "no answer"
    frame = dialect.frame(sent_size(dialect, screen), None)
    try:
        parsed = dialect.parse(answer, frame)
    except ParseError as exc:
        return None, str(exc)
    grid = _grid_point(parsed.calls)
    if grid is None:
        return None, "the answer holds no click"
    x, y = denorm(grid[0], grid[1], screen[0], screen[1])
    return (float(x), float(y)), None


class Calibration:
    """A calibration of ``planner`` on ``desktop``, recorded in ``run_dir``."""

    def __init__(
        self,
        planner: Planner,
        desktop: Desktop,
        run_dir: Path,
        settings: Mapping[str, Any],
    ) -> None:
        self.planner = planner
        self.desktop = desktop
        self.run_dir = run_dir
        self.settings = dict(settings)
        self.screen = desktop.screen_size()
        self.targets: list[Target] = layout(*self.screen)
        self.record: dict[str, Any] = {}

    @property
    def file(self) -> Path:
        """``calibration.json`` of this run."""
        return self.run_dir / FILE

    def _save(self) -> None:
        self.file.write_text(json.dumps(self.record, indent=2), "utf-8")

    def write_targets(self) -> Path:
        """Write the screen size and the targets (before any model call)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        width, height = self.screen
        self.record = {
            "screen": {"width": width, "height": height},
            **self.settings,
            "targets": [t.to_json() for t in self.targets],
        }
        self._save()
        return self.file

    def ask_all(
        self, screenshot: bytes, on_target: Callable[[Attempt], None] | None = None
    ) -> list[Attempt]:
        """Ask for every target in turn on ``screenshot`` (saved as ``screenshot.png``)."""
        (self.run_dir / "screenshot.png").write_bytes(screenshot)
        sha = hashlib.sha256(screenshot).hexdigest()
        attempts = []
        for target in self.targets:
            history: list[HistoryRecord] = [
                {
                    "turn": "user",
                    "text": prompt_for(target.label),
                    "screenshot": sha,
                    "screen_size": list(self.screen),
                }
            ]
            attempt = self._ask(target.label, history, lambda _sha: screenshot)
            if attempt.click is not None:
                self.desktop.click(round(attempt.click[0]), round(attempt.click[1]))
            attempts.append(attempt)
            if on_target is not None:
                on_target(attempt)
        return attempts

    def _ask(
        self, label: str, history: list[HistoryRecord], load: Callable[[str], bytes]
    ) -> Attempt:
        dialect: Dialect | None = getattr(self.planner, "dialect", None)
        complete = getattr(self.planner, "complete", None)
        if dialect is not None and complete is not None:
            built = request.build(history, load, 1, dialect, {})
            completion = complete(built.messages)
            choices = getattr(completion, "choices", None) or []
            message = choices[0].message if choices else None
            answer = None if message is None else message.model_dump(mode="json", exclude_none=True)
            click, problem = read_click(dialect, answer, self.screen)
            return Attempt(label, click, answer, problem)
        proposal = self.planner.propose(history, load, 1)
        grid = _first_point([dict(c) for c in proposal.calls])
        if grid is None:
            return Attempt(label, None, None, proposal.text or "no click")
        x, y = denorm(grid[0], grid[1], *self.screen)
        return Attempt(label, (float(x), float(y)))

    def finish(self, attempts: list[Attempt]) -> Result:
        """Diagnose the clicks (and every dialect's reading); complete ``calibration.json``."""
        result = Result(diagnose(self.targets, [a.click for a in attempts]), attempts)
        if any(a.answer is not None for a in attempts):
            for name in DIALECT_NAMES:
                dialect = dialect_by_name(name)
                clicks = [read_click(dialect, a.answer, self.screen)[0] for a in attempts]
                result.dialects[name] = diagnose(self.targets, clicks)
            result.fits = pick_dialect(result.dialects)
        self._record(result)
        return result

    def _record(self, result: Result) -> None:
        diag = result.diagnosis
        for entry, attempt, error in zip(
            self.record["targets"], result.attempts, diag.errors, strict=True
        ):
            entry["click"] = None if attempt.click is None else list(attempt.click)
            entry["error_px"] = None if error is None else round(error, 2)
            if attempt.problem:
                entry["problem"] = attempt.problem
            if attempt.answer is not None:
                entry["answer"] = attempt.answer.get("content")
        self.record["result"] = {
            "verdict": diag.verdict,
            "mean_error_px": _round(diag.mean),
            "worst_error_px": _round(diag.worst),
            "tolerance_px": round(diag.tolerance, 2),
            "scale": None if diag.scale is None else [round(s, 4) for s in diag.scale],
            "offset": None if diag.offset is None else [round(o, 2) for o in diag.offset],
            "dialect_that_fits": result.fits,
            "dialects": {
                name: {"verdict": d.verdict, "mean_error_px": _round(d.mean), "clicked": d.clicked}
                for name, d in result.dialects.items()
            },
        }
        self._save()


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
