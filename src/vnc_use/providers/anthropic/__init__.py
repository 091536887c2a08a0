"""Claude's computer-use tools, through the official ``anthropic`` SDK.

- :mod:`~vnc_use.providers.anthropic.planner` -- :class:`AnthropicPlanner` (the only importer
  of ``anthropic``);
- :mod:`~vnc_use.providers.anthropic.versions` -- the model -> tool version table (with its
  source) and each model's image limits;
- :mod:`~vnc_use.providers.anthropic.request` -- what Claude is sent;
- :mod:`~vnc_use.providers.anthropic.translate` -- Claude's actions in vnc-use's vocabulary.

Needs the optional extra: ``pip install 'vnc-use[anthropic]'`` (importing the planner raises
:class:`~vnc_use.errors.ConfigError` without it).
"""

from vnc_use.providers.anthropic.versions import TOOL_VERSIONS, choose

__all__ = ["TOOL_VERSIONS", "choose"]
