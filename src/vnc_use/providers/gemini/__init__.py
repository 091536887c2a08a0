"""Planners: the part that asks a model what to do next.

Each planner lives in its own module; ``gemini`` wraps Google's Gemini Computer Use models
(the model families and their action sets are in :mod:`vnc_use.providers.gemini.families`).
"""

from vnc_use.providers.gemini.families import FAMILIES, ModelFamily, family_for_model
from vnc_use.providers.gemini.planner import (
    DEFAULT_MODEL,
    CustomFunction,
    GeminiComputerUse,
    Proposal,
    prune_screenshots,
)

__all__ = [
    "DEFAULT_MODEL",
    "FAMILIES",
    "CustomFunction",
    "GeminiComputerUse",
    "ModelFamily",
    "Proposal",
    "family_for_model",
    "prune_screenshots",
]
