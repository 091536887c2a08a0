"""Model families: which action set and environment a Gemini model id gets.

Google's computer-use models do not all speak the same vocabulary:

======================  ==========================================  ======================
family                  models (id prefix)                          action set
======================  ==========================================  ======================
``gemini-2.5``          ``gemini-2.5-computer-use``                 13 functions
``gemini-3``            ``gemini-3-flash``, ``gemini-3-pro``        the same 13 functions
``gemini-3.5``          ``gemini-3.5-flash``                        20 intent-bearing actions
======================  ==========================================  ======================

:func:`family_for_model` picks the family by the model id's prefix. An id no family claims gets
:data:`DEFAULT_FAMILY` (the 13-function set, which every Gemini computer-use model before 3.5
speaks) and a logged warning; name the family explicitly (``family=`` / ``--model-family``) to
use another one.

Environments are the client's view of the screen: ``"browser"`` or ``"desktop"`` (a VNC
desktop is a desktop). How a family expresses them on the wire differs:

* The 2.5 / 3 families only know ``ENVIRONMENT_BROWSER``. On a ``desktop`` the request still
  says ``ENVIRONMENT_BROWSER``, and the browser-only functions (``open_web_browser``,
  ``search``, ``navigate``, ``go_back``, ``go_forward``) are sent as
  ``excluded_predefined_functions`` by default (the caller may keep them).
* The 3.5 family sends ``ENVIRONMENT_DESKTOP``, whose action set Google defines without the
  browser navigation actions; nothing needs excluding.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from vnc_use.actions import (
    GEMINI_25_TABLE,
    GEMINI_35_DESKTOP_TABLE,
    GEMINI_35_TABLE,
    ActionTable,
)
from vnc_use.errors import ConfigError

__all__ = [
    "DEFAULT_FAMILY",
    "ENVIRONMENTS",
    "FAMILIES",
    "GEMINI_3",
    "GEMINI_25",
    "GEMINI_35",
    "EnvironmentName",
    "ModelFamily",
    "family_by_name",
    "family_for_model",
    "find_family",
    "normalize_environment",
]

log = logging.getLogger(__name__)

EnvironmentName = Literal["browser", "desktop"]
"""Where the model's actions land, as vnc-use users say it."""

ENVIRONMENTS: tuple[EnvironmentName, ...] = ("browser", "desktop")
"""The environments vnc-use supports (Google's ``ENVIRONMENT_MOBILE`` is not one of them)."""

_WIRE: dict[EnvironmentName, str] = {
    "browser": "ENVIRONMENT_BROWSER",
    "desktop": "ENVIRONMENT_DESKTOP",
}


@dataclass(frozen=True)
class ModelFamily:
    """Everything that depends on which Gemini computer-use model is asked.

    - ``table``: the family's whole action set (browser environment); each action's spec
      carries its handler;
    - ``default_environment``: used when the caller names none;
    - ``wire_environments``: the ``ComputerUse.environment`` sent for each environment;
    - ``desktop_tables``: a smaller table a desktop environment has on the wire (3.5), if any;
    - ``excludes_browser_only``: on a desktop, send ``table.browser_only`` as
      ``excluded_predefined_functions`` by default (families without a desktop environment);
    - ``prefixes``: model ids this family claims (lower-case prefixes).
    """

    name: str
    description: str
    prefixes: tuple[str, ...]
    table: ActionTable
    default_environment: EnvironmentName
    wire_environments: Mapping[EnvironmentName, str]
    excludes_browser_only: bool
    desktop_table: ActionTable | None = None
    example_model: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def table_for(self, environment: EnvironmentName) -> ActionTable:
        """The action set the model has in ``environment``."""
        if environment == "desktop" and self.desktop_table is not None:
            return self.desktop_table
        return self.table

    def wire_environment(self, environment: EnvironmentName) -> str:
        """The ``ComputerUse.environment`` enum value sent for ``environment``."""
        return self.wire_environments[environment]

    def default_exclusions(self, environment: EnvironmentName) -> tuple[str, ...]:
        """Functions excluded by default in ``environment`` (in table order)."""
        if environment == "desktop" and self.excludes_browser_only:
            return tuple(n for n in self.table.names if n in self.table.browser_only)
        return ()

    def claims(self, model_id: str) -> bool:
        """True when ``model_id`` starts with one of this family's prefixes."""
        name = _bare(model_id)
        return any(name.startswith(p) for p in self.prefixes)


