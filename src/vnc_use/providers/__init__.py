"""Model providers: each turns vnc-use's history into its model's request and the model's
answer into vnc-use's action vocabulary. :mod:`vnc_use.providers.base` is the boundary the agent
depends on (:class:`~vnc_use.providers.base.Planner`); one provider per package (``gemini``)."""
