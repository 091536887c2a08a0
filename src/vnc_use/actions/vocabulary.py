"""The action vocabulary's building blocks: argument models, action specs, tables, validation.

Gemini Computer Use models answer with function calls such as ``click_at(x=500, y=300)``.
Each function is one :class:`ActionSpec`: its pydantic argument model, which of its arguments
are places on the screen (:class:`Points`) and its handler (what it does on the desktop); an
action the model may spell two ways has one more :class:`Spelling` (model and points). An
:class:`ActionTable` gathers the specs of one model family and validates a call against them.

The tables themselves are in :mod:`vnc_use.actions.tables`, the handlers in
:mod:`vnc_use.actions.handlers`, the grid-to-pixel mapping in :mod:`vnc_use.actions.pixels`.
Nothing outside a table may hard-code action names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Generic, Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

if TYPE_CHECKING:
    from vnc_use.actions.context import ActionContext, Targets

__all__ = [
    "SAFETY_DECISION_KEY",
    "ActionArgs",
    "ActionError",
    "ActionKind",
    "ActionSpec",
    "ActionTable",
    "Coordinate",
    "Direction",
    "Distance",
    "DragAndDropArgs",
    "Handler",
    "HotkeyArgs",
    "IntentArgs",
    "IntentDragArgs",
    "IntentDragToDestinationArgs",
    "IntentNavigateArgs",
    "IntentPointArgs",
    "IntentScrollArgs",
    "IntentScrollGridArgs",
    "KeyArgs",
    "KeyCombinationArgs",
    "NavigateArgs",
    "NoArgs",
    "PointArgs",
    "Points",
    "ScrollAtArgs",
    "ScrollDocumentArgs",
    "Spelling",
    "TypeArgs",
    "TypeTextAtArgs",
    "ValidatedAction",
    "WaitArgs",
    "split_safety_decision",
]

#: Key the model puts inside a call's ``args`` when an action needs a human's confirmation.
SAFETY_DECISION_KEY = "safety_decision"

Coordinate = Annotated[int, Field(ge=0, le=999, description="0-999 grid coordinate")]
"""A coordinate on the model's 1000x1000 grid (0-999), independent of the screen size."""

Direction = Literal["up", "down", "left", "right"]
"""A scroll direction."""

ActionKind = Literal["pointer", "keyboard", "observe"]
"""How an action works on the desktop: with the pointer (or the browser: its effect is where
it points, or the whole screen), the keyboard (its effect is where the text cursor is, which
may be anywhere), or not at all: it only looks (a wait, a screenshot), so it never counts as
an action that changed nothing (stall detection)."""


# --------------------------------------------------------------------------------------
# Argument models
# --------------------------------------------------------------------------------------


class ActionArgs(BaseModel):
    """Base of every argument model: immutable, and unknown keys are an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class NoArgs(ActionArgs):
    """Arguments of a function that takes none (``go_back``, ``wait_5_seconds``, ...)."""


class NavigateArgs(ActionArgs):
    """Arguments of ``navigate``."""

    url: str


class PointArgs(ActionArgs):
    """A single grid point (``click_at``, ``hover_at``)."""

    x: Coordinate
    y: Coordinate


class TypeTextAtArgs(ActionArgs):
    """Arguments of ``type_text_at``.

    [CONFLICT] in the reference notes: Google's API doc table says ``press_enter`` defaults to
    True, but Google's reference executor (``computer-use-preview`` ``agent.py``) and the doc's
    own Playwright sample use ``args.get("press_enter", False)``, and the reference tests pin
    False. We follow the reference executor: a missing ``press_enter`` does NOT press Enter
    (pressing Enter unasked can submit a form; not pressing it is the recoverable mistake).
    ``clear_before_typing`` defaults to True in both sources.
    """

    x: Coordinate
    y: Coordinate
    text: str
    press_enter: bool = False
    clear_before_typing: bool = True


class KeyCombinationArgs(ActionArgs):
    """Arguments of ``key_combination``: keys joined by ``+``, e.g. ``"control+c"``."""

    keys: str = Field(min_length=1)


class ScrollDocumentArgs(ActionArgs):
    """Arguments of ``scroll_document``."""

    direction: Direction


class ScrollAtArgs(ActionArgs):
    """Arguments of ``scroll_at``; ``magnitude`` is on the 0-999 grid too (default 800)."""

    x: Coordinate
    y: Coordinate
    direction: Direction
    magnitude: Coordinate = 800


class DragAndDropArgs(ActionArgs):
    """Arguments of ``drag_and_drop``: from (x, y) to (destination_x, destination_y)."""

    x: Coordinate
    y: Coordinate
    destination_x: Coordinate
    destination_y: Coordinate


# -- Gemini 3.5 Flash: every action carries the model's ``intent`` --------------------------


class IntentArgs(ActionArgs):
    """Base of the Gemini 3.5 argument models: ``intent``, required, says why (for people)."""

    intent: str = Field(description="what the action is meant to achieve")


class IntentPointArgs(IntentArgs):
    """A grid point (``click``, ``double_click``, ``right_click``, ``mouse_down``, ``move``...)."""

    x: Coordinate
    y: Coordinate


class TypeArgs(IntentArgs):
    """Arguments of ``type``: text typed where the keyboard focus is (no click, no clearing)."""

    text: str
    press_enter: bool = False


class IntentDragArgs(IntentArgs):
    """The 3.5 ``drag_and_drop`` as Google's docs spell it: (start_x, start_y) to (end_x, end_y)."""

    start_x: Coordinate
    start_y: Coordinate
    end_x: Coordinate
    end_y: Coordinate


