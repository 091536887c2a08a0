"""Money as people read it in reports, progress lines and listings."""

from __future__ import annotations

__all__ = ["format_cost"]


def format_cost(cost: float | None) -> str:
    """``$0.0123`` (USD), or ``cost unknown`` for None (a model with no known price)."""
    if cost is None:
        return "cost unknown"
    return f"${cost:.4f}"
