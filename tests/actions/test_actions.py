"""The action table: validation as data, and grid-to-pixel math."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vnc_use.actions import (
    GEMINI_25_TABLE,
    GEMINI_35_DESKTOP_TABLE,
    GEMINI_35_TABLE,
    PREDEFINED_FUNCTIONS,
    ActionError,
    IntentDragToDestinationArgs,
    IntentScrollArgs,
    IntentScrollGridArgs,
    ScrollAtArgs,
    TypeArgs,
    TypeTextAtArgs,
    ValidatedAction,
    WaitArgs,
    denorm,
    denorm_magnitude,
    denorm_x,
    denorm_y,
)
from vnc_use.testing.gemini_standin import ENVIRONMENT_FUNCTIONS

GOOD_ARGS: dict[str, dict[str, Any]] = {
    "open_web_browser": {},
    "wait_5_seconds": {},
    "go_back": {},
    "go_forward": {},
    "search": {},
    "navigate": {"url": "https://example.com"},
    "click_at": {"x": 0, "y": 999},
    "hover_at": {"x": 500, "y": 500},
    "type_text_at": {"x": 10, "y": 20, "text": "hello", "press_enter": True},
    "key_combination": {"keys": "control+c"},
    "scroll_document": {"direction": "down"},
    "scroll_at": {"x": 1, "y": 2, "direction": "left", "magnitude": 300},
    "drag_and_drop": {"x": 1, "y": 2, "destination_x": 3, "destination_y": 4},
}


def test_table_has_the_13_predefined_functions() -> None:
    assert set(GOOD_ARGS) == set(PREDEFINED_FUNCTIONS)
    assert GEMINI_25_TABLE.names == PREDEFINED_FUNCTIONS
    assert len(PREDEFINED_FUNCTIONS) == 13
    assert GEMINI_25_TABLE.browser_only == {
        "open_web_browser",
        "search",
        "navigate",
        "go_back",
        "go_forward",
    }
    for name in PREDEFINED_FUNCTIONS:
        assert GEMINI_25_TABLE.spec(name).description


@pytest.mark.parametrize("name", sorted(GOOD_ARGS))
def test_each_function_validates_good_args(name: str) -> None:
    result = GEMINI_25_TABLE.validate(name, GOOD_ARGS[name])
    assert isinstance(result, ValidatedAction), result
    assert result.name == name
    assert result.args.model_dump(exclude_defaults=True) == GOOD_ARGS[name]
    assert result.safety_decision is None
    assert not result.needs_confirmation


def test_defaults_follow_the_reference_executor() -> None:
    typed = GEMINI_25_TABLE.validate("type_text_at", {"x": 1, "y": 2, "text": "a"})
    assert isinstance(typed, ValidatedAction)
    assert isinstance(typed.args, TypeTextAtArgs)
    assert typed.args.press_enter is False
    assert typed.args.clear_before_typing is True
    scroll = GEMINI_25_TABLE.validate("scroll_at", {"x": 1, "y": 2, "direction": "up"})
    assert isinstance(scroll, ValidatedAction)
    assert isinstance(scroll.args, ScrollAtArgs)
    assert scroll.args.magnitude == 800


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("click_at", {"x": 1000, "y": 5}, "x: Input should be less than or equal to 999"),
        ("click_at", {"x": -1, "y": 5}, "x: Input should be greater than or equal to 0"),
        ("click_at", {"x": 5}, "y: missing"),
        ("click_at", {"x": "left", "y": 5}, "x: Input should be a valid integer"),
        ("click_at", {"x": 1, "y": 2, "button": "right"}, "button: unexpected argument"),
        ("scroll_document", {"direction": "sideways"}, "direction: Input should be 'up'"),
        ("scroll_at", {"x": 1, "y": 2, "direction": "up", "magnitude": 5000}, "magnitude"),
        ("type_text_at", {"x": 1, "y": 2}, "text: missing"),
        ("navigate", {}, "url: missing"),
        ("key_combination", {"keys": ""}, "keys"),
        ("go_back", {"steps": 2}, "steps: unexpected argument"),
    ],
)
def test_bad_args_give_an_error_value(name: str, args: dict[str, Any], expected: str) -> None:
    result = GEMINI_25_TABLE.validate(name, args)
    assert isinstance(result, ActionError)
    assert result.kind == "invalid_args"
    assert expected in result.message
    # The message tells the model what would have been accepted.
    assert f"Expected {name}(" in result.message


def test_unknown_name_is_an_error_value() -> None:
    result = GEMINI_25_TABLE.validate("double_click", {"x": 1, "y": 2})
    assert isinstance(result, ActionError)
    assert result.kind == "unknown"
    assert "Unknown function 'double_click'" in result.message
    assert "click_at" in result.message


def test_excluded_name_is_an_error_value() -> None:
    result = GEMINI_25_TABLE.validate(
        "drag_and_drop", GOOD_ARGS["drag_and_drop"], excluded=["drag_and_drop", "search"]
    )
    assert isinstance(result, ActionError)
    assert result.kind == "excluded"
    assert "'drag_and_drop' is not available" in result.message
    allowed = result.message.split("Use one of:")[1]
    assert "search" not in allowed
    assert "drag_and_drop" not in allowed
    assert "click_at" in allowed


def test_safety_decision_is_lifted_out_before_validation() -> None:
    decision = {"decision": "require_confirmation", "explanation": "Accept cookies?"}
    args = {"x": 1, "y": 2, "safety_decision": decision}
    result = GEMINI_25_TABLE.validate("click_at", args)
    assert isinstance(result, ValidatedAction)
    assert result.safety_decision == decision
    assert result.needs_confirmation
    assert "safety_decision" in args  # the caller's dict is not modified


def test_garbled_safety_decision_fails_safe() -> None:
    """A garbled safety signal is a block (issue 17 item 2: it went to a person, and only
    ``require_confirmation`` may)."""
    result = GEMINI_25_TABLE.validate("click_at", {"x": 1, "y": 2, "safety_decision": "yes"})
    assert isinstance(result, ValidatedAction)
    assert not result.needs_confirmation
    assert (result.safety_decision or {})["decision"] == "blocked"


def test_safety_decision_survives_invalid_args() -> None:
    decision = {"decision": "require_confirmation", "explanation": "x"}
    result = GEMINI_25_TABLE.validate("click_at", {"x": 5000, "safety_decision": decision})
    assert isinstance(result, ActionError)
    assert result.safety_decision == decision


_json = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5000),
    st.floats(allow_nan=False, width=32),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
)


@given(
    name=st.sampled_from([*PREDEFINED_FUNCTIONS, "nope", ""]),
    args=st.dictionaries(
        st.sampled_from(["x", "y", "text", "direction", "magnitude", "url", "keys", "zz"]),
        _json,
        max_size=5,
    ),
)
def test_validate_never_raises(name: str, args: dict[str, Any]) -> None:
    result = GEMINI_25_TABLE.validate(name, args, excluded=["search"])
    assert isinstance(result, (ValidatedAction, ActionError))
    if isinstance(result, ActionError):
        assert result.message


def test_denorm() -> None:
    assert denorm(0, 0, 1440, 900) == (0, 0)
    assert denorm(500, 500, 1440, 900) == (720, 450)
    assert denorm(999, 999, 1440, 900) == (1439, 899)
    assert denorm_x(999, 1440) == 1439
    assert denorm_y(999, 900) == 899


def test_denorm_magnitude_scales_by_the_scroll_axis() -> None:
    assert denorm_magnitude("down", 800, 1440, 900) == 720
    assert denorm_magnitude("up", 800, 1440, 900) == 720
    assert denorm_magnitude("left", 800, 1440, 900) == 1152
    assert denorm_magnitude("right", 500, 1440, 900) == 720


def test_denorm_rejects_an_empty_screen() -> None:
    with pytest.raises(ValueError, match="screen dimension"):
        denorm_x(5, 0)


@given(
    a=st.integers(0, 999),
    b=st.integers(0, 999),
    size=st.integers(1, 10_000),
)
def test_denorm_lands_on_screen_and_is_monotonic(a: int, b: int, size: int) -> None:
    pa, pb = denorm_x(a, size), denorm_x(b, size)
    assert 0 <= pa < size
    assert 0 <= pb < size
    if a <= b:
        assert pa <= pb
    assert denorm_y(a, size) == pa


# ------------------------------------------------------------------ Gemini 3.5 Flash

#: Google's "Gemini 3.5 Flash" supported-actions table (browser environment), in its order,
#: as the stand-in holds it (literals, independent of vnc_use.actions).
DOCUMENTED_35 = ENVIRONMENT_FUNCTIONS["3.5"]["ENVIRONMENT_BROWSER"]

GOOD_ARGS_35: dict[str, dict[str, Any]] = {
    **{
        name: {"x": 10, "y": 999, "intent": f"{name} the thing"}
        for name in (
            "click",
            "double_click",
            "triple_click",
            "middle_click",
            "right_click",
            "mouse_down",
            "mouse_up",
            "move",
        )
    },
    "type": {"text": "hello", "press_enter": True, "intent": "fill in the name"},
    "drag_and_drop": {
        "start_x": 1,
        "start_y": 2,
        "end_x": 3,
        "end_y": 4,
        "intent": "move the file",
    },
    "wait": {"seconds": 3, "intent": "let the page load"},
    "press_key": {"key": "Enter", "intent": "submit"},
    "key_down": {"key": "shift", "intent": "hold shift"},
    "key_up": {"key": "shift", "intent": "release shift"},
    "hotkey": {"keys": ["control", "c"], "intent": "copy"},
    "take_screenshot": {"intent": "look again"},
    "scroll": {
        "x": 500,
        "y": 500,
        "direction": "down",
        "magnitude_in_pixels": 600,
        "intent": "see more",
    },
    "go_back": {"intent": "previous page"},
    "navigate": {"url": "example.com", "intent": "open the site"},
    "go_forward": {"intent": "next page"},
}


def test_35_table_is_googles_table() -> None:
    assert GEMINI_35_TABLE.names == DOCUMENTED_35
    assert set(GOOD_ARGS_35) == set(DOCUMENTED_35)
    assert GEMINI_35_TABLE.browser_only == {"go_back", "navigate", "go_forward"}
    # The desktop environment's table: the same spec objects, without browser navigation.
    assert GEMINI_35_DESKTOP_TABLE.names == DOCUMENTED_35[:17]
    assert GEMINI_35_DESKTOP_TABLE.browser_only == frozenset()
    for name in GEMINI_35_DESKTOP_TABLE.names:
        assert GEMINI_35_DESKTOP_TABLE.spec(name) is GEMINI_35_TABLE.spec(name)
    for name in DOCUMENTED_35:
        spec = GEMINI_35_TABLE.spec(name)
        assert spec.description
        assert spec.args_model.model_fields["intent"].is_required(), name


@pytest.mark.parametrize("name", DOCUMENTED_35)
def test_each_35_action_validates_good_args_and_needs_an_intent(name: str) -> None:
    result = GEMINI_35_TABLE.validate(name, GOOD_ARGS_35[name])
    assert isinstance(result, ValidatedAction), result
    assert result.args.model_dump(exclude_defaults=True) == GOOD_ARGS_35[name]
    assert result.table == GEMINI_35_TABLE.family
    without_intent = {k: v for k, v in GOOD_ARGS_35[name].items() if k != "intent"}
    missing = GEMINI_35_TABLE.validate(name, without_intent)
    assert isinstance(missing, ActionError)
    assert missing.kind == "invalid_args"
    assert "intent: missing" in missing.message


def test_35_defaults_follow_googles_table() -> None:
    typed = GEMINI_35_TABLE.validate("type", {"text": "a", "intent": "i"})
    assert isinstance(typed, ValidatedAction) and isinstance(typed.args, TypeArgs)
    assert typed.args.press_enter is False
    wait = GEMINI_35_TABLE.validate("wait", {"intent": "i"})
    assert isinstance(wait, ValidatedAction) and isinstance(wait.args, WaitArgs)
    assert wait.args.seconds == 1
    scroll = GEMINI_35_TABLE.validate("scroll", {"x": 1, "y": 2, "direction": "up", "intent": "i"})
    assert isinstance(scroll, ValidatedAction) and isinstance(scroll.args, IntentScrollArgs)
    assert scroll.args.magnitude_in_pixels == 300


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("click", {"x": 1000, "y": 5, "intent": "i"}, "x: Input should be less than or equal"),
        ("click", {"x": 1, "y": 2, "intent": "i", "button": 3}, "button: unexpected argument"),
        ("hotkey", {"keys": "control+c", "intent": "i"}, "keys: Input should be a valid list"),
        ("hotkey", {"keys": [], "intent": "i"}, "keys: List should have at least 1 item"),
        ("hotkey", {"keys": ["control", ""], "intent": "i"}, "keys.1"),
        ("press_key", {"key": "", "intent": "i"}, "key: String should have at least 1"),
        ("wait", {"seconds": -1, "intent": "i"}, "seconds: Input should be greater than or equal"),
        (
            "scroll",
            {"x": 1, "y": 2, "direction": "down", "magnitude_in_pixels": 5000, "intent": "i"},
            "magnitude_in_pixels",
        ),
        ("drag_and_drop", {"start_x": 1, "start_y": 2, "end_x": 3, "intent": "i"}, "end_y"),
        # the reference agent's spelling still needs an intent; the message names both
        ("drag_and_drop", {"x": 1, "y": 2, "destination_x": 3, "destination_y": 4}, "start_x"),
        ("drag_and_drop", {"x": 1, "y": 2, "destination_x": 3, "intent": "i"}, "destination_y"),
        (
            "scroll",
            {"x": 1, "y": 2, "direction": "down", "magnitude": 1000, "intent": "i"},
            "magnitude: Input should be less than or equal to 999",
        ),
        ("type", {"intent": "i"}, "text: missing"),
    ],
)
def test_bad_35_args_give_an_error_value(name: str, args: dict[str, Any], expected: str) -> None:
    result = GEMINI_35_TABLE.validate(name, args)
    assert isinstance(result, ActionError)
    assert result.kind == "invalid_args"
    assert expected in result.message
    assert f"Expected {name}(intent: str" in result.message


# Google's docs and Google's reference agent spell two 3.5 actions differently; both are
# accepted, each with its own units, and a call may not mix them.
OTHER_SPELLINGS_35: dict[str, tuple[dict[str, Any], type[Any]]] = {
    "drag_and_drop": (
        {"x": 1, "y": 2, "destination_x": 3, "destination_y": 4, "intent": "move the file"},
        IntentDragToDestinationArgs,
    ),
    "scroll": (
        {"x": 500, "y": 500, "direction": "down", "magnitude": 700, "intent": "see more"},
        IntentScrollGridArgs,
    ),
}


@pytest.mark.parametrize("name", sorted(OTHER_SPELLINGS_35))
def test_35_accepts_the_reference_agents_spelling_too(name: str) -> None:
    args, model = OTHER_SPELLINGS_35[name]
    for table in (GEMINI_35_TABLE, GEMINI_35_DESKTOP_TABLE):
        result = table.validate(name, args)
        assert isinstance(result, ValidatedAction), result
        assert isinstance(result.args, model)
        assert result.args.model_dump() == args
        assert result.spec.spelling_of(result.args).args_model is model
    documented = GEMINI_35_TABLE.validate(name, GOOD_ARGS_35[name])
    assert isinstance(documented, ValidatedAction)
    assert type(documented.args) is GEMINI_35_TABLE.spec(name).args_model


def test_35_scroll_without_a_distance_is_the_documented_spelling() -> None:
    scroll = GEMINI_35_TABLE.validate("scroll", {"x": 1, "y": 2, "direction": "up", "intent": "i"})
    assert isinstance(scroll, ValidatedAction) and isinstance(scroll.args, IntentScrollArgs)
    assert scroll.args.magnitude_in_pixels == 300


@pytest.mark.parametrize(
    ("name", "args", "mixed"),
    [
        (
            "drag_and_drop",
            {"start_x": 1, "start_y": 2, "destination_x": 3, "destination_y": 4, "intent": "i"},
            "(start_x, start_y with destination_x, destination_y)",
        ),
        (
            "drag_and_drop",
            {"x": 1, "y": 2, "end_x": 3, "end_y": 4, "intent": "i"},
            "(end_x, end_y with x, y)",
        ),
        (
            "drag_and_drop",
            {"start_x": 1, "start_y": 2, "end_x": 3, "end_y": 4, "x": 5, "intent": "i"},
            "(start_x, start_y, end_x, end_y with x)",
        ),
        (
            "scroll",
            {"x": 1, "y": 2, "direction": "up", "magnitude": 5, "magnitude_in_pixels": 5},
            "(magnitude_in_pixels with magnitude)",
        ),
    ],
)
def test_35_call_mixing_the_two_spellings_is_refused(
    name: str, args: dict[str, Any], mixed: str
) -> None:
    result = GEMINI_35_TABLE.validate(name, args)
    assert isinstance(result, ActionError)
    assert result.kind == "invalid_args"
    assert f"Invalid arguments for {name}: mixes two spellings {mixed}; use one of them." in (
        result.message
    )
    # the message names both spellings in full
    spec = GEMINI_35_TABLE.spec(name)
    documented, reference = (s.signature(name) for s in spec.spellings)
    assert f"Expected {documented} or {reference}." in result.message


def test_35_signatures_of_both_spellings() -> None:
    assert GEMINI_35_TABLE.spec("drag_and_drop").signature() == (
        "drag_and_drop(intent: str, start_x: int 0-999, start_y: int 0-999, end_x: int 0-999, "
        "end_y: int 0-999) or drag_and_drop(intent: str, x: int 0-999, y: int 0-999, "
        "destination_x: int 0-999, destination_y: int 0-999)"
    )
    assert GEMINI_35_TABLE.spec("scroll").signature() == (
        "scroll(intent: str, x: int 0-999, y: int 0-999, direction: up|down|left|right, "
        "magnitude_in_pixels: int 0-999 = 300) or scroll(intent: str, x: int 0-999, "
        "y: int 0-999, direction: up|down|left|right, magnitude: int 0-999)"
    )


def test_desktop_table_refuses_browser_navigation_as_unknown() -> None:
    result = GEMINI_35_DESKTOP_TABLE.validate("navigate", GOOD_ARGS_35["navigate"])
    assert isinstance(result, ActionError)
    assert result.kind == "unknown"
    assert "Unknown function 'navigate'" in result.message
    assert "triple_click" in result.message and "go_back" not in result.message
    # a 2.5 name is unknown to 3.5, and the other way round
    assert isinstance(GEMINI_35_TABLE.validate("click_at", {"x": 1, "y": 2}), ActionError)
    assert isinstance(GEMINI_25_TABLE.validate("click", GOOD_ARGS_35["click"]), ActionError)


def test_without_refuses_unknown_names() -> None:
    with pytest.raises(ValueError, match="cannot drop unknown"):
        GEMINI_35_TABLE.without(["click_at"], family="x")


@given(
    name=st.sampled_from([*DOCUMENTED_35, "click_at", "nope", ""]),
    args=st.dictionaries(
        st.sampled_from(
            [
                *("x", "y", "text", "direction", "magnitude_in_pixels", "keys", "key"),
                *("intent", "seconds", "start_x", "end_y", "url", "safety_decision"),
                *("magnitude", "destination_x", "destination_y"),
            ]
        ),
        _json,
        max_size=6,
    ),
)
def test_35_validate_never_raises(name: str, args: dict[str, Any]) -> None:
    for table in (GEMINI_35_TABLE, GEMINI_35_DESKTOP_TABLE):
        result = table.validate(name, args, excluded=["wait"])
        assert isinstance(result, (ValidatedAction, ActionError))
        if isinstance(result, ActionError):
            assert result.message
