"""Where a validated model action becomes pointer and keyboard events on the desktop.

:func:`execute` maps the action's grid points to pixels of the current screen
(:func:`vnc_use.actions.pixels.action_pixels`, the one grid-to-pixel mapping) and runs the
handler of the action's own spec with them; it returns those pixels for the transcript and the
events, under the keys ``x``, ``y`` (the point), ``destination_x``, ``destination_y`` (a drag's
end) and ``magnitude`` (a scroll's distance in pixels), whatever the model family calls its
arguments. The handlers are in :mod:`vnc_use.actions.handlers`.
"""

from __future__ import annotations

from vnc_use.actions.context import DEFAULT_SEARCH_URL, MAX_WAIT_SECONDS, ActionContext, Hands
from vnc_use.actions.pixels import action_pixels
from vnc_use.actions.vocabulary import ValidatedAction

__all__ = [
    "DEFAULT_SEARCH_URL",
    "MAX_WAIT_SECONDS",
    "ActionContext",
    "Hands",
    "execute",
]


def execute(action: ValidatedAction, ctx: ActionContext) -> dict[str, int]:
    """Run one validated action; returns the pixel targets it used (see the module's doc).

    Raises whatever the backend raises: the caller decides which errors are the model's (sent
    back as ``"error"``) and which end the run (a lost connection).
    """
    targets = action_pixels(action, ctx.width, ctx.height)
    action.spec.run(action.args, targets, ctx)
    return targets.as_dict()
