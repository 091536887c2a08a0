"""Where a validated model action becomes pointer and keyboard events on the desktop.

Each function of an :class:`~vnc_use.actions.ActionTable` has a handler here that converts the
grid coordinates to pixels of the current screenshot and calls the
:class:`~vnc_use.desktops.base.Desktop`. Handlers
return the pixel coordinates they used, for the transcript and the events, under the keys
``x``, ``y`` (the point), ``destination_x``, ``destination_y`` (a drag's end) and
``magnitude`` (a scroll's distance in pixels), whatever the model family calls its arguments.

:data:`GEMINI_25_HANDLERS` serves the 13 functions of Gemini 2.5 / 3 Flash,
:data:`GEMINI_35_HANDLERS` the intent-bearing actions of Gemini 3.5 Flash; :func:`execute`
picks the handlers of the table that validated the action (:data:`HANDLERS_BY_TABLE`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from vnc_use.actions import (
    GEMINI_25_TABLE,
    GEMINI_35_DESKTOP_TABLE,
    GEMINI_35_TABLE,
    DragAndDropArgs,
    HotkeyArgs,
    IntentDragArgs,
    IntentNavigateArgs,
    IntentPointArgs,
    IntentScrollArgs,
    KeyArgs,
    KeyCombinationArgs,
    NavigateArgs,
    PointArgs,
    ScrollAtArgs,
    ScrollDocumentArgs,
    TypeArgs,
    TypeTextAtArgs,
    ValidatedAction,
    WaitArgs,
    denorm,
    denorm_magnitude,
)
from vnc_use.desktops.base import Desktop

__all__ = [
    "DEFAULT_SEARCH_URL",
    "GEMINI_25_HANDLERS",
    "GEMINI_35_HANDLERS",
    "HANDLERS_BY_TABLE",
    "MAX_WAIT_SECONDS",
    "ActionContext",
    "Handler",
    "Hands",
    "Pixels",
    "execute",
]

DEFAULT_SEARCH_URL = "https://www.google.com"

MAX_WAIT_SECONDS = 60.0
"""Longest single ``wait(seconds)`` of Gemini 3.5 that is honoured (longer ones are cut)."""

LEFT, MIDDLE, RIGHT = 1, 2, 3


Hands = Desktop
"""What the executor needs from a backend: a :class:`~vnc_use.desktops.base.Desktop`."""


@dataclass
class ActionContext:
    """What a handler may use: the hands, the screenshot size the model saw, a few settings."""

    hands: Hands
    width: int
    height: int
    search_url: str = DEFAULT_SEARCH_URL
    wait_seconds: float = 5.0
    stop: threading.Event | None = None
    """Set to cut a wait short (the run is being stopped)."""
    max_wait_seconds: float = MAX_WAIT_SECONDS
    """Cap on a model-chosen ``wait(seconds)``."""

    def px(self, x: int, y: int) -> tuple[int, int]:
        """Grid point to pixels on this screen."""
        return denorm(x, y, self.width, self.height)


Pixels = dict[str, int]
Handler = Callable[[Any, ActionContext], Pixels]


def _navigate_to(url: str, ctx: ActionContext) -> Pixels:
    if "://" not in url:
        url = "https://" + url
    ctx.hands.key_combo("control+l")
    ctx.hands.type_text(url, press_enter=True)
    return {}


def _open_web_browser(_: Any, ctx: ActionContext) -> Pixels:
    return {}  # the desktop's browser is already there; the fresh screenshot is the answer


def _wait(_: Any, ctx: ActionContext) -> Pixels:
    (ctx.stop or threading.Event()).wait(ctx.wait_seconds)
    return {}


def _go_back(_: Any, ctx: ActionContext) -> Pixels:
    ctx.hands.key_combo("alt+left")
    return {}


def _go_forward(_: Any, ctx: ActionContext) -> Pixels:
    ctx.hands.key_combo("alt+right")
    return {}


def _search(_: Any, ctx: ActionContext) -> Pixels:
    return _navigate_to(ctx.search_url, ctx)


def _navigate(args: NavigateArgs, ctx: ActionContext) -> Pixels:
    return _navigate_to(args.url, ctx)


def _click_at(args: PointArgs, ctx: ActionContext) -> Pixels:
    x, y = ctx.px(args.x, args.y)
    ctx.hands.click(x, y)
    return {"x": x, "y": y}


def _hover_at(args: PointArgs, ctx: ActionContext) -> Pixels:
    x, y = ctx.px(args.x, args.y)
    ctx.hands.move(x, y)
    return {"x": x, "y": y}


def _click_for_keys(ctx: ActionContext, x: int, y: int) -> None:
    """Click, then wait until the click has taken effect, for the keys that follow it.

    Every handler that clicks and then types within one action uses this: a window manager
    gives the clicked window the keyboard focus only after it has seen the click, and keys
    sent in the same burst would go to the window focused before. (Keys of a *later* call,
    say Gemini 3.5's ``type`` after its ``click`` in the same turn, need nothing more: the
    graph takes a settled screenshot after every action, which also waits for the server.)
    """
    ctx.hands.click(x, y)
    ctx.hands.settle_input()


def _type_text_at(args: TypeTextAtArgs, ctx: ActionContext) -> Pixels:
    x, y = ctx.px(args.x, args.y)
    _click_for_keys(ctx, x, y)
    ctx.hands.type_text(
        args.text, press_enter=args.press_enter, clear_first=args.clear_before_typing
    )
    return {"x": x, "y": y}


def _key_combination(args: KeyCombinationArgs, ctx: ActionContext) -> Pixels:
    ctx.hands.key_combo(args.keys)
    return {}


def _scroll_document(args: ScrollDocumentArgs, ctx: ActionContext) -> Pixels:
    ctx.hands.scroll(args.direction)
    return {}


def _scroll_at(args: ScrollAtArgs, ctx: ActionContext) -> Pixels:
    x, y = ctx.px(args.x, args.y)
    magnitude = denorm_magnitude(args.direction, args.magnitude, ctx.width, ctx.height)
    ctx.hands.scroll_at(x, y, args.direction, magnitude)
    return {"x": x, "y": y, "magnitude": magnitude}


def _drag_and_drop(args: DragAndDropArgs, ctx: ActionContext) -> Pixels:
    x0, y0 = ctx.px(args.x, args.y)
    x1, y1 = ctx.px(args.destination_x, args.destination_y)
    ctx.hands.drag_and_drop(x0, y0, x1, y1)
    return {"x": x0, "y": y0, "destination_x": x1, "destination_y": y1}


GEMINI_25_HANDLERS: Mapping[str, Handler] = {
    "open_web_browser": _open_web_browser,
    "wait_5_seconds": _wait,
    "go_back": _go_back,
    "go_forward": _go_forward,
    "search": _search,
    "navigate": cast(Handler, _navigate),
    "click_at": cast(Handler, _click_at),
    "hover_at": cast(Handler, _hover_at),
    "type_text_at": cast(Handler, _type_text_at),
    "key_combination": cast(Handler, _key_combination),
    "scroll_document": cast(Handler, _scroll_document),
    "scroll_at": cast(Handler, _scroll_at),
    "drag_and_drop": cast(Handler, _drag_and_drop),
}
"""One handler per function of :data:`vnc_use.actions.GEMINI_25_TABLE`."""


# ----------------------------------------------------------------------- Gemini 3.5 Flash


def _point_handler(act: Callable[[Hands, int, int], None]) -> Handler:
    """A handler for an action on one grid point (click variants, mouse down/up, move)."""

    def handler(args: IntentPointArgs, ctx: ActionContext) -> Pixels:
        x, y = ctx.px(args.x, args.y)
        act(ctx.hands, x, y)
        return {"x": x, "y": y}

    return cast(Handler, handler)


def _type(args: TypeArgs, ctx: ActionContext) -> Pixels:
    ctx.hands.type_text(args.text, press_enter=args.press_enter)
    return {}


def _drag_35(args: IntentDragArgs, ctx: ActionContext) -> Pixels:
    x0, y0 = ctx.px(args.start_x, args.start_y)
    x1, y1 = ctx.px(args.end_x, args.end_y)
    ctx.hands.drag_and_drop(x0, y0, x1, y1)
    return {"x": x0, "y": y0, "destination_x": x1, "destination_y": y1}


def _wait_35(args: WaitArgs, ctx: ActionContext) -> Pixels:
    (ctx.stop or threading.Event()).wait(min(float(args.seconds), ctx.max_wait_seconds))
    return {}


def _press_key(args: KeyArgs, ctx: ActionContext) -> Pixels:
    ctx.hands.key_combo(args.key)
    return {}


def _key_down(args: KeyArgs, ctx: ActionContext) -> Pixels:
    ctx.hands.key_down(args.key)
    return {}


def _key_up(args: KeyArgs, ctx: ActionContext) -> Pixels:
    ctx.hands.key_up(args.key)
    return {}


def _hotkey(args: HotkeyArgs, ctx: ActionContext) -> Pixels:
    # "+".join keeps a literal "+" key working: ["control", "+"] -> "control++".
    ctx.hands.key_combo("+".join(args.keys))
    return {}


def _take_screenshot(_: Any, ctx: ActionContext) -> Pixels:
    return {}  # nothing to do: the function response carries the fresh screenshot


def _scroll_35(args: IntentScrollArgs, ctx: ActionContext) -> Pixels:
    x, y = ctx.px(args.x, args.y)
    ctx.hands.scroll_at(x, y, args.direction, args.magnitude_in_pixels)
    return {"x": x, "y": y, "magnitude": args.magnitude_in_pixels}


def _navigate_35(args: IntentNavigateArgs, ctx: ActionContext) -> Pixels:
    return _navigate_to(args.url, ctx)


GEMINI_35_HANDLERS: Mapping[str, Handler] = {
    "click": _point_handler(lambda h, x, y: h.click(x, y, LEFT)),
    "double_click": _point_handler(lambda h, x, y: h.double_click(x, y)),
    "triple_click": _point_handler(lambda h, x, y: h.triple_click(x, y)),
    "middle_click": _point_handler(lambda h, x, y: h.click(x, y, MIDDLE)),
    "right_click": _point_handler(lambda h, x, y: h.click(x, y, RIGHT)),
    "mouse_down": _point_handler(lambda h, x, y: h.mouse_down(x, y, LEFT)),
    "mouse_up": _point_handler(lambda h, x, y: h.mouse_up(x, y, LEFT)),
    "move": _point_handler(lambda h, x, y: h.move(x, y)),
    "type": cast(Handler, _type),
    "drag_and_drop": cast(Handler, _drag_35),
    "wait": cast(Handler, _wait_35),
    "press_key": cast(Handler, _press_key),
    "key_down": cast(Handler, _key_down),
    "key_up": cast(Handler, _key_up),
    "hotkey": cast(Handler, _hotkey),
    "take_screenshot": _take_screenshot,
    "scroll": cast(Handler, _scroll_35),
    "go_back": _go_back,
    "navigate": cast(Handler, _navigate_35),
    "go_forward": _go_forward,
}
"""One handler per action of :data:`vnc_use.actions.GEMINI_35_TABLE` (and its desktop subset)."""


HANDLERS_BY_TABLE: Mapping[str, Mapping[str, Handler]] = {
    GEMINI_25_TABLE.family: GEMINI_25_HANDLERS,
    GEMINI_35_TABLE.family: GEMINI_35_HANDLERS,
    GEMINI_35_DESKTOP_TABLE.family: GEMINI_35_HANDLERS,
}
"""The handlers of each action table, by the table's ``family`` name."""


def execute(
    action: ValidatedAction, ctx: ActionContext, handlers: Mapping[str, Handler] | None = None
) -> Pixels:
    """Run one validated action; returns the pixel coordinates it used.

    The handlers are ``handlers`` when given, else those of the table that validated the
    action (:data:`HANDLERS_BY_TABLE`; an action without a table is a Gemini 2.5 one). An
    action no handler knows raises ``ValueError`` (answered to the model as an error).
    Raises whatever the backend raises: the caller decides which errors are the model's (sent
    back as ``"error"``) and which end the run (a lost connection).
    """
    table = handlers
    if table is None:
        table = HANDLERS_BY_TABLE.get(action.table or GEMINI_25_TABLE.family)
    handler = table.get(action.name) if table is not None else None
    if handler is None:
        raise ValueError(f"{action.name!r} cannot be executed on this desktop")
    return handler(action.args, ctx)
