"""What each action does on the desktop: one handler per action of the tables.

A handler gets the action's validated arguments, its pixel targets (already mapped from the
grid by :func:`vnc_use.actions.pixels.action_pixels`) and the :class:`ActionContext`, and
sends pointer and keyboard input through ``ctx.hands``. The specs in
:mod:`vnc_use.actions.tables` pair each handler with its argument model.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from vnc_use.actions.execute import ActionContext, Hands
from vnc_use.actions.pixels import Targets
from vnc_use.actions.vocabulary import (
    ActionArgs,
    DragAndDropArgs,
    HotkeyArgs,
    IntentDragArgs,
    IntentDragToDestinationArgs,
    IntentNavigateArgs,
    IntentPointArgs,
    IntentScrollArgs,
    IntentScrollGridArgs,
    KeyArgs,
    KeyCombinationArgs,
    NavigateArgs,
    PointArgs,
    ScrollAtArgs,
    ScrollDocumentArgs,
    TypeArgs,
    TypeTextAtArgs,
    WaitArgs,
)

LEFT, MIDDLE, RIGHT = 1, 2, 3


def _navigate_to(url: str, ctx: ActionContext) -> None:
    if "://" not in url:
        url = "https://" + url
    ctx.hands.key_combo("control+l")
    ctx.hands.type_text(url, press_enter=True)


# ----------------------------------------------------------------- Gemini 2.5 / 3


def open_web_browser(_: ActionArgs, at: Targets, ctx: ActionContext) -> None:
    """Nothing to do: the desktop's browser is already there; the fresh screenshot answers."""


def wait_5_seconds(_: ActionArgs, at: Targets, ctx: ActionContext) -> None:
    """Wait ``ctx.wait_seconds`` (cut short when the run stops)."""
    (ctx.stop or threading.Event()).wait(ctx.wait_seconds)


def go_back(_: ActionArgs, at: Targets, ctx: ActionContext) -> None:
    """Alt+Left."""
    ctx.hands.key_combo("alt+left")


def go_forward(_: ActionArgs, at: Targets, ctx: ActionContext) -> None:
    """Alt+Right."""
    ctx.hands.key_combo("alt+right")


def search(_: ActionArgs, at: Targets, ctx: ActionContext) -> None:
    """Go to ``ctx.search_url``."""
    _navigate_to(ctx.search_url, ctx)


def navigate(args: NavigateArgs | IntentNavigateArgs, at: Targets, ctx: ActionContext) -> None:
    """Ctrl+L, the URL (``https://`` added when it has no scheme), Enter."""
    _navigate_to(args.url, ctx)


def click_at(args: PointArgs, at: Targets, ctx: ActionContext) -> None:
    """Left click at the point."""
    ctx.hands.click(*at.xy)


def hover_at(args: PointArgs, at: Targets, ctx: ActionContext) -> None:
    """Move the pointer to the point."""
    ctx.hands.move(*at.xy)


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


def type_text_at(args: TypeTextAtArgs, at: Targets, ctx: ActionContext) -> None:
    """Click the point, then type (clearing the field first unless told not to)."""
    _click_for_keys(ctx, *at.xy)
    ctx.hands.type_text(
        args.text, press_enter=args.press_enter, clear_first=args.clear_before_typing
    )


def key_combination(args: KeyCombinationArgs, at: Targets, ctx: ActionContext) -> None:
    """Press the keys, e.g. ``control+c``."""
    ctx.hands.key_combo(args.keys)


def scroll_document(args: ScrollDocumentArgs, at: Targets, ctx: ActionContext) -> None:
    """Scroll the whole page."""
    ctx.hands.scroll(args.direction)


def scroll_at(
    args: ScrollAtArgs | IntentScrollArgs | IntentScrollGridArgs, at: Targets, ctx: ActionContext
) -> None:
    """Scroll at the point by the distance in pixels."""
    if at.distance is None:
        raise ValueError("a scroll needs a distance")
    ctx.hands.scroll_at(*at.xy, args.direction, at.distance)


def drag_and_drop(
    args: DragAndDropArgs | IntentDragArgs | IntentDragToDestinationArgs,
    at: Targets,
    ctx: ActionContext,
) -> None:
    """Drag from the point to the end."""
    ctx.hands.drag_and_drop(*at.xy, *at.end_xy)


# ----------------------------------------------------------------- Gemini 3.5 Flash

PointHandler = Callable[[IntentPointArgs, Targets, ActionContext], None]


def on_point(act: Callable[[Hands, int, int], None]) -> PointHandler:
    """A handler for an action on one point (click variants, mouse down/up, move)."""

    def handler(args: IntentPointArgs, at: Targets, ctx: ActionContext) -> None:
        act(ctx.hands, *at.xy)

    return handler


click = on_point(lambda h, x, y: h.click(x, y, LEFT))
double_click = on_point(lambda h, x, y: h.double_click(x, y))
triple_click = on_point(lambda h, x, y: h.triple_click(x, y))
middle_click = on_point(lambda h, x, y: h.click(x, y, MIDDLE))
right_click = on_point(lambda h, x, y: h.click(x, y, RIGHT))
mouse_down = on_point(lambda h, x, y: h.mouse_down(x, y, LEFT))
mouse_up = on_point(lambda h, x, y: h.mouse_up(x, y, LEFT))
move = on_point(lambda h, x, y: h.move(x, y))


def type_(args: TypeArgs, at: Targets, ctx: ActionContext) -> None:
    """Type where the keyboard focus is (no click, no clearing)."""
    ctx.hands.type_text(args.text, press_enter=args.press_enter)


def wait(args: WaitArgs, at: Targets, ctx: ActionContext) -> None:
    """Wait the model's seconds, capped at ``ctx.max_wait_seconds`` and cut short on stop."""
    (ctx.stop or threading.Event()).wait(min(float(args.seconds), ctx.max_wait_seconds))


def press_key(args: KeyArgs, at: Targets, ctx: ActionContext) -> None:
    """Press and release one key."""
    ctx.hands.key_combo(args.key)


def key_down(args: KeyArgs, at: Targets, ctx: ActionContext) -> None:
    """Press and hold one key."""
    ctx.hands.key_down(args.key)


def key_up(args: KeyArgs, at: Targets, ctx: ActionContext) -> None:
    """Release one held key."""
    ctx.hands.key_up(args.key)


def hotkey(args: HotkeyArgs, at: Targets, ctx: ActionContext) -> None:
    """Press the keys together; ``"+".join`` keeps a literal "+" key: ``control++``."""
    ctx.hands.key_combo("+".join(args.keys))


def take_screenshot(_: ActionArgs, at: Targets, ctx: ActionContext) -> None:
    """Nothing to do: the function response carries the fresh screenshot."""
