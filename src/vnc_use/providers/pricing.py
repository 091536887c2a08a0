"""What a model call cost: the price table (``prices.json``) and the providers' usage reports.

One table, a data file in the package: per model id, USD per million input, output,
cached-input and cache-write tokens, the vendor's higher tiers (long prompts), and the page
and date each row was read from. A row prices its exact id and dated snapshots of it, never a
longer id that starts with it (``claude-opus-5-5`` is not ``claude-opus-5``). A model not in
the table has an *unknown* cost (None), never 0; ``--price INPUT/OUTPUT`` gives one. Local
models (``openai-compatible``) cost 0 unless priced.

A tier applies to the whole request whose prompt is above its threshold (output and cached
tokens included), as the vendors bill it (Claude Haiku 5.5 above 100,000 prompt tokens, Gemini
above 200,000, OpenAI's 1.05M-context models above 272K). Where a vendor publishes no
cached-input price (Gemini 2.5 Computer Use), the row prices cached tokens as input tokens and
its note says so, so a run's cost stays known when the API reports cached tokens.

Each provider reports usage in its own words; :func:`tokens_of` reads them:

- Gemini: ``prompt_token_count`` includes ``cached_content_token_count``; thinking tokens
  (``thoughts_token_count``) are billed as output;
- Anthropic: ``input_tokens`` excludes ``cache_read_input_tokens`` and
  ``cache_creation_input_tokens``;
- OpenAI (Responses and chat completions): ``input_tokens`` / ``prompt_tokens`` include the
  cached ones (``input_tokens_details.cached_tokens`` / ``prompt_tokens_details.cached_tokens``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from vnc_use.errors import ConfigError
from vnc_use.record.money import format_cost

__all__ = [
    "Price",
    "Tokens",
    "call_cost",
    "cost_of",
    "flat_usage",
    "format_cost",
    "parse_price",
    "price_for",
    "price_table",
    "raw_rows",
    "tokens_of",
    "unpriced_rows",
]

LOCAL_PROVIDER = "openai-compatible"
"""A provider whose models run on the user's own machine: free unless priced."""

REPLAY_PROVIDER = "replay"
"""A replay of a recorded run: it asks no model."""

_SNAPSHOT = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")
"""A dated snapshot of a model id (``-20251101``, ``-2026-04-23``)."""


@dataclass(frozen=True)
class Tier:
    """Prices that apply once a request's prompt is above ``above_input_tokens``."""

    above_input_tokens: int
    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None


@dataclass(frozen=True)
class Price:
    """USD per million tokens of one model (a row of the table, or ``--price``)."""

    model: str
    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None
    tiers: tuple[Tier, ...] = ()
    max_input_tokens: int | None = None
    source: str = ""
    read: str = ""

    def tier_for(self, prompt_tokens: int) -> Price | Tier | None:
        """The prices that apply to a prompt of ``prompt_tokens`` (None: not known)."""
        if self.max_input_tokens is not None and prompt_tokens > self.max_input_tokens:
            return None
        chosen: Price | Tier = self
        for tier in sorted(self.tiers, key=lambda t: t.above_input_tokens):
            if prompt_tokens > tier.above_input_tokens:
                chosen = tier
        return chosen


@dataclass(frozen=True)
class Tokens:
    """One model call's tokens, as billed: ``input`` excludes cached and cache-write ones."""

    input: int = 0
    output: int = 0
    cached_input: int = 0
    cache_write: int = 0
    prompt: int = 0
    """The whole prompt (what a long-context tier is decided on)."""
    extra: dict[str, int] = field(default_factory=dict)


def _row(raw: Mapping[str, Any]) -> Price:
    tiers = tuple(
        Tier(
            above_input_tokens=int(t["above_input_tokens"]),
            input=float(t["input"]),
            output=float(t["output"]),
            cached_input=t.get("cached_input"),
            cache_write=t.get("cache_write"),
        )
        for t in raw.get("tiers", [])
    )
    return Price(
        model=str(raw["model"]),
        input=float(raw["input"]),
        output=float(raw["output"]),
        cached_input=raw.get("cached_input"),
        cache_write=raw.get("cache_write"),
        tiers=tiers,
        max_input_tokens=raw.get("max_input_tokens"),
        source=str(raw.get("source") or ""),
        read=str(raw.get("read") or ""),
    )


@cache
def price_table() -> dict[str, Price]:
    """The package's price table by model id."""
    text = resources.files("vnc_use.providers").joinpath("prices.json").read_text("utf-8")
    return {row["model"]: _row(row) for row in json.loads(text)["models"]}


def raw_rows() -> list[dict[str, Any]]:
    """The table's rows as written (for checks of the file itself)."""
    text = resources.files("vnc_use.providers").joinpath("prices.json").read_text("utf-8")
    rows: list[dict[str, Any]] = json.loads(text)["models"]
    return rows