class IntentDragToDestinationArgs(IntentArgs):
    """The 3.5 ``drag_and_drop`` as Google's reference agent reads it: (x, y) to
    (destination_x, destination_y), the 2.5 names."""

    x: Coordinate
    y: Coordinate
    destination_x: Coordinate
    destination_y: Coordinate


class WaitArgs(IntentArgs):
    """Arguments of ``wait``: whole seconds (default 1)."""

    seconds: int = Field(default=1, ge=0)


class KeyArgs(IntentArgs):
    """One key name (``press_key``, ``key_down``, ``key_up``), e.g. ``"Enter"``, ``"shift"``."""

    key: str = Field(min_length=1)


class HotkeyArgs(IntentArgs):
    """Arguments of ``hotkey``: the keys of a combination, e.g. ``["control", "c"]``."""

    keys: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1)


class IntentScrollArgs(IntentArgs):
    """The 3.5 ``scroll`` as Google's docs spell it: a grid point, a direction and a distance
    in pixels.

    ``magnitude_in_pixels`` is a distance in pixels of the real screen, used as given (not a
    grid value, and not scaled when the screenshot the model saw was downscaled: Google's
    executors pass it straight to the mouse wheel); Google's table gives its range as 0-999
    and its default as 300.
    """

    x: Coordinate
    y: Coordinate
    direction: Direction
    magnitude_in_pixels: int = Field(default=300, ge=0, le=999)


class IntentScrollGridArgs(IntentArgs):
    """The 3.5 ``scroll`` as Google's reference agent reads it: ``magnitude`` on the 0-999
    grid, scaled by the screen along the direction like 2.5's ``scroll_at``.

    ``magnitude`` is required here: it is what tells this spelling from the documented one,
    so a ``scroll`` with neither distance is the documented spelling (300 pixels), not the
    reference agent's default of 800 on the grid.
    """

    x: Coordinate
    y: Coordinate
    direction: Direction
    magnitude: Coordinate


class IntentNavigateArgs(IntentArgs):
    """Arguments of the 3.5 ``navigate``."""

    url: str


# --------------------------------------------------------------------------------------
# Table structures
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Distance:
    """An argument that is a scroll distance.

    ``on_grid``: the value is on the 0-999 grid and scaled by the screen along the scroll's
    ``direction`` argument (Gemini 2.5 ``scroll_at``); otherwise it is already pixels.
    """

    arg: str
    on_grid: bool
    direction: str = "direction"


@dataclass(frozen=True)
class Points:
    """Which arguments of an action are places on the screen (argument names).

    ``at``: the (x, y) arguments of the point the pointer goes to (a click, a drag's start);
    ``to``: the (x, y) arguments of a drag's end; ``distance``: a scroll's distance. An action
    that touches no place on the screen has none of them.
    """

    at: tuple[str, str] | None = None
    to: tuple[str, str] | None = None
    distance: Distance | None = None


