"""Stall detection: a model repeating actions that change nothing on the screen.

After every desktop action the screen after it is compared with the screen before it, and
with the screens after the last N actions, by replay's divergence measure
(:func:`vnc_use.replay.compare.difference`: greyscale cells, here cell for cell): an action
whose screen is within :data:`STALL_TOLERANCE` percent of one of them *changed nothing* (a
blinking text cursor flips between two screens; a menu opened and closed comes back).
A run is *stalled* when its last N actions (``stall_after``, default 4) changed nothing, or
when it repeats a short cycle of actions (the same names, grid targets within
:data:`NEAR` units) and the screen comes back to the same state each time round.

Two kinds of change are not an action's effect. A change confined to a few cells away from
where a pointer action pointed (:func:`incidental`: a caret blinking in a focused field, a
blinking cursor, a spinner's few cells) toggles on its own: a click elsewhere did not make
it. (A keyboard action's effect is where the text cursor is, which may be anywhere: a letter
typed counts wherever it lands.) And actions that only look (a wait, a screenshot: ``observe``
in the action tables) never count: waiting for a page is not a loop; such an action leaves
the count as it was, and only a real change of the screen during it clears it.

On the first stall the action's function response carries a note in plain words naming the
repeated action (:func:`note_for`). If the next action changes nothing either (or the cycle
goes on), the run ends with status ``stuck`` before the model is asked again; ``resume`` gives
it another chance. An action that changes the screen clears the stall (and a later one is
noted again).

Typing into a field, scrolling a long list, waiting while a page draws, clicking a counter:
each changes the screen, so none is a stall. The state kept (``CUAState.stall``) is plain JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vnc_use.actions.vocabulary import ActionKind
from vnc_use.agent import budgets

__all__ = [
    "DEFAULT_STALL_AFTER",
    "NEAR",
    "SMALL_BOX",
    "STALL_TOLERANCE",
    "Incidental",
    "StallCheck",
    "incidental",
    "observe",
    "targets_of",
]

DEFAULT_STALL_AFTER = budgets.STALL_AFTER
"""Actions in a row that change nothing before the model is told (``--stall-after``)."""
STALL_TOLERANCE = 0.02
"""Percent of the screen's cells (3 of the 160x100) that may differ while the screen still
counts as the same: a blinking text cursor on a 1440x900 screen (3 cells) is no change; a
typed letter (5 cells), a small mark or tick (4 or more) is. A cursor that spans 4 cells (on
a 1024x768 screen) counts as a change the first time it blinks; from then on both of its
states are screens already seen (below)."""
NEAR = 15
"""Grid units (of 0-999) within which two targets are the same place."""
CYCLES = (2, 3)
"""Lengths of the repeated cycles looked for (a single repeated action is a plain stall)."""

SMALL_BOX = (3, 8)
"""Cells (of the 160x100) across and down, either way round, within which a change is as
small as a caret, a blinking cursor or a spinner's few cells (a 2-pixel caret 20 pixels tall
is 1-2 by 3-4 cells on any common screen)."""
MARGIN = 3
"""Cells around a small change within which a pointer's target makes it the action's own."""

SameScreen = Callable[[str | None, str | None], bool]
"""True when two screenshots (by digest) show the same screen by the stall measure."""

Incidental = Callable[[str | None, str | None, Sequence[Sequence[int]]], bool]
"""True when what differs between two screenshots (by digest) is only a small region away
from every one of the given grid targets (see :func:`incidental`)."""

_POINT_KEYS = (
    ("x", "y"),
    ("start_x", "start_y"),
    ("end_x", "end_y"),
    ("destination_x", "destination_y"),
)


def targets_of(args: Mapping[str, Any]) -> list[list[int]]:
    """The grid points an action's arguments name (where it points, where it drags to)."""
    points = []
    for kx, ky in _POINT_KEYS:
        x, y = args.get(kx), args.get(ky)
        if isinstance(x, (int, float)) and isinstance(y, (int, float)):
            points.append([int(x), int(y)])
    return points


def _target(args: Mapping[str, Any]) -> list[int] | None:
    x, y = args.get("x"), args.get("y")
    if isinstance(x, (int, float)) and isinstance(y, (int, float)):
        return [int(x), int(y)]
    return None


def incidental(
    box: tuple[int, int, int, int] | None,
    grid: tuple[int, int],
    targets: Sequence[Sequence[int]],
) -> bool:
    """Whether a change whose differing cells all lie in ``box`` (``left, top, right,
    bottom`` cells of a ``grid``, right and bottom exclusive) is one that toggles on its own
    rather than the effect of an action pointing at ``targets`` (0-999 grid points): it is
    as small as a caret (:data:`SMALL_BOX`) and no target is within :data:`MARGIN` cells of
    it. An action with no target (a wait) makes no small change its own."""
    if box is None:
        return False
    left, top, right, bottom = box
    width, height = right - left, bottom - top
    short, long = SMALL_BOX
    if min(width, height) > short or max(width, height) > long:
        return False
    for x, y in targets:
        cx, cy = x * grid[0] / 1000, y * grid[1] / 1000
        if left - MARGIN <= cx < right + MARGIN and top - MARGIN <= cy < bottom + MARGIN:
            return False
    return True


