"""The one place the official ``openai`` SDK is imported.

Two providers speak through it: ``openai-compatible`` (chat completions, local servers,
:mod:`vnc_use.providers.openai_compat`) and ``openai`` (the Responses API with the GA
``computer`` tool, :mod:`vnc_use.providers.openai`). Both import :data:`openai` from here, so
a missing optional extra fails the same way for both: one
:class:`~vnc_use.errors.ConfigError` line with the install command.
"""

from __future__ import annotations

from vnc_use.errors import ConfigError

try:
    import openai
except ImportError as exc:  # the optional extra is not installed
    raise ConfigError(
        "The openai and openai-compatible providers need the openai package: "
        "pip install 'vnc-use[openai]'."
    ) from exc

__all__ = ["openai"]
