"""Model families: which action set, environment and exclusions a model id gets."""

from __future__ import annotations

import logging
import threading

import pytest
from google.genai import types

from vnc_use.actions import (
    GEMINI_25_TABLE,
    GEMINI_35_DESKTOP_TABLE,
    GEMINI_35_TABLE,
    ValidatedAction,
    WaitArgs,
)
from vnc_use.actions.execute import ActionContext, execute
from vnc_use.desktops.vnc import VNCController
from vnc_use.errors import ConfigError
from vnc_use.providers.gemini.families import (
    DEFAULT_FAMILY,
    FAMILIES,
    GEMINI_3,
    GEMINI_25,
    GEMINI_35,
    family_by_name,
    family_for_model,
    find_family,
    normalize_environment,
)
from vnc_use.providers.gemini.planner import DEFAULT_MODEL, GeminiComputerUse

BROWSER_ONLY_25 = ["open_web_browser", "go_back", "go_forward", "search", "navigate"]


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("gemini-2.5-computer-use-preview-10-2025", GEMINI_25),
        ("models/gemini-2.5-computer-use-preview-10-2025", GEMINI_25),
        ("gemini-3-flash-preview", GEMINI_3),
        ("gemini-3-pro-preview", GEMINI_3),
        ("gemini-3.1-pro-preview", GEMINI_3),
        ("gemini-3.1-flash-preview", GEMINI_3),
        ("gemini-2.5-flash", GEMINI_25),
        ("gemini-3.5-flash", GEMINI_35),
        ("Gemini-3.5-Flash-preview-06-2026", GEMINI_35),
    ],
)
def test_family_by_prefix(model: str, family: object, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="vnc_use"):
        assert family_for_model(model) is family
    assert caplog.records == []


