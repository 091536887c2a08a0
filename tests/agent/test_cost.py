"""What a run costs: the price table, each provider's usage priced exactly, ``--max-cost``.

The runs drive the vendors' stand-ins through their official SDKs on a FakeDesktop (cost has
nothing to do with the screen); each stand-in reports known usage, as the real APIs do.
"""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from vnc_use import VncUseAgent
from vnc_use.errors import ConfigError
from vnc_use.evaluation.index import render_index
from vnc_use.evaluation.results import TaskResult, summarize
from vnc_use.providers.anthropic.planner import AnthropicPlanner
from vnc_use.providers.gemini.planner import DEFAULT_MODEL, GeminiComputerUse
from vnc_use.providers.openai.planner import OpenAIPlanner
from vnc_use.providers.pricing import (
    Tokens,
    cost_of,
    parse_price,
    price_for,
    price_table,
    raw_rows,
    tokens_of,
)
from vnc_use.record.report import load_run
from vnc_use.record.runs import summarize as summarize_run
from vnc_use.status import RunStatus
from vnc_use.testing import FakeDesktop
from vnc_use.testing.anthropic_standin import Action, AnthropicStandIn
from vnc_use.testing.anthropic_standin import Reply as ClaudeReply
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.openai_responses_standin import OpenAIResponsesStandIn, Turn

from gemini_fixtures import FAST_RETRY

M = 1_000_000


# -- the table -----------------------------------------------------------------------------


def test_every_row_names_its_source_page_and_the_date_it_was_read() -> None:
    rows = raw_rows()
    assert rows
    for row in rows:
        source = urlsplit(str(row.get("source") or ""))
        assert source.scheme == "https" and source.netloc, f"{row.get('model')}: no source"
        read = str(row.get("read") or "")
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", read), f"{row.get('model')}: no read date"
        date.fromisoformat(read)
        assert row["input"] >= 0 and row["output"] >= 0


def test_the_table_prices_the_models_vnc_use_names_it_found_prices_for() -> None:
    table = price_table()
    for model in ("gemini-3-flash-preview", "gemini-3.5-flash", "gpt-5.5", "gpt-5.4"):
        assert model in table
    # The default model of a run is priced, long-context tier included.
    default = price_for(DEFAULT_MODEL, "gemini")
    assert default is not None and (default.input, default.output) == (1.25, 10.0)
    long = default.tier_for(250_000)
    assert long is not None and (long.input, long.output) == (2.5, 15.0)
    assert price_for("claude-opus-4-5-20251101", "anthropic") == table["claude-opus-4-5"]
    assert price_for("gpt-5.5-2026-04-23", "openai") == table["gpt-5.5"]


def test_unknown_model_costs_unknown_never_zero_and_price_sets_it() -> None:
    assert price_for("gemini-9-ultra", "gemini") is None
    given = price_for("gemini-9-ultra", "gemini", parse_price("2/10"))
    assert given is not None
    assert cost_of(Tokens(input=M, output=M, prompt=M), given) == pytest.approx(12.0)
    local = price_for("qwen3-vl", "openai-compatible")
    assert local is not None and cost_of(Tokens(input=5, output=5, prompt=5), local) == 0.0
    with pytest.raises(ConfigError, match="INPUT/OUTPUT"):
        parse_price("2")


def test_gemini_long_context_tier_and_cached_tokens() -> None:
    row = price_table()["gemini-2.5-pro"]
    short = tokens_of(
        {
            "prompt_token_count": 100_000,
            "cached_content_token_count": 40_000,
            "candidates_token_count": 1_000,
            "thoughts_token_count": 500,
        },
        "gemini",
    )
    assert short == Tokens(60_000, 1_500, 40_000, 0, 100_000)
    assert cost_of(short, row) == pytest.approx((60_000 * 1.25 + 1_500 * 10 + 40_000 * 0.125) / M)
    long = tokens_of({"prompt_token_count": 300_000, "candidates_token_count": 1_000}, "gemini")
    assert long is not None
    assert cost_of(long, row) == pytest.approx((300_000 * 2.5 + 1_000 * 15) / M)


def test_openai_row_bills_a_prompt_above_272k_at_the_long_context_prices() -> None:
    row = price_table()["gpt-5.5"]
    beyond = tokens_of({"input_tokens": 300_000, "output_tokens": 10}, "openai")
    assert beyond is not None and cost_of(beyond, row) == pytest.approx(
        (300_000 * 10 + 10 * 45) / M
    )


# -- runs through each vendor's SDK and stand-in ----------------------------------------------


