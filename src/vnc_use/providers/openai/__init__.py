"""OpenAI's GA computer-use models (``gpt-5.5``, ``gpt-5.4``) through the Responses API.

- :mod:`~vnc_use.providers.openai.planner` -- :class:`OpenAIPlanner`, the
  :class:`~vnc_use.providers.base.Planner`;
- :mod:`~vnc_use.providers.openai.request` -- what the API is sent (stateless replay);
- :mod:`~vnc_use.providers.openai.actions` -- ``computer_call`` actions in vnc-use's
  vocabulary on the 0-999 grid.

Distinct from :mod:`vnc_use.providers.openai_compat` (chat completions, local models). Needs
the optional extra ``pip install 'vnc-use[openai]'`` (importing the planner raises
:class:`~vnc_use.errors.ConfigError` without it).
"""

from vnc_use.providers.openai.planner import DEFAULT_MODEL, PROVIDER, OpenAIPlanner

__all__ = ["DEFAULT_MODEL", "PROVIDER", "OpenAIPlanner"]
