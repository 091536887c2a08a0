"""Google's Gemini Computer Use models, through the ``google-genai`` SDK.

- :mod:`~vnc_use.providers.gemini.request` -- what the model is sent (tools, history, replies);
- :mod:`~vnc_use.providers.gemini.planner` -- :class:`GeminiComputerUse`, the
  :class:`~vnc_use.providers.base.Planner` that sends it and reads the answer;
- :mod:`~vnc_use.providers.gemini.families` -- the model families and their action sets.

Only this package imports ``google.genai``.
"""

from vnc_use.providers.base import Proposal
from vnc_use.providers.gemini.families import FAMILIES, ModelFamily, family_for_model
from vnc_use.providers.gemini.planner import (
    DEFAULT_MODEL,
    CustomFunction,
    GeminiComputerUse,
)

__all__ = [
    "DEFAULT_MODEL",
    "FAMILIES",
    "CustomFunction",
    "GeminiComputerUse",
    "ModelFamily",
    "Proposal",
    "family_for_model",
]