def unpriced_rows() -> list[dict[str, Any]]:
    """Model ids named somewhere (an SDK's model list) whose vendor publishes no price yet: kept
    out of the table on purpose (their cost stays unknown), each with the date it was looked for
    and a note."""
    text = resources.files("vnc_use.providers").joinpath("prices.json").read_text("utf-8")
    rows: list[dict[str, Any]] = json.loads(text).get("unpriced", [])
    return rows


def parse_price(text: str) -> tuple[float, float]:
    """``INPUT/OUTPUT`` in USD per million tokens (``--price 2/10``)."""
    parts = str(text).split("/")
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        values = ()
    if len(values) != 2 or not all(v >= 0 and v != float("inf") for v in values):
        raise ConfigError(
            f"--price {text!r}: give USD per million input and output tokens as INPUT/OUTPUT, "
            "e.g. --price 1.25/10"
        )
    return values[0], values[1]


def price_for(
    model: str | None, provider: str | None, given: tuple[float, float] | None = None
) -> Price | None:
    """The price of ``model``: the one given (``--price``), else the table's row (an exact id
    or a dated snapshot of it), else 0 for a local model, else None (unknown)."""
    name = model or ""
    if given is not None:
        # the user's price covers every kind of input token: cached ones at the input price
        return Price(name, given[0], given[1], given[0], given[0], source="--price")
    table = price_table()
    row = table.get(name) or table.get(_SNAPSHOT.sub("", name))
    if row is not None:
        return row
    if provider == LOCAL_PROVIDER:
        return Price(name, 0.0, 0.0, 0.0, 0.0, source="local model")
    if provider == REPLAY_PROVIDER:
        return Price(name, 0.0, 0.0, 0.0, 0.0, source="a replay asks no model")
    return None


def flat_usage(usage: Mapping[str, Any]) -> dict[str, int]:
    """A usage report's token counts, nested ones as ``outer.inner``
    (``input_tokens_details.cached_tokens``)."""
    flat: dict[str, int] = {}
    for key, value in usage.items():
        if isinstance(value, int) and not isinstance(value, bool):
            flat[key] = value
        elif isinstance(value, Mapping):
            for inner, v in value.items():
                if isinstance(v, int) and not isinstance(v, bool):
                    flat[f"{key}.{inner}"] = v
    return flat


def _int(usage: Mapping[str, Any], *keys: str) -> int:
    for key in keys:
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 0


def tokens_of(usage: Mapping[str, Any] | None, provider: str | None) -> Tokens | None:
    """The billed tokens of one call's usage report (None: the call reported none)."""
    if not usage:
        return None
    if provider == "anthropic":
        fresh = _int(usage, "input_tokens")
        read = _int(usage, "cache_read_input_tokens")
        write = _int(usage, "cache_creation_input_tokens")
        return Tokens(fresh, _int(usage, "output_tokens"), read, write, fresh + read + write)
    if "prompt_token_count" in usage or "promptTokenCount" in usage:  # Gemini
        prompt = _int(usage, "prompt_token_count", "promptTokenCount")
        prompt += _int(usage, "tool_use_prompt_token_count", "toolUsePromptTokenCount")
        cached = _int(usage, "cached_content_token_count", "cachedContentTokenCount")
        output = _int(usage, "candidates_token_count", "candidatesTokenCount")
        output += _int(usage, "thoughts_token_count", "thoughtsTokenCount")
        return Tokens(prompt - cached, output, cached, 0, prompt)
    prompt = _int(usage, "input_tokens", "prompt_tokens")
    cached = _int(
        usage,
        "input_tokens_details.cached_tokens",
        "prompt_tokens_details.cached_tokens",
        "cached_tokens",
    )
    output = _int(usage, "output_tokens", "completion_tokens")
    return Tokens(prompt - cached, output, cached, 0, prompt)


def cost_of(tokens: Tokens, price: Price) -> float | None:
    """USD for ``tokens`` at ``price`` (None when the price does not cover them: a prompt
    beyond the prices known, or cached tokens without a cached price)."""
    rates = price.tier_for(tokens.prompt)
    if rates is None:
        return None
    cached = rates.cached_input
    write = rates.cache_write
    if (tokens.cached_input and cached is None) or (tokens.cache_write and write is None):
        return None
    total = (
        tokens.input * rates.input
        + tokens.output * rates.output
        + tokens.cached_input * (cached or 0.0)
        + tokens.cache_write * (write or 0.0)
    )
    return total / 1_000_000


def call_cost(
    usage: Mapping[str, Any] | None, price: Price | None, provider: str | None
) -> float | None:
    """The cost of one model call (None: unknown: no price, or no usage reported)."""
    if price is None:
        return None
    tokens = tokens_of(usage, provider)
    if tokens is None:
        return 0.0 if price.input == 0 and price.output == 0 else None
    return cost_of(tokens, price)