@dataclass(frozen=True)
class Spelling:
    """One way of writing an action's arguments: its argument model and where its points are."""

    args_model: type[ActionArgs]
    points: Points = Points()

    def signature(self, name: str) -> str:
        """A compact human/model-readable signature, e.g. ``click_at(x: int 0-999, ...)``."""
        params: list[str] = []
        for fname, finfo in self.args_model.model_fields.items():
            ann = finfo.annotation
            type_name = getattr(ann, "__name__", None) or str(ann)
            if ann is int and any(getattr(m, "le", None) == 999 for m in finfo.metadata):
                type_name = "int 0-999"
            elif getattr(ann, "__origin__", None) is Literal:
                type_name = "|".join(str(a) for a in ann.__args__)  # type: ignore[union-attr]
            elif getattr(ann, "__origin__", None) is list:
                type_name = "list[str]"
            default = "" if finfo.is_required() else f" = {finfo.default!r}"
            params.append(f"{fname}: {type_name}{default}")
        return f"{name}({', '.join(params)})"


A = TypeVar("A", bound=ActionArgs)

Handler = Callable[[A, "Targets", "ActionContext"], None]
"""What an action does on the desktop: its validated arguments, its pixel targets (from
:func:`vnc_use.actions.pixels.action_pixels`) and the executor's context."""


@dataclass(frozen=True)
class ActionSpec(Generic[A]):
    """One function the model may call: everything vnc-use knows about it, in one place.

    ``args_model`` validates its arguments, ``points`` says which of them are places on the
    screen, ``handler`` performs it; ``description`` is a short line for people and models.
    ``alternatives`` are other spellings of the same arguments that the model may use (each
    with its own model and points, which ``A`` must cover); a call is validated against the
    one whose own argument names it uses, and may not mix two. ``kind`` says how it works on
    the desktop (:data:`ActionKind`; stall detection reads it).
    """

    name: str
    args_model: type[A]
    description: str
    handler: Handler[A]
    points: Points = Points()
    alternatives: tuple[Spelling, ...] = ()
    kind: ActionKind = "pointer"

    @property
    def spellings(self) -> tuple[Spelling, ...]:
        """Every spelling of the arguments: ``args_model`` with ``points`` first."""
        return (Spelling(self.args_model, self.points), *self.alternatives)

    def spelling_of(self, args: ActionArgs) -> Spelling:
        """The spelling whose argument model ``args`` is (``TypeError`` for another model)."""
        for spelling in self.spellings:
            if isinstance(args, spelling.args_model):
                return spelling
        takes = " or ".join(s.args_model.__name__ for s in self.spellings)
        raise TypeError(f"{self.name} takes {takes}, not {type(args).__name__}")

    def run(self, args: ActionArgs, targets: Targets, ctx: ActionContext) -> None:
        """Perform the action with ``args`` (which must be of one of this spec's spellings)."""
        self.spelling_of(args)
        self.handler(cast(A, args), targets, ctx)  # A covers every spelling's model

    def signature(self) -> str:
        """The signature of each spelling, joined by `` or ``."""
        return " or ".join(s.signature(self.name) for s in self.spellings)

    def choose_spelling(self, keys: Iterable[str]) -> Spelling | str:
        """The spelling a call with argument names ``keys`` is written in, or why none is.

        The spelling whose own names (those not shared by every spelling) the call uses; the
        first spelling when it uses none of them; a message naming both when it mixes two.
        """
        if not self.alternatives:
            return self.spellings[0]
        shared = set.intersection(*(set(s.args_model.model_fields) for s in self.spellings))
        given = set(keys)
        used: list[tuple[Spelling, list[str]]] = []
        for spelling in self.spellings:
            own = [n for n in spelling.args_model.model_fields if n not in shared and n in given]
            if own:
                used.append((spelling, own))
        if not used:
            return self.spellings[0]
        if len(used) == 1:
            return used[0][0]
        mixed = " with ".join(", ".join(names) for _, names in used)
        return f"mixes two spellings ({mixed}); use one of them"


@dataclass(frozen=True)
class ValidatedAction:
    """A call that passed validation: its spec, typed arguments and any safety decision.

    ``table`` names the :class:`ActionTable` that validated it (its ``family``).
    """

    name: str
    args: ActionArgs
    spec: ActionSpec[Any]
    safety_decision: dict[str, Any] | None = None
    table: str = ""

    @property
    def needs_confirmation(self) -> bool:
        """True when the model asked for a human's confirmation before this action runs."""
        return bool(
            self.safety_decision and self.safety_decision.get("decision") == "require_confirmation"
        )


@dataclass(frozen=True)
class ActionError:
    """A call that cannot run; ``message`` is written for the model (sent back as ``error``).

    ``kind`` is one of ``"unknown"``, ``"excluded"``, ``"invalid_args"``.
    """

    name: str
    kind: Literal["unknown", "excluded", "invalid_args"]
    message: str
    safety_decision: dict[str, Any] | None = None


