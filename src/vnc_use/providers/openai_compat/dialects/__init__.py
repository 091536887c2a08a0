"""The dialects open model families answer in, each read into the Gemini 3.5 desktop set.

===============  ==========================================  ===============================
dialect          how actions come back                        coordinates
===============  ==========================================  ===============================
``tools``        native ``tool_calls`` of our declared set    the 0-999 grid
``qwen3-vl``     ``<tool_call>`` ``computer_use`` blocks      relative 0-1000
``qwen2.5-vl``   ``<tool_call>`` ``computer_use`` blocks      pixels of the resized image
``ui-tars``      ``Thought: ...`` / ``Action: click(...)``    pixels of the resized image
``holo``         one JSON object, flat ``tool_call``          relative 0-1000
``ui-venus``     ``<think>`` + ``<action>Click(...)``         relative 0-999
``opencua``      ``## Code:`` ``pyautogui.click(x=, y=)``     pixels of the resized image
===============  ==========================================  ===============================

Each new family's convention is cited at its source in its module's docstring. Qwen3.5 ids
(``Qwen/Qwen3.5-35B-A3B``, native vision models without ``-VL``) go to ``qwen3-vl``: no
computer-use format of Qwen's own for 3.5 was found that differs (unverified; H Company's
Holo3, built on it, answers 0-1000 like Qwen3-VL) -- ``vnc-use calibrate`` checks it.

:func:`dialect_for_model` picks one from the model id; :func:`dialect_by_name` by name.
"""

from __future__ import annotations

from collections.abc import Callable

from vnc_use.errors import ConfigError
from vnc_use.providers.openai_compat.dialects.base import Dialect, Frame, Parsed, ParseError
from vnc_use.providers.openai_compat.dialects.holo import Holo
from vnc_use.providers.openai_compat.dialects.opencua import OpenCUA
from vnc_use.providers.openai_compat.dialects.qwen3_vl import Qwen3VL
from vnc_use.providers.openai_compat.dialects.qwen25_vl import Qwen25VL
from vnc_use.providers.openai_compat.dialects.tools import Tools
from vnc_use.providers.openai_compat.dialects.ui_tars import UITars
from vnc_use.providers.openai_compat.dialects.ui_venus import UIVenus

__all__ = [
    "DIALECT_NAMES",
    "Dialect",
    "Frame",
    "ParseError",
    "Parsed",
    "dialect_by_name",
    "dialect_for_model",
]

DIALECT_NAMES = ("tools", "qwen3-vl", "qwen2.5-vl", "ui-tars", "holo", "ui-venus", "opencua")
"""Every dialect, by the name ``--dialect`` takes."""


_FACTORIES: dict[str, Callable[[], Dialect]] = {
    "tools": Tools,
    "qwen3-vl": Qwen3VL,
    "qwen2.5-vl": Qwen25VL,
    "ui-tars": UITars,
    "holo": Holo,
    "ui-venus": UIVenus,
    "opencua": OpenCUA,
}


def dialect_by_name(name: str) -> Dialect:
    """A new dialect object for ``name`` (ConfigError for an unknown name)."""
    factory = _FACTORIES.get(name)
    if factory is None:
        raise ConfigError(f"Unknown dialect {name!r}; known: {', '.join(DIALECT_NAMES)}.")
    return factory()


_BY_ID = (
    ("uitars", "ui-tars"),
    ("holo", "holo"),
    ("venus", "ui-venus"),
    ("opencua", "opencua"),
    ("qwen3vl", "qwen3-vl"),
    ("qwen3.5", "qwen3-vl"),
    ("qwen35", "qwen3-vl"),
    ("qwen2.5vl", "qwen2.5-vl"),
    ("qwen25", "qwen2.5-vl"),
)


def dialect_for_model(model: str) -> str:
    """The dialect a model id suggests: ``ui-tars`` ids -> ``ui-tars``, ``holo`` (H Company's
    ``Holo-3.1-35B-A3B``, ``holo3-1-35b-a3b``) -> ``holo``, ``venus`` -> ``ui-venus``,
    ``opencua`` -> ``opencua``, ``qwen3-vl`` and ``qwen3.5`` -> ``qwen3-vl``, ``qwen2.5-vl`` /
    ``qwen2_5`` -> ``qwen2.5-vl`` (dashes, underscores and spaces ignored, so Ollama's
    ``qwen2.5vl:7b`` too), anything else ``tools``."""
    compact = "".join(c for c in model.lower() if c not in "-_ ")  # Ollama: qwen2.5vl:7b
    for needle, dialect in _BY_ID:
        if needle in compact:
            return dialect
    return "tools"
