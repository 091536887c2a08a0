"""Model providers: each turns vnc-use's history into its model's request and the model's
answer into vnc-use's action vocabulary. :mod:`vnc_use.providers.base` is the boundary the agent
depends on (:class:`~vnc_use.providers.base.Planner`); one provider per package (``gemini``,
``anthropic``, ``openai``, ``openai_compat``; the ``openai`` SDK is imported in
:mod:`~vnc_use.providers.openai_sdk` only); :mod:`vnc_use.providers.registry` makes a
provider's planner from its name and settings (``--provider``, ``run.json``) without importing
any SDK before it is needed."""

from vnc_use.providers.registry import PROVIDERS, make_planner, planner_from_settings

__all__ = ["PROVIDERS", "make_planner", "planner_from_settings"]