def _alike(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """The same action at the same place (targets within :data:`NEAR` grid units)."""
    if a["name"] != b["name"]:
        return False
    ta: list[int] | None = a.get("target")
    tb: list[int] | None = b.get("target")
    if ta is None or tb is None:
        return ta is None and tb is None
    return abs(ta[0] - tb[0]) <= NEAR and abs(ta[1] - tb[1]) <= NEAR


def _cycle(recent: list[dict[str, Any]], n: int, same: SameScreen) -> int:
    """The length of a cycle the last actions repeat with the screen coming back (0: none)."""
    for length in CYCLES:
        window = max(n, 2 * length)
        if len(recent) < window:
            continue
        tail = recent[-window:]
        if all(_alike(tail[0], t) for t in tail):  # one action repeated: a plain stall
            continue
        if all(
            _alike(tail[i], tail[i - length])
            and same(tail[i]["screen"], tail[i - length]["screen"])
            for i in range(length, window)
        ):
            return length
    return 0


def describe(recent: list[dict[str, Any]], n: int) -> str:
    """The repeated action(s) of the last ``n`` in words: ``click_at at (750, 500)``."""
    seen: list[str] = []
    for item in recent[-n:]:
        target = item.get("target")
        words = f"{item['name']} at ({target[0]}, {target[1]})" if target else str(item["name"])
        if words not in seen:
            seen.append(words)
    return " then ".join(seen[:3])


def note_for(n: int, what: str, cycle: int) -> str:
    """The note the model gets in the function response of the action that stalled."""
    done = (
        f"You have repeated the same {cycle} actions ({what}) and the screen keeps coming back "
        "to the same state"
        if cycle
        else f"Your last {n} actions ({what}) changed nothing on the screen"
    )
    return (
        f"{done}. Repeating them will not help. Look at the screenshot again and try something "
        "different, or stop and say what is in the way. If the next action changes nothing "
        "either, the run stops as stuck."
    )


class StallCheck:
    """The outcome of one action for stall detection (see :func:`observe`)."""

    def __init__(self, state: dict[str, Any], note: str | None, stuck: bool) -> None:
        self.state = state
        """The new ``stall`` state to keep."""
        self.note = note
        """The note for this action's function response (the first stall), else None."""
        self.stuck = stuck
        """True when the stall went on after the note: the run ends ``stuck``."""


def observe(
    n: int,
    previous: Mapping[str, Any] | None,
    name: str,
    args: Mapping[str, Any],
    before: str | None,
    after: str | None,
    same: SameScreen,
    *,
    kind: ActionKind = "pointer",
    small: Incidental | None = None,
) -> StallCheck:
    """Add one performed action (``before``/``after``: the screenshots around it) of
    ``kind``; ``small`` tells a change that toggles on its own (see the module)."""
    prev = dict(previous or {})
    if n <= 0:
        return StallCheck(prev, None, False)
    if kind == "observe":  # it only looked: it neither counts nor clears, unless the screen
        moved = not same(before, after) and not (small and small(before, after, []))
        if moved and prev.get("streak"):
            return StallCheck({"recent": prev.get("recent", []), "streak": 0}, None, False)
        return StallCheck(prev, None, False)
    last = prev.get("recent", [])[-n:]
    seen = {r["screen"] for r in last} | {r.get("before") for r in last}
    item = {"name": name, "target": _target(args), "screen": after, "before": before}
    recent = [*prev.get("recent", []), item]
    recent = recent[-max(2 * n, 2 * max(CYCLES)) :]
    # a screen seen after one of the last actions is no change either: a blinking cursor
    # flips between two screens, a toggled menu comes back
    seen.discard(before)
    changed = not same(before, after) and not any(same(s, after) for s in seen if s)
    if changed and kind == "pointer" and small is not None:  # a caret blinking elsewhere
        changed = not small(before, after, targets_of(args))
    cycle = _cycle(recent, n, same)
    streak = int(prev.get("streak", 0))
    noted = bool(prev.get("noted", False))
    if changed and not cycle:
        return StallCheck({"recent": recent, "streak": 0, "noted": False}, None, False)
    streak = max(streak + 1, n) if cycle else streak + 1
    what = describe(recent, max(n, 2 * cycle))
    state = {"recent": recent, "streak": streak, "noted": noted, "what": what}
    if streak >= n and not noted:
        state["noted"] = True
        return StallCheck(state, note_for(n, what, cycle), False)
    if noted and streak > n:
        state["stuck"] = what
        return StallCheck(state, None, True)
    return StallCheck(state, None, False)


def stuck_reason(stall: Mapping[str, Any] | None) -> str | None:
    """Why the run ends ``stuck`` (None: it is not)."""
    if not stall or not stall.get("stuck"):
        return None
    return (
        f"the model kept repeating {stall['stuck']} after it was told the screen did not change; "
        "continue with resume (the model gets another chance) or rephrase the task"
    )


def cleared(stall: Mapping[str, Any] | None) -> dict[str, Any]:
    """The stall state after a person resumed a stuck run: a fresh start."""
    return {"recent": list((stall or {}).get("recent", []))[-1:], "streak": 0, "noted": False}
