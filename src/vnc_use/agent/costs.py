"""The run's cost as the graph keeps it: each model call priced from the planner's model.

The prices and the providers' usage reports are :mod:`vnc_use.providers.pricing`'s; this
module only knows where the graph keeps the running total (``cost_usd`` and ``cost_unknown``
in state) and where the price comes from (``--price``, else the table by the planner's model).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from vnc_use.providers.pricing import Price, call_cost, format_cost, price_for

if TYPE_CHECKING:
    from vnc_use.agent.context import AgentContext

__all__ = ["call_cost", "format_cost", "planner_price", "provider_of", "run_cost", "run_total"]


def provider_of(ctx: AgentContext) -> str | None:
    """The planner's provider name (``gemini``, ``anthropic``, ...), as run.json keeps it."""
    try:
        provider = ctx.planner.run_settings().get("provider")
    except Exception:  # a planner of the caller's own without settings
        return None
    return str(provider) if provider else None


def planner_price(ctx: AgentContext) -> Price | None:
    """The price of the run's model: ``--price``, else the table's row, else unknown."""
    return price_for(ctx.planner.model, provider_of(ctx), ctx.settings.price)


def run_total(state: Mapping[str, Any], more: float | None) -> float | None:
    """The run's cost with ``more`` added (None: unknown)."""
    if state.get("cost_unknown") or more is None:
        return None
    return float(state.get("cost_usd", 0.0)) + more


def run_cost(values: Mapping[str, Any]) -> float | None:
    """The run's cost from its checkpointed state (None: unknown; 0 before any model call)."""
    return run_total(values, 0.0)
