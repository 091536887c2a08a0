"""Where a validated model action becomes pointer and keyboard events on the desktop.

Each function of an :class:`~vnc_use.actions.ActionTable` has a handler here that converts the
grid coordinates to pixels of the current screenshot and calls :class:`VNCController`. Handlers
return the pixel coordinates they used, for the transcript and the events.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast

from vnc_use.actions import (
    DragAndDropArgs,
    KeyCombinationArgs,
    NavigateArgs,
    PointArgs,
    ScrollAtArgs,
    ScrollDocumentArgs,
    TypeTextAtArgs,
    ValidatedAction,
    denorm,
    denorm_magnitude,
)

DEFAULT_SEARCH_URL = "https://www.google.com"


class Hands(Protocol):
    """What the executor needs from a backend (implemented by ``VNCController``)."""

    def move(self, x: int, y: int) -> None: ...
    def click(self, x: int, y: int, button: int = 1) -> None: ...
    def drag_and_drop(self, x0: int, y0: int, x1: int, y1: int, steps: int = 10) -> None: ...
    def type_text(
        self, text: str, press_enter: bool = False, clear_first: bool = False
    ) -> None: ...
    def key_combo(self, keys: str) -> None: ...
    def scroll(self, direction: str, magnitude: int = 800) -> None: ...
    def scroll_at(self, x: int, y: int, direction: str, magnitude: int = 800) -> None: ...


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


def _type_text_at(args: TypeTextAtArgs, ctx: ActionContext) -> Pixels:
    x, y = ctx.px(args.x, args.y)
    ctx.hands.click(x, y)
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


def execute(action: ValidatedAction, ctx: ActionContext) -> Pixels:
    """Run one validated action; returns the pixel coordinates it used.

    Raises whatever the backend raises: the caller decides which errors are the model's (sent
    back as ``"error"``) and which end the run (a lost connection).
    """
    return GEMINI_25_HANDLERS[action.name](action.args, ctx)
