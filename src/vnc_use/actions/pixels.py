"""Where a model's grid coordinates land on the screen: the one grid-to-pixel mapping.

Models place their actions on a 1000x1000 grid (0-999) that spans the screenshot they saw.
:func:`pixel_targets` turns an action's arguments into :class:`Targets` in pixels of a
``width`` x ``height`` screen, reading which arguments are places from the action's
:class:`~vnc_use.actions.vocabulary.Points`. Everything that shows or uses pixels goes
through it: the executor (:func:`action_pixels`, whose targets the handlers act on), the
approval prompt and the report (:func:`call_pixels`, for a call as recorded), and the progress
lines and report captions (:func:`point_arguments`, to show a target's grid point beside it).

Pixels are reported under the keys ``x``, ``y`` (the point), ``destination_x``,
``destination_y`` (a drag's end) and ``magnitude`` (a scroll's distance), whatever the model
family calls its arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

from vnc_use.actions.context import Pixel, Targets
from vnc_use.actions.vocabulary import ActionTable, Direction, Points, ValidatedAction

__all__ = [
    "GRID_SIZE",
    "Targets",
    "action_pixels",
    "call_pixels",
    "denorm",
    "denorm_magnitude",
    "denorm_x",
    "denorm_y",
    "pixel_targets",
    "point_arguments",
]

GRID_SIZE = 1000
"""The grid the model's coordinates live on: integers 0-999, scaled by ``/ 1000``."""


def _scale(value: int, size: int) -> int:
    if size < 1:
        raise ValueError(f"screen dimension must be >= 1 pixel, got {size}")
    pixel = round(value / GRID_SIZE * size)
    return min(max(pixel, 0), size - 1)


def denorm_x(x: int, width: int) -> int:
    """Grid x (0-999) to a pixel column: ``round(x / 1000 * width)`` clamped to the screen."""
    return _scale(x, width)


def denorm_y(y: int, height: int) -> int:
    """Grid y (0-999) to a pixel row: ``round(y / 1000 * height)`` clamped to the screen."""
    return _scale(y, height)


def denorm(x: int, y: int, width: int, height: int) -> Pixel:
    """Grid point to a pixel point on a ``width`` x ``height`` screen."""
    return denorm_x(x, width), denorm_y(y, height)


def denorm_magnitude(direction: Direction, magnitude: int, width: int, height: int) -> int:
    """A grid scroll magnitude in pixels: scaled by height for up/down, by width for left/right.

    As in Google's reference executor; the result is clamped like a coordinate.
    """
    if direction in ("up", "down"):
        return denorm_y(magnitude, height)
    if direction in ("left", "right"):
        return denorm_x(magnitude, width)
    raise ValueError(f"unknown scroll direction {direction!r}")


def _grid_value(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and 0 <= value <= GRID_SIZE - 1


def _pixel(
    args: Mapping[str, Any], names: tuple[str, str] | None, width: int, height: int
) -> Pixel | None:
    if names is None:
        return None
    x, y = args.get(names[0]), args.get(names[1])
    if not (_grid_value(x) and _grid_value(y)):
        return None
    return denorm(x, y, width, height)


def pixel_targets(points: Points, args: Mapping[str, Any], width: int, height: int) -> Targets:
    """The pixel targets of an action's ``args`` on a ``width`` x ``height`` screen.

    ``points`` names the arguments that are places. A point whose arguments are missing or
    off the grid is left out (None); a distance on the grid is scaled along its direction.
    """
    distance: int | None = None
    if points.distance is not None:
        value = args.get(points.distance.arg)
        direction = args.get(points.distance.direction)
        if isinstance(value, int) and not points.distance.on_grid:
            distance = value
        elif _grid_value(value) and direction in ("up", "down", "left", "right"):
            distance = denorm_magnitude(direction, value, width, height)
    return Targets(
        point=_pixel(args, points.at, width, height),
        end=_pixel(args, points.to, width, height),
        distance=distance,
    )


def action_pixels(action: ValidatedAction, width: int, height: int) -> Targets:
    """The pixel targets of a validated action: what the executor acts on and reports."""
    args = {name: value for name, value in action.args}  # not dict(): a field may be "keys"
    return pixel_targets(action.spec.spelling_of(action.args).points, args, width, height)


def point_arguments(
    tables: Iterable[ActionTable],
) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """Every argument pair that is a point, and every pair that is a drag's end, in ``tables``."""
    at: dict[tuple[str, str], None] = {}
    to: dict[tuple[str, str], None] = {}
    for table in tables:
        for spec in table.specs.values():
            for spelling in spec.spellings:
                if spelling.points.at is not None:
                    at[spelling.points.at] = None
                if spelling.points.to is not None:
                    to[spelling.points.to] = None
    return tuple(at), tuple(to)


def call_pixels(
    args: Mapping[str, Any], size: tuple[int, int] | None, tables: Iterable[ActionTable]
) -> dict[str, int]:
    """The pixel points of a call as recorded (arguments only, maybe not valid), or ``{}``.

    For the approval prompt and the report, which see the call's arguments but not which
    table it was validated against: every point argument pair of every spelling of the actions
    of ``tables`` is mapped where present (no spelling has two of them), under the keys of
    :meth:`Targets.points`.
    """
    if size is None:
        return {}
    ats, tos = point_arguments(tables)
    out: dict[str, int] = {}
    for at in ats:
        out.update(pixel_targets(Points(at=at), args, *size).points())
    for to in tos:
        end = pixel_targets(Points(to=to), args, *size).end
        if end is not None:
            out["destination_x"], out["destination_y"] = end
    return out
