"""The calibration report as lines of text (the CLI prints them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vnc_use.calibration.analysis import Diagnosis
from vnc_use.calibration.layout import Target
from vnc_use.calibration.session import Result
from vnc_use.providers.openai_compat.dialects import dialect_by_name

__all__ = ["report_lines", "verdict_line"]


def _factor(scale: tuple[float, float]) -> str:
    sx, sy = scale
    if abs(sx - sy) <= 0.02 * max(sx, sy):
        return f"{(sx + sy) / 2:.2f}x"
    return f"{sx:.2f}x across and {sy:.2f}x down"


def _looks_like(dialect: str | None) -> str:
    if dialect is None:
        return "a screenshot size mixed up between the model and the desktop"
    if dialect_by_name(dialect).resize is None:
        return "pixels of a resized image read as 0-1000"
    return "0-1000 values read as pixels of the resized image"


def verdict_line(diag: Diagnosis, dialect: str | None, fits: str | None) -> str:
    """One line: the verdict, with the factor or offset and the dialect to try."""
    try_it = f": try `--dialect {fits}`" if fits and fits != dialect else ""
    if diag.verdict == "fine":
        return "verdict: fine -- the clicks land within the targets"
    if diag.verdict == "scale":
        assert diag.scale is not None
        return (
            f"verdict: off by a scale -- clicks land at {_factor(diag.scale)} -- this looks "
            f"like {_looks_like(dialect)}{try_it}"
        )
    if diag.verdict == "offset":
        assert diag.offset is not None
        dx, dy = diag.offset
        return (
            f"verdict: off by an offset -- clicks land {dx:+.0f} px across and {dy:+.0f} px "
            f"down of the targets{try_it}"
        )
    if diag.verdict == "not clicking":
        return (
            f"verdict: not clicking at all -- a usable click for only {diag.clicked} of "
            f"{len(diag.errors)} targets{try_it}"
        )
    return f"verdict: off with no simple pattern (a weak model, not a dialect){try_it}"


def report_lines(
    result: Result, targets: Sequence[Target], settings: Mapping[str, Any]
) -> list[str]:
    """The report: per-target errors, mean and worst, the verdict, the dialect that fits."""
    diag = result.diagnosis
    lines = ["target  size     error"]
    for target, error, attempt in zip(targets, diag.errors, result.attempts, strict=True):
        shown = f"{error:.1f} px" if error is not None else f"no click ({attempt.problem})"
        size = f"{target.width}x{target.height}"
        lines.append(f"{target.label:<7} {size:<8} {shown[:110]}")
    if diag.mean is not None and diag.worst is not None:
        lines.append(
            f"mean error {diag.mean:.1f} px, worst {diag.worst:.1f} px (targets' half-size "
            f"{diag.tolerance:.1f} px)"
        )
    lines.extend(f"note: {n}" for n in diag.notes)
    dialect = settings.get("dialect")
    lines.append(verdict_line(diag, dialect, result.fits))
    if result.fits and result.fits != dialect:
        mean = result.dialects[result.fits].mean or 0.0
        lines.append(
            f"the model's own answers read as --dialect {result.fits} land within the targets "
            f"(mean error {mean:.1f} px)"
        )
    elif not diag.fine and result.dialects and result.fits is None:
        lines.append("no other dialect reads these answers onto the targets")
    return lines
