"""The action tables: what each model family may ask the desktop to do, one spec per action.

Two vocabularies exist:

* :data:`GEMINI_25_TABLE` -- the 13 predefined functions of Gemini 2.5 Computer Use, also used
  by Gemini 3 Flash / Pro (``click_at``, ``type_text_at``, ``key_combination``, ...);
* :data:`GEMINI_35_TABLE` -- the intent-bearing actions of Gemini 3.5 Flash (``click``,
  ``triple_click``, ``hotkey``, ``scroll``, ... each with a required ``intent``), and
  :data:`GEMINI_35_DESKTOP_TABLE`, its ``ENVIRONMENT_DESKTOP`` subset (no browser navigation).

Each row is one :class:`~vnc_use.actions.vocabulary.ActionSpec`: name, argument model,
description, handler and where its points are. Which table a model gets is decided by
:mod:`vnc_use.providers.gemini.families`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from vnc_use.actions import handlers as do
from vnc_use.actions.vocabulary import (
    ActionSpec,
    ActionTable,
    Distance,
    DragAndDropArgs,
    HotkeyArgs,
    IntentArgs,
    IntentDragArgs,
    IntentDragToDestinationArgs,
    IntentNavigateArgs,
    IntentPointArgs,
    IntentScrollArgs,
    IntentScrollGridArgs,
    KeyArgs,
    KeyCombinationArgs,
    NavigateArgs,
    NoArgs,
    PointArgs,
    Points,
    ScrollAtArgs,
    ScrollDocumentArgs,
    Spelling,
    TypeArgs,
    TypeTextAtArgs,
    WaitArgs,
)

__all__ = [
    "GEMINI_25_TABLE",
    "GEMINI_35_DESKTOP_TABLE",
    "GEMINI_35_TABLE",
    "PREDEFINED_FUNCTIONS",
    "TABLES",
]

AT_XY = Points(at=("x", "y"))
"""A point given as ``x``, ``y``."""

SCROLL_ON_GRID = Points(at=("x", "y"), distance=Distance("magnitude", on_grid=True))
"""A scroll at ``x``, ``y`` by ``magnitude`` on the grid (2.5 ``scroll_at``; 3.5 ``scroll`` as
Google's reference agent reads it)."""

DRAG_TO_DESTINATION = Points(at=("x", "y"), to=("destination_x", "destination_y"))
"""A drag from ``x``, ``y`` to ``destination_x``, ``destination_y`` (2.5 ``drag_and_drop``;
3.5 ``drag_and_drop`` as Google's reference agent reads it)."""


def _table(family: str, specs: Iterable[ActionSpec[Any]], browser_only: set[str]) -> ActionTable:
    return ActionTable(family, {s.name: s for s in specs}, frozenset(browser_only))


# --------------------------------------------------------------------------------------
# Gemini 2.5 Computer Use / Gemini 3 Flash table
# --------------------------------------------------------------------------------------

GEMINI_25_TABLE = _table(
    "gemini-2.5-computer-use",
    (
        ActionSpec("open_web_browser", NoArgs, "Open the web browser.", do.open_web_browser),
        ActionSpec(
            "wait_5_seconds",
            NoArgs,
            "Wait 5 seconds for the screen to settle.",
            do.wait_5_seconds,
            kind="observe",
        ),
        ActionSpec("go_back", NoArgs, "Go back to the previous page.", do.go_back),
        ActionSpec("go_forward", NoArgs, "Go forward to the next page.", do.go_forward),
        ActionSpec("search", NoArgs, "Go to the default search engine's home page.", do.search),
        ActionSpec("navigate", NavigateArgs, "Go to a URL.", do.navigate),
        ActionSpec("click_at", PointArgs, "Click at a grid point.", do.click_at, AT_XY),
        ActionSpec("hover_at", PointArgs, "Move the pointer to a grid point.", do.hover_at, AT_XY),
        ActionSpec(
            "type_text_at",
            TypeTextAtArgs,
            "Click at a grid point, optionally clear the field, type text, optionally Enter.",
            do.type_text_at,
            AT_XY,
            kind="keyboard",
        ),
        ActionSpec(
            "key_combination",
            KeyCombinationArgs,
            "Press keys, e.g. 'control+c'.",
            do.key_combination,
            kind="keyboard",
        ),
        ActionSpec(
            "scroll_document", ScrollDocumentArgs, "Scroll the whole page.", do.scroll_document
        ),
        ActionSpec(
            "scroll_at",
            ScrollAtArgs,
            "Scroll at a grid point by a magnitude.",
            do.scroll_at,
            SCROLL_ON_GRID,
        ),
        ActionSpec(
            "drag_and_drop",
            DragAndDropArgs,
            "Drag from one grid point to another.",
            do.drag_and_drop,
            DRAG_TO_DESTINATION,
        ),
    ),
    browser_only={"open_web_browser", "search", "navigate", "go_back", "go_forward"},
)
"""The 13 predefined functions of Gemini 2.5 Computer Use (also used by Gemini 3 Flash)."""

PREDEFINED_FUNCTIONS: tuple[str, ...] = GEMINI_25_TABLE.names
"""Names of the Gemini 2.5 predefined functions (derived from the table, never hand-written)."""


# --------------------------------------------------------------------------------------
# Gemini 3.5 Flash table
# --------------------------------------------------------------------------------------


def _on_point(name: str, description: str, handler: do.PointHandler) -> ActionSpec[Any]:
    return ActionSpec(name, IntentPointArgs, description, handler, AT_XY)


GEMINI_35_TABLE = _table(
    "gemini-3.5",
    (
        _on_point("click", "Left click at a grid point.", do.click),
        _on_point("double_click", "Double click at a grid point.", do.double_click),
        _on_point("triple_click", "Triple click at a grid point.", do.triple_click),
        _on_point("middle_click", "Middle click at a grid point.", do.middle_click),
        _on_point("right_click", "Right click at a grid point.", do.right_click),
        _on_point("mouse_down", "Press and hold the left button there.", do.mouse_down),
        _on_point("mouse_up", "Release the left button there.", do.mouse_up),
        _on_point("move", "Move the pointer to a grid point.", do.move),
        ActionSpec(
            "type", TypeArgs, "Type text where the keyboard focus is.", do.type_, kind="keyboard"
        ),
        ActionSpec[IntentDragArgs | IntentDragToDestinationArgs](
            "drag_and_drop",
            IntentDragArgs,
            "Drag from start to end (grid points).",
            do.drag_and_drop,
            Points(at=("start_x", "start_y"), to=("end_x", "end_y")),
            alternatives=(Spelling(IntentDragToDestinationArgs, DRAG_TO_DESTINATION),),
        ),
        ActionSpec("wait", WaitArgs, "Wait some seconds.", do.wait, kind="observe"),
        ActionSpec(
            "press_key", KeyArgs, "Press and release one key.", do.press_key, kind="keyboard"
        ),
        ActionSpec("key_down", KeyArgs, "Press and hold one key.", do.key_down, kind="keyboard"),
        ActionSpec("key_up", KeyArgs, "Release one held key.", do.key_up, kind="keyboard"),
        ActionSpec(
            "hotkey",
            HotkeyArgs,
            "Press a key combination, e.g. ['control', 'c'].",
            do.hotkey,
            kind="keyboard",
        ),
        ActionSpec(
            "take_screenshot",
            IntentArgs,
            "Answer with a fresh screenshot.",
            do.take_screenshot,
            kind="observe",
        ),
        ActionSpec[IntentScrollArgs | IntentScrollGridArgs](
            "scroll",
            IntentScrollArgs,
            "Scroll at a grid point by some pixels.",
            do.scroll_at,
            Points(at=("x", "y"), distance=Distance("magnitude_in_pixels", on_grid=False)),
            alternatives=(Spelling(IntentScrollGridArgs, SCROLL_ON_GRID),),
        ),
        ActionSpec("go_back", IntentArgs, "Go back to the previous page.", do.go_back),
        ActionSpec("navigate", IntentNavigateArgs, "Go to a URL.", do.navigate),
        ActionSpec("go_forward", IntentArgs, "Go forward to the next page.", do.go_forward),
    ),
    browser_only={"go_back", "navigate", "go_forward"},
)
"""The 20 actions of Gemini 3.5 Flash computer use in ``ENVIRONMENT_BROWSER`` (all intent-bearing).

Coordinates are on the same 0-999 grid as Gemini 2.5. ``drag_and_drop`` and ``scroll`` have
two spellings each, both accepted (a call may not mix them): Google's docs say
``drag_and_drop(start_x, start_y, end_x, end_y)`` and ``scroll(..., magnitude_in_pixels)`` (a
distance in pixels, default 300); Google's reference agent reads
``drag_and_drop(x, y, destination_x, destination_y)`` and ``scroll(..., magnitude)`` (on the
grid, scaled like 2.5's ``scroll_at``). A call that uses neither spelling's own names is
validated as the documented one.
"""

GEMINI_35_DESKTOP_TABLE = GEMINI_35_TABLE.without(
    GEMINI_35_TABLE.browser_only, family="gemini-3.5-desktop"
)
"""The 17 actions of Gemini 3.5 Flash in ``ENVIRONMENT_DESKTOP`` (Google's "Desktop
environment" table: the browser table without ``go_back``, ``navigate``, ``go_forward``)."""

TABLES: tuple[ActionTable, ...] = (GEMINI_25_TABLE, GEMINI_35_TABLE)
"""Every action table (the desktop table is a part of the 3.5 one)."""
