"""Open and local models behind any OpenAI-compatible server, through the ``openai`` SDK.

- :mod:`~vnc_use.providers.openai_compat.planner` -- :class:`OpenAICompatPlanner`, the
  :class:`~vnc_use.providers.base.Planner` (``openai`` from
  :mod:`vnc_use.providers.openai_sdk`);
- :mod:`~vnc_use.providers.openai_compat.request` -- what the model is sent;
- :mod:`~vnc_use.providers.openai_compat.dialects` -- how each family answers (``tools``,
  ``qwen3-vl``, ``qwen2.5-vl``, ``ui-tars``), read into the Gemini 3.5 desktop action set;
- :mod:`~vnc_use.providers.openai_compat.resize` -- the Qwen family's image resize rule.

Needs the optional extra: ``pip install 'vnc-use[openai]'`` (importing this package raises
:class:`~vnc_use.errors.ConfigError` without it).
"""

from vnc_use.providers.openai_compat.dialects import DIALECT_NAMES, dialect_for_model
from vnc_use.providers.openai_compat.planner import PROVIDER, OpenAICompatPlanner

__all__ = ["DIALECT_NAMES", "PROVIDER", "OpenAICompatPlanner", "dialect_for_model"]
