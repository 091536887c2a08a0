"""The dialects open model families answer in, each read into the Gemini 3.5 desktop set.

===============  ==========================================  ===============================
dialect          how actions come back                        coordinates
===============  ==========================================  ===============================
``tools``        native ``tool_calls`` of our declared set    the 0-999 grid
``qwen3-vl``     ``<tool_call>`` ``computer_use`` blocks      relative 0-1000
``qwen2.5-vl``   ``<tool_call>`` ``computer_use`` blocks      pixels of the resized image
``ui-tars``      ``Thought: ...`` / ``Action: click(...)``    pixels of the resized image
===============  ==========================================  ===============================

:func:`dialect_for_model` picks one from the model id; :func:`dialect_by_name` by name.
"""

from __future__ import annotations

from vnc_use.errors import ConfigError
from vnc_use.providers.openai_compat.dialects.base import Dialect, Frame, Parsed, ParseError
from vnc_use.providers.openai_compat.dialects.qwen3_vl import Qwen3VL
from vnc_use.providers.openai_compat.dialects.qwen25_vl import Qwen25VL
from vnc_use.providers.openai_compat.dialects.tools import Tools
from vnc_use.providers.openai_compat.dialects.ui_tars import UITars

__all__ = [
    "DIALECT_NAMES",
    "Dialect",
    "Frame",
    "ParseError",
    "Parsed",
    "dialect_by_name",
    "dialect_for_model",
]

DIALECT_NAMES = ("tools", "qwen3-vl", "qwen2.5-vl", "ui-tars")
"""Every dialect, by the name ``--dialect`` takes."""


def dialect_by_name(name: str) -> Dialect:
    """A new dialect object for ``name`` (ConfigError for an unknown name)."""
    if name == "tools":
        return Tools()
    if name == "qwen3-vl":
        return Qwen3VL()
    if name == "qwen2.5-vl":
        return Qwen25VL()
    if name == "ui-tars":
        return UITars()
    raise ConfigError(f"Unknown dialect {name!r}; known: {', '.join(DIALECT_NAMES)}.")


def dialect_for_model(model: str) -> str:
    """The dialect a model id suggests: ``ui-tars`` ids -> ``ui-tars``, ``qwen3-vl`` ->
    ``qwen3-vl``, ``qwen2.5-vl`` / ``qwen2_5`` -> ``qwen2.5-vl`` (dashes, underscores and
    spaces ignored, so Ollama's ``qwen2.5vl:7b`` too), anything else ``tools``."""
    compact = "".join(c for c in model.lower() if c not in "-_ ")  # Ollama: qwen2.5vl:7b
    if "uitars" in compact:
        return "ui-tars"
    if "qwen3vl" in compact:
        return "qwen3-vl"
    if "qwen2.5vl" in compact or "qwen25" in compact:
        return "qwen2.5-vl"
    return "tools"