@pytest.mark.parametrize(
    "model", ["gemini-4-flash", "gemini-3.6-pro", "gemini-9-ultra", "my-proxy-model", ""]
)
def test_unknown_model_gets_the_new_action_set_with_a_warning(
    model: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 17 item 5: models newer than the 2.5 / 3 / 3.1 generations speak 3.5's actions
    (Google's reference agent: the legacy list is explicit, everything else is new)."""
    assert find_family(model) is None
    with caplog.at_level(logging.WARNING, logger="vnc_use"):
        assert family_for_model(model) is DEFAULT_FAMILY is GEMINI_35
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert f"Unknown model {model!r}: assuming it speaks the gemini-3.5 action set" in (
        record.getMessage()
    )
    planner = GeminiComputerUse(model=model or "gemini-4-flash")
    assert planner.environment == "desktop" and planner.action_table is GEMINI_35_DESKTOP_TABLE
    # --model-family still overrides the assumption
    assert GeminiComputerUse(model=model, family="gemini-2.5").action_table is GEMINI_25_TABLE


def test_every_family_has_a_handler_per_action_and_an_example_model() -> None:
    assert [f.name for f in FAMILIES] == ["gemini-2.5", "gemini-3", "gemini-3.5"]
    for family in FAMILIES:
        for env in ("browser", "desktop"):  # each action's spec carries its handler
            for spec in family.table_for(env).specs.values():
                assert callable(spec.handler), (family.name, spec.name)
        assert family_for_model(family.example_model) is family
        assert family_by_name(family.name) is family
    assert GEMINI_35.table_for("desktop").spec("click") is GEMINI_35_TABLE.spec("click")
    with pytest.raises(ConfigError, match="Unknown model family 'gemini-4'"):
        family_by_name("gemini-4")


def test_environments_and_default_exclusions() -> None:
    assert GEMINI_25.default_environment == GEMINI_3.default_environment == "browser"
    assert GEMINI_35.default_environment == "desktop"
    for family in (GEMINI_25, GEMINI_3):
        assert family.wire_environment("desktop") == "ENVIRONMENT_BROWSER"
        assert family.table_for("desktop") is GEMINI_25_TABLE
        assert list(family.default_exclusions("desktop")) == BROWSER_ONLY_25
        assert family.default_exclusions("browser") == ()
    assert GEMINI_35.wire_environment("desktop") == "ENVIRONMENT_DESKTOP"
    assert GEMINI_35.wire_environment("browser") == "ENVIRONMENT_BROWSER"
    assert GEMINI_35.table_for("desktop") is GEMINI_35_DESKTOP_TABLE
    assert GEMINI_35.table_for("browser") is GEMINI_35_TABLE
    assert GEMINI_35.default_exclusions("desktop") == ()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("desktop", "desktop"),
        ("ENVIRONMENT_DESKTOP", "desktop"),
        (" Browser ", "browser"),
        ("ENVIRONMENT_BROWSER", "browser"),
    ],
)
def test_environment_spellings(value: str, expected: str) -> None:
    assert normalize_environment(value) == expected


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("mobile", "not supported by vnc-use"),
        ("ENVIRONMENT_MOBILE", "not supported by vnc-use"),
        ("ENVIRONMENT_MARS", "Unknown environment"),
        ("", "Unknown environment"),
    ],
)
def test_unsupported_environments_are_config_errors(value: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        normalize_environment(value)


# ------------------------------------------------------------------ the planner's choice


def _computer_use(planner: GeminiComputerUse) -> types.ComputerUse:
    tools = planner.config.tools or []
    cu = tools[0].computer_use  # type: ignore[union-attr]
    assert cu is not None
    return cu


def test_default_planner_is_unchanged_gemini_25_in_the_browser() -> None:
    planner = GeminiComputerUse()
    assert planner.model == DEFAULT_MODEL
    assert planner.family is GEMINI_25 and planner.environment == "browser"
    assert planner.action_table is GEMINI_25_TABLE
    assert planner.excluded_actions == []
    cu = _computer_use(planner)
    assert cu.environment == types.Environment.ENVIRONMENT_BROWSER
    assert cu.excluded_predefined_functions is None


@pytest.mark.parametrize("model", [DEFAULT_MODEL, "gemini-3-flash-preview"])
def test_13_function_families_on_a_desktop_exclude_the_browser_functions(model: str) -> None:
    planner = GeminiComputerUse(model=model, environment="desktop", excluded_actions=["hover_at"])
    assert planner.environment == "desktop"
    assert planner.excluded_actions == ["hover_at", *BROWSER_ONLY_25]
    cu = _computer_use(planner)
    assert cu.environment == types.Environment.ENVIRONMENT_BROWSER  # their only environment
    assert cu.excluded_predefined_functions == ["hover_at", *BROWSER_ONLY_25]
    # the user can keep them
    kept = GeminiComputerUse(model=model, environment="desktop", keep_browser_actions=True)
    assert kept.excluded_actions == []
    assert _computer_use(kept).excluded_predefined_functions is None
    # naming one twice does not send it twice
    twice = GeminiComputerUse(model=model, environment="desktop", excluded_actions=["search"])
    assert twice.excluded_actions.count("search") == 1


def test_gemini_35_defaults_to_the_desktop_environment() -> None:
    planner = GeminiComputerUse(model="gemini-3.5-flash")
    assert planner.family is GEMINI_35
    assert planner.environment == "desktop"
    assert planner.action_table is GEMINI_35_DESKTOP_TABLE
    assert planner.excluded_actions == []
    cu = _computer_use(planner)
    assert cu.environment == types.Environment.ENVIRONMENT_DESKTOP
    assert cu.excluded_predefined_functions is None
    browser = GeminiComputerUse(model="gemini-3.5-flash", environment="browser")
    assert browser.action_table is GEMINI_35_TABLE
    assert _computer_use(browser).environment == types.Environment.ENVIRONMENT_BROWSER


def test_family_can_be_named_for_an_unknown_model(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="vnc_use"):
        planner = GeminiComputerUse(model="gemini-3.6-flash", family="gemini-3.5")
    assert caplog.records == []
    assert planner.family is GEMINI_35 and planner.environment == "desktop"
    assert GeminiComputerUse(model="x", family=GEMINI_3).family is GEMINI_3


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"model": "gemini-3.5-flash", "excluded_actions": ["click_at"]}, "Unknown excluded"),
        ({"model": "gemini-3.5-flash", "excluded_actions": ["navigate"]}, "Unknown excluded"),
        (
            {"model": "gemini-3.5-flash", "keep_browser_actions": True},
            "keep_browser_actions has no effect",
        ),
        ({"environment": "mobile"}, "not supported"),
        ({"family": "gemini-1"}, "Unknown model family"),
    ],
)
def test_bad_family_settings_are_config_errors(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        GeminiComputerUse(**kwargs)  # type: ignore[arg-type]


def test_35_excludes_its_own_names() -> None:
    planner = GeminiComputerUse(model="gemini-3.5-flash", excluded_actions=["middle_click"])
    assert _computer_use(planner).excluded_predefined_functions == ["middle_click"]
    refused = planner.action_table.validate(
        "middle_click", {"x": 1, "y": 2, "intent": "i"}, excluded=planner.excluded_actions
    )
    assert not isinstance(refused, ValidatedAction)
    assert refused.kind == "excluded"


# ------------------------------------------------------------------ executor dispatch


def test_execute_runs_the_specs_own_handler_and_refuses_arguments_of_another_model() -> None:
    stop = threading.Event()
    stop.set()
    ctx = ActionContext(hands=VNCController(), width=100, height=100, stop=stop)  # unconnected
    # the handler comes with the spec, whatever table the action names
    stray = ValidatedAction("wait", WaitArgs(intent="i"), GEMINI_35_TABLE.spec("wait"), None, "x")
    assert execute(stray, ctx) == {}
    # arguments that are not the spec's model never reach its handler (answered as an error)
    wrong = ValidatedAction("wait", WaitArgs(intent="i"), GEMINI_25_TABLE.spec("click_at"))
    with pytest.raises(TypeError, match="click_at takes PointArgs"):
        execute(wrong, ctx)


def test_wait_is_cut_short_by_the_stop_event_and_capped() -> None:
    stop = threading.Event()
    stop.set()  # the run is stopping: a long wait returns at once
    ctx = ActionContext(hands=VNCController(), width=100, height=100, stop=stop)
    action = GEMINI_35_TABLE.validate("wait", {"seconds": 3600, "intent": "wait long"})
    assert isinstance(action, ValidatedAction)
    assert execute(action, ctx) == {}
    assert ctx.max_wait_seconds == 60.0