@dataclass(frozen=True)
class ActionTable:
    """The function vocabulary of one model family.

    ``specs`` maps each function name to its :class:`ActionSpec`; ``browser_only`` names the
    functions that only make sense in a web browser (a desktop backend may exclude them).
    """

    family: str
    specs: Mapping[str, ActionSpec[Any]]
    browser_only: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        for key, spec in self.specs.items():
            if key != spec.name:
                raise ValueError(f"ActionTable {self.family}: key {key!r} != spec {spec.name!r}")
        unknown = self.browser_only - set(self.specs)
        if unknown:
            raise ValueError(f"ActionTable {self.family}: unknown browser_only {sorted(unknown)}")

    @property
    def names(self) -> tuple[str, ...]:
        """All function names, in table order."""
        return tuple(self.specs)

    def __contains__(self, name: object) -> bool:
        return name in self.specs

    def spec(self, name: str) -> ActionSpec[Any]:
        """The spec of ``name``; raises ``KeyError`` for names not in the table."""
        return self.specs[name]

    def without(self, names: Iterable[str], family: str) -> ActionTable:
        """A table named ``family`` with the same specs minus ``names`` (same spec objects)."""
        drop = set(names)
        unknown = drop - set(self.specs)
        if unknown:
            raise ValueError(f"ActionTable {self.family}: cannot drop unknown {sorted(unknown)}")
        return ActionTable(
            family=family,
            specs={n: s for n, s in self.specs.items() if n not in drop},
            browser_only=self.browser_only - drop,
        )

    def unknown_names(self, names: Iterable[str]) -> list[str]:
        """The names from ``names`` that are not in this table (e.g. to check an exclude list)."""
        return [n for n in names if n not in self.specs]

    def validate(
        self, name: str, args: Mapping[str, Any] | None, excluded: Iterable[str] = ()
    ) -> ValidatedAction | ActionError:
        """Validate one call; never raises for bad model output.

        ``safety_decision`` is lifted out of ``args`` first (and kept on the result), so the
        argument models can forbid every other unknown key. Unknown names, excluded names
        and invalid arguments come back as an :class:`ActionError` whose message tells the
        model what was wrong and what is accepted.
        """
        rest, decision = split_safety_decision(args)
        excluded_set = set(excluded)
        if name not in self.specs:
            allowed = ", ".join(n for n in self.specs if n not in excluded_set)
            return ActionError(
                name,
                "unknown",
                f"Unknown function {name!r}. Available functions: {allowed}.",
                decision,
            )
        if name in excluded_set:
            allowed = ", ".join(n for n in self.specs if n not in excluded_set)
            return ActionError(
                name,
                "excluded",
                f"Function {name!r} is not available in this environment. Use one of: {allowed}.",
                decision,
            )
        spec = self.specs[name]
        spelling = spec.choose_spelling(rest)
        if isinstance(spelling, str):
            return ActionError(
                name,
                "invalid_args",
                f"Invalid arguments for {name}: {spelling}. Expected {spec.signature()}.",
                decision,
            )
        try:
            model = spelling.args_model.model_validate(rest)
        except ValidationError as exc:
            problems = "; ".join(_describe_error(e) for e in exc.errors())
            return ActionError(
                name,
                "invalid_args",
                f"Invalid arguments for {name}: {problems}. Expected {spec.signature()}.",
                decision,
            )
        return ValidatedAction(name, model, spec, decision, self.family)


def _describe_error(err: Mapping[str, Any]) -> str:
    loc = ".".join(str(p) for p in err.get("loc", ())) or "(arguments)"
    msg = str(err.get("msg", "invalid"))
    if err.get("type") == "missing":
        return f"{loc}: missing"
    if err.get("type") == "extra_forbidden":
        return f"{loc}: unexpected argument"
    return f"{loc}: {msg} (got {err.get('input')!r})"


def split_safety_decision(
    args: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Return ``(args without safety_decision, safety_decision or None)``; copies ``args``.

    A ``safety_decision`` that is not a dict is kept fail-safe as a block
    (``{"decision": "blocked", ...}``): a garbled safety signal must never let an action
    run, and only a clear ``require_confirmation`` goes to a person.
    """
    rest = dict(args or {})
    if SAFETY_DECISION_KEY not in rest:
        return rest, None
    raw = rest.pop(SAFETY_DECISION_KEY)
    if raw is None:
        return rest, None
    if isinstance(raw, dict):
        return rest, dict(raw)
    return rest, {
        "decision": "blocked",
        "explanation": f"Unrecognised safety_decision from the model: {raw!r}",
    }