def _agent(tmp_path: Path, planner: Any, **kwargs: Any) -> VncUseAgent:
    return VncUseAgent(
        desktop=FakeDesktop(640, 400), planner=planner, runs_dir=tmp_path / "runs", **kwargs
    )


def _gemini_reply(reply: Reply, **usage: int) -> Reply:
    return Reply(reply.status, {**reply.body, "usageMetadata": usage})


def test_gemini_run_cost_is_exact_including_the_long_context_tier(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "AIzaStandInDummyKey-0123456789abcdef")
    with GeminiStandIn() as standin:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", standin.root_url)
        standin.script(
            _gemini_reply(
                Reply.calls(FunctionCallSpec("click_at", x=500, y=500)),
                promptTokenCount=250_000,
                candidatesTokenCount=200,
                thoughtsTokenCount=100,
                totalTokenCount=250_300,
            ),
            _gemini_reply(
                Reply.text("Done."),
                promptTokenCount=120_000,
                cachedContentTokenCount=100_000,
                candidatesTokenCount=50,
                totalTokenCount=120_050,
            ),
        )
        planner = GeminiComputerUse(model="gemini-2.5-pro", **FAST_RETRY)
        with _agent(tmp_path, planner) as agent:
            result = agent.run(task="click", thread_id="gemini")
    assert result.status == RunStatus.DONE, result.error
    first = (250_000 * 2.5 + 300 * 15) / M  # above 200k: the long-context prices
    second = (20_000 * 1.25 + 100_000 * 0.125 + 50 * 10) / M
    assert result.cost_usd == pytest.approx(first + second)
    saved = json.loads((Path(result.run_dir) / "run.json").read_text())
    assert saved["cost_usd"] == pytest.approx(first + second)
    html = (Path(result.run_dir) / "report.html").read_text()
    assert f"${first + second:.4f}" in html and f"${first:.4f}" in html
    listed = summarize_run(Path(result.run_dir))
    assert listed is not None and listed.cost_usd == pytest.approx(first + second)


def test_anthropic_cache_reads_and_writes_are_priced(tmp_path: Path) -> None:
    script = [
        ClaudeReply.act(Action("left_click", {"coordinate": [100, 100]})).with_usage(
            input_tokens=1_000,
            cache_creation_input_tokens=2_000,
            cache_read_input_tokens=0,
            output_tokens=300,
        ),
        ClaudeReply.done("Done.").with_usage(
            input_tokens=500,
            cache_creation_input_tokens=0,
            cache_read_input_tokens=2_000,
            output_tokens=100,
        ),
    ]
    with AnthropicStandIn(script, expected_api_key="sk-ant-test-key") as server:
        planner = AnthropicPlanner(
            "claude-opus-4-8",
            api_key="sk-ant-test-key",
            base_url=server.base_url,
            max_retries=0,
        )
        with _agent(tmp_path, planner) as agent:
            result = agent.run(task="click", thread_id="claude")
    assert result.status == RunStatus.DONE, result.error
    expected = (1_500 * 5 + 2_000 * 6.25 + 2_000 * 0.5 + 400 * 25) / M
    assert result.cost_usd == pytest.approx(expected)


def test_openai_cached_input_is_priced(tmp_path: Path) -> None:
    script = [
        Turn.call({"type": "click", "x": 10, "y": 10, "button": "left"}).with_usage(
            {
                "input_tokens": 10_000,
                "input_tokens_details": {"cached_tokens": 8_000},
                "output_tokens": 200,
                "output_tokens_details": {"reasoning_tokens": 100},
                "total_tokens": 10_200,
            }
        ),
        Turn.message("Done.").with_usage(
            {
                "input_tokens": 12_000,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 50,
                "total_tokens": 12_050,
            }
        ),
    ]
    with OpenAIResponsesStandIn(script) as server:
        planner = OpenAIPlanner("gpt-5.5", api_key="sk-test", base_url=server.base_url)
        with _agent(tmp_path, planner) as agent:
            result = agent.run(task="click", thread_id="openai")
    assert result.status == RunStatus.DONE, result.error
    expected = (2_000 * 5 + 8_000 * 0.5 + 200 * 30 + 12_000 * 5 + 50 * 30) / M
    assert result.cost_usd == pytest.approx(expected)


def test_an_unknown_model_shows_cost_unknown(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "AIzaStandInDummyKey-0123456789abcdef")
    with GeminiStandIn() as standin:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", standin.root_url)
        standin.script(Reply.text("Done."))
        # An id the price table does not hold (the family is named, as for any new model).
        planner = GeminiComputerUse(
            model="gemini-9-unpriced-preview", family="gemini-3.5", **FAST_RETRY
        )
        with _agent(tmp_path, planner) as agent:
            result = agent.run(task="look", thread_id="unknown")
        assert result.cost_usd is None
        html = (Path(result.run_dir) / "report.html").read_text()
        assert "cost unknown" in html
        with pytest.raises(ConfigError, match="--price"):
            _agent(tmp_path, planner, max_cost=1.0).run(task="look", thread_id="capped")