GEMINI_25 = ModelFamily(
    name="gemini-2.5",
    description="Gemini 2.5 Computer Use preview: 13 predefined functions, browser-optimised.",
    prefixes=("gemini-2.5-",),
    table=GEMINI_25_TABLE,
    default_environment="browser",
    wire_environments={"browser": "ENVIRONMENT_BROWSER", "desktop": "ENVIRONMENT_BROWSER"},
    excludes_browser_only=True,
    example_model="gemini-2.5-computer-use-preview-10-2025",
)
"""Gemini 2.5 Computer Use (``gemini-2.5-computer-use-preview-10-2025``)."""

GEMINI_3 = ModelFamily(
    name="gemini-3",
    description="Gemini 3 / 3.1 Flash and Pro with built-in computer use: the same 13 functions.",
    prefixes=("gemini-3-", "gemini-3.0-", "gemini-3.1-"),
    table=GEMINI_25_TABLE,
    default_environment="browser",
    wire_environments={"browser": "ENVIRONMENT_BROWSER", "desktop": "ENVIRONMENT_BROWSER"},
    excludes_browser_only=True,
    example_model="gemini-3-flash-preview",
    notes=("needs its thought signatures echoed back (vnc-use keeps model turns unchanged)",),
)
"""Gemini 3 Flash / Pro and 3.1 Pro (``gemini-3-flash-preview``, ``gemini-3.1-pro-preview``)."""

GEMINI_35 = ModelFamily(
    name="gemini-3.5",
    description="Gemini 3.5 Flash computer use: intent-bearing actions, desktop environment.",
    prefixes=("gemini-3.5-",),
    table=GEMINI_35_TABLE,
    default_environment="desktop",
    wire_environments=dict(_WIRE),
    excludes_browser_only=False,
    desktop_table=GEMINI_35_DESKTOP_TABLE,
    example_model="gemini-3.5-flash",
    notes=("needs its thought signatures echoed back (vnc-use keeps model turns unchanged)",),
)
"""Gemini 3.5 Flash (``gemini-3.5-flash``)."""

FAMILIES: tuple[ModelFamily, ...] = (GEMINI_25, GEMINI_3, GEMINI_35)
"""Every known family, in the order their prefixes are tried."""

DEFAULT_FAMILY = GEMINI_35
"""The family of a model id no family claims. Only the 2.5 / 3 / 3.1 generations speak the 13
legacy functions; Google's reference agent (google-gemini/computer-use-preview) gives every
model off its legacy list the action set "used in gemini-3.5-flash and future models"."""


def _bare(model_id: str) -> str:
    name = model_id.strip().lower()
    return name.removeprefix("models/")


def find_family(model_id: str) -> ModelFamily | None:
    """The family that claims ``model_id`` by prefix, or None (no warning)."""
    for family in FAMILIES:
        if family.claims(model_id):
            return family
    return None


def family_for_model(model_id: str) -> ModelFamily:
    """The family of ``model_id``; an id no family claims gets :data:`DEFAULT_FAMILY` (the
    action set of Gemini 3.5 and newer models) and a warning naming that assumption."""
    family = find_family(model_id)
    if family is None:
        known = ", ".join(p for f in FAMILIES for p in f.prefixes)
        log.warning(
            "Unknown model %r: assuming it speaks the %s action set, as models newer than "
            "Gemini 3.1 do (known model prefixes: %s). Name the family explicitly "
            "(family= / --model-family) if this model speaks another one.",
            model_id,
            DEFAULT_FAMILY.name,
            known,
        )
        return DEFAULT_FAMILY
    return family


def family_by_name(name: str) -> ModelFamily:
    """The family called ``name`` (``gemini-2.5``, ``gemini-3``, ``gemini-3.5``)."""
    for family in FAMILIES:
        if family.name == name.strip().lower():
            return family
    known = ", ".join(f.name for f in FAMILIES)
    raise ConfigError(f"Unknown model family {name!r}; use one of {known}.")


def normalize_environment(value: str) -> EnvironmentName:
    """``browser`` / ``desktop`` from either spelling (``desktop``, ``ENVIRONMENT_DESKTOP``).

    Raises :class:`~vnc_use.errors.ConfigError` for anything else (``mobile`` included: vnc-use
    drives desktops, and the mobile action set has no VNC meaning).
    """
    text = value.strip().lower() if isinstance(value, str) else ""
    short = text.removeprefix("environment_")
    if short == "browser":
        return "browser"
    if short == "desktop":
        return "desktop"
    if short == "mobile":
        raise ConfigError(
            f"Environment {value!r} is not supported by vnc-use; use browser or desktop."
        )
    raise ConfigError(f"Unknown environment {value!r}; use one of browser, desktop.")
