"""The price table against the models vnc-use names, and runs of newly priced models.

Every model id the docs, the README or a provider's defaults name has a row with the vendor's
page and the date it was read; the lookup is exact (a longer id is never priced as the one it
starts with); a row prices every kind of token its provider reports, so a run's cost stays
known when the API reports cached tokens; and a long prompt is billed whole at the tier it
falls in. The runs drive the vendors' stand-ins through their official SDKs on a FakeDesktop
with chosen usage, under ``--max-cost`` (``max_cost=``), which stops a run whose cost turns
unknown.
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from vnc_use import VncUseAgent
from vnc_use.providers.anthropic.planner import DEFAULT_MODEL as CLAUDE_DEFAULT
from vnc_use.providers.anthropic.planner import AnthropicPlanner
from vnc_use.providers.gemini.families import FAMILIES
from vnc_use.providers.gemini.planner import DEFAULT_MODEL as GEMINI_DEFAULT
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.providers.openai.planner import DEFAULT_MODEL as OPENAI_DEFAULT
from vnc_use.providers.openai.planner import KNOWN_MODELS, OpenAIPlanner
from vnc_use.providers.pricing import (
    Price,
    Tokens,
    cost_of,
    price_for,
    price_table,
    raw_rows,
    tokens_of,
    unpriced_rows,
)
from vnc_use.status import RunStatus
from vnc_use.testing import FakeDesktop
from vnc_use.testing.anthropic_standin import Action, AnthropicStandIn
from vnc_use.testing.anthropic_standin import Reply as ClaudeReply
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.openai_responses_standin import OpenAIResponsesStandIn, Turn

from doc_pages import all_pages
from gemini_fixtures import FAST_RETRY

M = 1_000_000

PROVIDER_OF_PREFIX = {"claude": "anthropic", "gpt": "openai", "gemini": "gemini"}
VENDOR_HOSTS = {
    "anthropic": ("platform.claude.com", "docs.anthropic.com", "www.anthropic.com"),
    "openai": ("developers.openai.com", "platform.openai.com", "openai.com"),
    "gemini": ("ai.google.dev", "cloud.google.com"),
}
MODEL_ID = re.compile(
    r"(?<![\w#/.-])((?:claude|gpt|gemini)-[A-Za-z0-9][A-Za-z0-9.-]*[A-Za-z0-9])(?![\w-])"
)
"""A vendor model id in prose (not a link's anchor, not a prefix such as ``gemini-3-``)."""

ISSUE_38 = (
    "claude-sonnet-5-5",
    "claude-sonnet-5",
    "claude-opus-5-5",
    "claude-haiku-5-5",
    "claude-fable-5-1",
    "claude-mythos-5-1",
    "gemini-3.1-pro-preview",
    "gpt-5.5",
    "gpt-5.4",
)
"""The models issue 38 found unpriced (or priced only below 270K tokens)."""


def _provider(model: str) -> str:
    return PROVIDER_OF_PREFIX[model.split("-", 1)[0]]


def _named_ids() -> dict[str, str]:
    """Every vendor model id the docs, the README and the defaults name -> where it is named.

    Family names (``gemini-2.5``) are not model ids; OpenAI's ``computer-use-preview`` is
    refused by vnc-use (never called, never billed) and does not match the pattern."""
    families = {f.name for f in FAMILIES}
    named: dict[str, str] = {}
    for page in all_pages():
        for match in MODEL_ID.finditer(page.read_text("utf-8")):
            if match.group(1) not in families:
                named.setdefault(match.group(1), page.name)
    defaults = {
        GEMINI_DEFAULT: "gemini default",
        CLAUDE_DEFAULT: "anthropic default",
        OPENAI_DEFAULT: "openai default",
        **{m: "openai KNOWN_MODELS" for m in KNOWN_MODELS},
        **{f.example_model: f"family {f.name}" for f in FAMILIES},
        **{m: "issue 38" for m in ISSUE_38},
    }
    for model, where in defaults.items():
        named.setdefault(model, where)
    return named


def _row_of(price: Price) -> dict[str, Any]:
    return next(r for r in raw_rows() if r["model"] == price.model)


# -- the table -----------------------------------------------------------------------------


def test_every_model_id_the_docs_and_defaults_name_has_a_row_with_its_source_and_date() -> None:
    named = _named_ids()
    assert {"claude-sonnet-5-5", "gemini-2.5-computer-use-preview-10-2025", "gpt-5.5"} <= set(named)
    for model, where in sorted(named.items()):
        price = price_for(model, _provider(model))
        assert price is not None, f"{model} (named in {where}) has no row in prices.json"
        row = _row_of(price)
        assert urlsplit(row["source"]).scheme == "https", f"{model}: no source page"
        date.fromisoformat(row["read"])


def test_each_row_names_the_vendors_page_and_marks_secondary_sources() -> None:
    for row in raw_rows():
        host = urlsplit(row["source"]).netloc
        assert host in VENDOR_HOSTS[row["provider"]], f"{row['model']}: {host} is not the vendor's"
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", row["read"]), row["model"]
        for page in row.get("secondary", []):
            assert urlsplit(page).scheme == "https" and urlsplit(page).netloc, row["model"]


def test_every_row_prices_every_kind_of_token_its_provider_reports() -> None:
    """A cached (or, for Claude, cache-write) token never makes a priced model's cost unknown."""
    for model, price in price_table().items():
        provider = _row_of(price)["provider"]
        for rates in (price, *price.tiers):
            assert rates.cached_input is not None, f"{model}: no cached-input price"
            if provider == "anthropic":
                assert rates.cache_write is not None, f"{model}: no cache-write price"


def test_the_lookup_is_exact_a_longer_id_is_not_priced_as_its_prefix() -> None:
    table = price_table()
    opus55 = price_for("claude-opus-5-5", "anthropic")
    assert opus55 is table["claude-opus-5-5"] and (opus55.input, opus55.output) == (4.0, 20.0)
    assert price_for("claude-opus-5", "anthropic") is table["claude-opus-5"]
    assert table["claude-opus-5"].input == 5.0
    fable51 = price_for("claude-fable-5-1", "anthropic")
    assert fable51 is not None and fable51.cached_input == 0.25
    assert table["claude-fable-5"].cached_input == 1.0
    assert price_for("claude-sonnet-5-5", "anthropic") is table["claude-sonnet-5-5"]
    # a dated snapshot is its model; an id the table does not hold is unknown, never borrowed
    assert price_for("claude-opus-5-5-20261001", "anthropic") is table["claude-opus-5-5"]
    for unknown in ("claude-opus-5-6", "claude-haiku-5", "gpt-5.5-pro", "gemini-3.1-pro"):
        assert price_for(unknown, _provider(unknown)) is None, unknown


def test_models_without_a_published_price_stay_unknown_and_say_why() -> None:
    unpriced = {row["model"]: row for row in unpriced_rows()}
    assert set(unpriced) == {"claude-fable-5-2", "claude-mythos-5-2"}
    for model, row in unpriced.items():
        assert model not in price_table() and price_for(model, "anthropic") is None
        assert row["note"] and date.fromisoformat(row["read"])


def test_a_long_prompt_is_billed_whole_at_its_tier() -> None:
    # Haiku 5.5: the prompt is input + cache reads + cache writes; above 100,000 every token
    # of the request, output included, is at the higher prices.
    haiku = price_table()["claude-haiku-5-5"]
    at_limit = tokens_of(
        {"input_tokens": 10_000, "cache_read_input_tokens": 90_000, "output_tokens": 1_000},
        "anthropic",
    )
    assert at_limit is not None and at_limit.prompt == 100_000
    assert cost_of(at_limit, haiku) == pytest.approx(
        (10_000 * 0.1 + 90_000 * 0.01 + 1_000 * 0.5) / M
    )
    above = tokens_of(
        {
            "input_tokens": 10_001,
            "cache_read_input_tokens": 90_000,
            "cache_creation_input_tokens": 4_000,
            "output_tokens": 1_000,
        },
        "anthropic",
    )
    assert above is not None
    assert cost_of(above, haiku) == pytest.approx(
        (10_001 * 0.5 + 90_000 * 0.05 + 4_000 * 0.625 + 1_000 * 2.5) / M
    )
    # OpenAI: above 272K input tokens, 2x input and 1.5x output for the whole request.
    gpt55 = price_table()["gpt-5.5"]
    long = Tokens(input=200_000, output=2_000, cached_input=100_000, prompt=300_000)
    assert cost_of(long, gpt55) == pytest.approx((200_000 * 10 + 100_000 * 1.0 + 2_000 * 45) / M)
    gpt54 = price_table()["gpt-5.4"]
    assert cost_of(long, gpt54) == pytest.approx((200_000 * 5 + 100_000 * 0.5 + 2_000 * 22.5) / M)
    short = Tokens(input=172_000, output=2_000, cached_input=100_000, prompt=272_000)
    assert cost_of(short, gpt55) == pytest.approx((172_000 * 5 + 100_000 * 0.5 + 2_000 * 30) / M)
    # Gemini 3.1 Pro: above 200,000.
    pro = price_table()["gemini-3.1-pro-preview"]
    gemini = Tokens(input=150_000, output=1_000, cached_input=100_000, prompt=250_000)
    assert cost_of(gemini, pro) == pytest.approx((150_000 * 4 + 100_000 * 0.4 + 1_000 * 18) / M)


def test_the_default_gemini_model_bills_cached_tokens_as_input() -> None:
    """Google publishes no cached-input price for the Computer Use preview."""
    price = price_for(GEMINI_DEFAULT, "gemini")
    assert price is not None and "input" in str(_row_of(price).get("note"))
    usage = {
        "prompt_token_count": 50_000,
        "cached_content_token_count": 30_000,
        "candidates_token_count": 100,
    }
    tokens = tokens_of(usage, "gemini")
    assert tokens is not None
    assert cost_of(tokens, price) == pytest.approx((50_000 * 1.25 + 100 * 10) / M)
    long = tokens_of({**usage, "prompt_token_count": 250_000}, "gemini")
    assert long is not None
    assert cost_of(long, price) == pytest.approx((250_000 * 2.5 + 100 * 15) / M)


# -- runs through each vendor's SDK and stand-in, under a cost cap --------------------------


def _agent(tmp_path: Path, planner: Any) -> VncUseAgent:
    return VncUseAgent(
        desktop=FakeDesktop(640, 400), planner=planner, runs_dir=tmp_path / "runs", max_cost=50.0
    )


def _gemini(reply: Reply, **usage: int) -> Reply:
    return Reply(reply.status, {**reply.body, "usageMetadata": usage})


def test_cached_tokens_on_the_default_gemini_model_keep_the_cost_known_and_the_cap_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Implicit caching reports cached tokens from the second turn: the run goes on under its
    cap to the model's own end, and its cost is exact."""
    monkeypatch.setenv("GOOGLE_API_KEY", "AIzaStandInDummyKey-0123456789abcdef")
    click = Reply.calls(FunctionCallSpec("click_at", x=500, y=500))
    with GeminiStandIn() as standin:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", standin.root_url)
        standin.script(
            _gemini(click, promptTokenCount=4_000, candidatesTokenCount=50, totalTokenCount=4_050),
            _gemini(
                click,
                promptTokenCount=9_000,
                cachedContentTokenCount=4_000,
                candidatesTokenCount=50,
                totalTokenCount=9_050,
            ),
            _gemini(
                Reply.text("Done."),
                promptTokenCount=240_000,
                cachedContentTokenCount=200_000,
                candidatesTokenCount=20,
                totalTokenCount=240_020,
            ),
        )
        planner = GeminiComputerUse(model=GEMINI_DEFAULT, **FAST_RETRY)
        with _agent(tmp_path, planner) as agent:
            result = agent.run(task="click twice", thread_id="cached")
        assert len(standin.requests) == 3
    assert result.status == RunStatus.DONE, result.error
    expected = (4_000 * 1.25 + 50 * 10) + (9_000 * 1.25 + 50 * 10) + (240_000 * 2.5 + 20 * 15)
    assert result.cost_usd == pytest.approx(expected / M)


CLAUDE_MODELS = {
    # model: (input, output, cached, cache write) below any tier
    "claude-sonnet-5-5": (2.0, 10.0, 0.1, 2.5),
    "claude-sonnet-5": (2.0, 10.0, 0.2, 2.5),
    "claude-opus-5-5": (4.0, 20.0, 0.2, 5.0),
    "claude-haiku-5-5": (0.1, 0.5, 0.01, 0.125),
    "claude-fable-5-1": (10.0, 50.0, 0.25, 12.5),
    "claude-mythos-5-1": (10.0, 50.0, 0.25, 12.5),
}


@pytest.mark.parametrize("model", sorted(CLAUDE_MODELS))
def test_a_capped_claude_run_of_a_newly_priced_model_goes_on_past_its_first_call(
    model: str, tmp_path: Path
) -> None:
    script = [
        ClaudeReply.act(Action("left_click", {"coordinate": [100, 100]})).with_usage(
            input_tokens=3_000,
            cache_creation_input_tokens=2_000,
            cache_read_input_tokens=0,
            output_tokens=200,
        ),
        ClaudeReply.done("Done.").with_usage(
            input_tokens=1_500,
            cache_creation_input_tokens=0,
            cache_read_input_tokens=2_000,
            output_tokens=50,
        ),
    ]
    with AnthropicStandIn(script, expected_api_key="sk-ant-test-key") as server:
        planner = AnthropicPlanner(
            model, api_key="sk-ant-test-key", base_url=server.base_url, max_retries=0
        )
        with _agent(tmp_path, planner) as agent:
            result = agent.run(task="click", thread_id="claude")
        assert len(server.requests) == 2
    assert result.status == RunStatus.DONE, result.error
    fresh, out, cached, write = CLAUDE_MODELS[model]
    expected = 4_500 * fresh + 250 * out + 2_000 * cached + 2_000 * write
    assert result.cost_usd == pytest.approx(expected / M)


def test_a_capped_claude_haiku_run_bills_a_long_prompt_at_the_higher_tier(tmp_path: Path) -> None:
    script = [
        ClaudeReply.act(Action("left_click", {"coordinate": [100, 100]})).with_usage(
            input_tokens=60_000, cache_read_input_tokens=50_000, output_tokens=100
        ),
        ClaudeReply.done("Done.").with_usage(input_tokens=40_000, output_tokens=100),
    ]
    with AnthropicStandIn(script, expected_api_key="sk-ant-test-key") as server:
        planner = AnthropicPlanner(
            "claude-haiku-5-5", api_key="sk-ant-test-key", base_url=server.base_url, max_retries=0
        )
        with _agent(tmp_path, planner) as agent:
            result = agent.run(task="click", thread_id="haiku")
    assert result.status == RunStatus.DONE, result.error
    first = 60_000 * 0.5 + 50_000 * 0.05 + 100 * 2.5  # 110,000 prompt tokens: the higher tier
    second = 40_000 * 0.1 + 100 * 0.5
    assert result.cost_usd == pytest.approx((first + second) / M)


def test_a_capped_gemini_3_1_pro_run_goes_on_and_bills_its_long_prompt_tier(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "AIzaStandInDummyKey-0123456789abcdef")
    with GeminiStandIn() as standin:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", standin.root_url)
        standin.script(
            _gemini(
                Reply.calls(FunctionCallSpec("click_at", x=500, y=500)),
                promptTokenCount=10_000,
                cachedContentTokenCount=5_000,
                candidatesTokenCount=100,
                totalTokenCount=10_100,
            ),
            _gemini(
                Reply.text("Done."),
                promptTokenCount=210_000,
                cachedContentTokenCount=10_000,
                candidatesTokenCount=100,
                totalTokenCount=210_100,
            ),
        )
        planner = GeminiComputerUse(model="gemini-3.1-pro-preview", **FAST_RETRY)
        with _agent(tmp_path, planner) as agent:
            result = agent.run(task="click", thread_id="pro")
    assert result.status == RunStatus.DONE, result.error
    first = 5_000 * 2 + 5_000 * 0.2 + 100 * 12
    second = 200_000 * 4 + 10_000 * 0.4 + 100 * 18  # 210,000 prompt tokens: above 200k
    assert result.cost_usd == pytest.approx((first + second) / M)


@pytest.mark.parametrize(
    ("model", "short", "long"),
    [
        ("gpt-5.5", (5.0, 0.5, 30.0), (10.0, 1.0, 45.0)),
        ("gpt-5.4", (2.5, 0.25, 15.0), (5.0, 0.5, 22.5)),
    ],
)
def test_a_capped_openai_run_past_272k_tokens_goes_on_at_the_long_context_prices(
    model: str, short: tuple[float, float, float], long: tuple[float, float, float], tmp_path: Path
) -> None:
    script = [
        Turn.call({"type": "click", "x": 10, "y": 10, "button": "left"}).with_usage(
            {
                "input_tokens": 272_000,
                "input_tokens_details": {"cached_tokens": 200_000},
                "output_tokens": 100,
                "total_tokens": 272_100,
            }
        ),
        Turn.message("Done.").with_usage(
            {
                "input_tokens": 300_000,
                "input_tokens_details": {"cached_tokens": 250_000},
                "output_tokens": 100,
                "total_tokens": 300_100,
            }
        ),
    ]
    with OpenAIResponsesStandIn(script) as server:
        planner = OpenAIPlanner(model, api_key="sk-test", base_url=server.base_url)
        with _agent(tmp_path, planner) as agent:
            result = agent.run(task="click", thread_id="openai")
    assert result.status == RunStatus.DONE, result.error
    first = 72_000 * short[0] + 200_000 * short[1] + 100 * short[2]  # exactly 272K: short
    second = 50_000 * long[0] + 250_000 * long[1] + 100 * long[2]
    assert result.cost_usd == pytest.approx((first + second) / M)