# -- --max-cost ----------------------------------------------------------------------------


def test_max_cost_stops_before_the_call_and_resume_with_a_higher_cap_continues(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each call costs $1 at --price 1/0 with 1M prompt tokens: a $2 cap allows two calls,
    the third is never made; resume with a $3 cap makes exactly one more."""
    monkeypatch.setenv("GOOGLE_API_KEY", "AIzaStandInDummyKey-0123456789abcdef")
    click = Reply.calls(FunctionCallSpec("click_at", x=500, y=500))
    usage = {"promptTokenCount": M, "candidatesTokenCount": 0, "totalTokenCount": M}
    with GeminiStandIn() as standin:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", standin.root_url)
        standin.script([_gemini_reply(click, **usage) for _ in range(5)])
        planner = GeminiComputerUse(model="gemini-9-ultra", **FAST_RETRY)
        desktop = FakeDesktop(640, 400)
        runs = tmp_path / "runs"
        kwargs: dict[str, Any] = {"desktop": desktop, "planner": planner, "runs_dir": runs}
        with VncUseAgent(max_cost=2.0, price=(1.0, 0.0), **kwargs) as agent:
            result = agent.run(task="click", thread_id="capped")
        assert result.status == RunStatus.COST_LIMIT
        assert len(standin.requests) == 2 and result.cost_usd == pytest.approx(2.0)
        assert "resume --max-cost" in (result.error or "")
        with VncUseAgent(max_cost=3.0, price=(1.0, 0.0), **kwargs) as agent:
            again = agent.resume("capped")
        assert again.status == RunStatus.COST_LIMIT
        assert len(standin.requests) == 3 and again.cost_usd == pytest.approx(3.0)
        assert again.steps == 3  # the total was kept, not reset
        events = [
            json.loads(line) for line in (runs / "capped" / "events.jsonl").read_text().splitlines()
        ]
        assert [e["max_cost"] for e in events if e["event"] == "cost_limit"] == [2.0, 3.0]


# -- eval: summary.json and index ----------------------------------------------------------


def test_eval_summary_and_index_show_cost_per_task_and_per_success() -> None:
    results = [
        TaskResult(id="a", repeat=1, success=True, outcome="passed", thread_id="1", cost_usd=0.5),
        TaskResult(id="a", repeat=2, success=False, outcome="failed", thread_id="2", cost_usd=0.25),
        TaskResult(id="b", repeat=1, success=True, outcome="passed", thread_id="3", cost_usd=0.75),
    ]
    summary = summarize(results, tasks=2, planned=3, about={"model": "m", "provider": "p"})
    assert summary["cost_usd"] == pytest.approx(1.5)
    assert summary["cost_per_success_usd"] == pytest.approx(0.75)
    assert summary["cost_per_task_usd"] == {"a": pytest.approx(0.75), "b": pytest.approx(0.75)}
    page = render_index(results, summary)
    assert "cost per success" in page and "$0.7500" in page and "$0.2500" in page
    unknown = [
        *results,
        TaskResult(id="c", repeat=1, success=True, outcome="passed", thread_id="4"),
    ]
    summary = summarize(unknown, tasks=3, planned=4, about={})
    assert summary["cost_usd"] is None and summary["cost_per_success_usd"] is None
    assert "cost unknown" in render_index(unknown, summary)


def test_report_view_reads_the_cost(tmp_path: Path) -> None:
    """A run folder of an older version (no cost recorded) shows no cost line."""
    folder = tmp_path / "old"
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"thread_id": "old", "task": "t"}))
    (folder / "events.jsonl").write_text(
        json.dumps({"event": "model_response", "n": 1, "text": "done", "calls": []}) + "\n"
    )
    view = load_run(folder)
    assert not view.priced and view.cost_usd is None


def test_mcp_run_task_results_carry_the_cost(tmp_path: Path) -> None:
    from vnc_use.agent.state import RunResult
    from vnc_use.mcp_server.runs import outcome

    known = RunResult(RunStatus.DONE, "t", str(tmp_path), cost_usd=0.25)
    assert outcome(known)["cost_usd"] == 0.25
    unknown = RunResult(RunStatus.COST_LIMIT, "t", str(tmp_path), error="cap")
    assert outcome(unknown)["cost_usd"] is None and outcome(unknown)["status"] == "cost_limit"
