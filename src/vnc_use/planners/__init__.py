"""Planners: the part that asks a model what to do next.

Each planner lives in its own module; ``gemini`` wraps Google's Gemini Computer Use model.
"""

from vnc_use.planners.gemini import (
    DEFAULT_MODEL,
    CustomFunction,
    GeminiComputerUse,
    Proposal,
    prune_screenshots,
)

__all__ = [
    "DEFAULT_MODEL",
    "CustomFunction",
    "GeminiComputerUse",
    "Proposal",
    "prune_screenshots",
]
