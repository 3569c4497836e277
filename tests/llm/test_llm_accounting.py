"""Prices, cost arithmetic, llm_calls.jsonl rows and running totals."""

from __future__ import annotations

import json

import pytest

from speedrunner.core.config.schema import ModelConfig, Prices
from speedrunner.core.llm import Message, Usage, cost_usd, load_price_table, resolve_prices
from speedrunner.testing.fake_llm_server import Reply

MSGS = [Message("system", "rules"), Message("user", "observation 1")]


def test_price_table_is_package_data_with_paper_prices():
    table = load_price_table()
    assert table.models["gpt-5.4-mini"] == Prices(input=0.75, cached_input=0.075, output=4.50)
    assert table.models["gemini-3-flash-preview"] == Prices(
        input=0.35, cached_input=0.0875, output=1.05
    )


def test_cost_formula_counts_cached_and_reasoning_as_specified():
    p = Prices(input=0.75, cached_input=0.075, output=4.50)
    u = Usage(input_uncached=1_000_000, input_cached=2_000_000, output=100_000, reasoning=60_000)
    assert cost_usd(u, p) == pytest.approx(0.75 + 0.15 + 0.45)
    assert cost_usd(u, None) is None


def test_config_prices_override_table_and_unknown_is_none():
    own = Prices(input=1, cached_input=0.5, output=2)
    assert resolve_prices(ModelConfig(name="gpt-5.4-mini", prices=own)) == own
    assert (
        resolve_prices(
            ModelConfig(provider="vllm", name="Qwen/Qwen3.5-35B-A3B", base_url="http://x/v1")
        )
        is None
    )


def test_unknown_price_gives_none_never_zero(server, make_model, tmp_path):
    c = make_model(provider="vllm", name="Qwen/Qwen3.5-35B-A3B", base_url=server.base_url).complete(
        MSGS, purpose="actor", call_id="u"
    )
    assert c.cost_usd is None
    row = json.loads((tmp_path / "llm_calls.jsonl").read_text())
    assert row["cost_usd"] is None and row["spent_usd"] is None


def test_llm_calls_jsonl_row(server, make_model, tmp_path):
    server.push(
        Reply(
            text="<think>hmm</think>go forward",
            prompt_tokens=1200,
            cached_tokens=1000,
            completion_tokens=50,
            reasoning_tokens=30,
        )
    )
    model = make_model(
        provider="openai",
        name="gpt-5.4-mini",
        base_url=server.base_url,
        sampling={"temperature": 0.7, "top_p": 0.95, "max_tokens": 256, "seed": 11},
    )
    c = model.complete(MSGS, purpose="actor", call_id="train/000001/actor/0000")
    rows = [json.loads(x) for x in (tmp_path / "llm_calls.jsonl").read_text().splitlines()]
    assert len(rows) == 1
    r = rows[0]
    expected_cost = (0.75 * 200 + 0.075 * 1000 + 4.50 * 50) / 1e6
    assert r["cost_usd"] == pytest.approx(expected_cost) == c.cost_usd
    assert r["spent_usd"] == pytest.approx(expected_cost)
    assert r["usage"] == {
        "input_uncached": 200,
        "input_cached": 1000,
        "output": 50,
        "reasoning": 30,
    }
    assert r["purpose"] == "actor" and r["call_id"] == "train/000001/actor/0000"
    assert r["provider"] == "openai" and r["model"] == "gpt-5.4-mini" and r["namespace"] == "run-1"
    assert r["request_hash"] == c.request_hash and len(r["request_hash"]) == 64
    assert (
        len(r["messages_sha256"]) == 64
        and r["n_messages"] == 2
        and r["last_message"] == "observation 1"
    )
    assert "messages" not in r
    assert r["response"] == "go forward" and r["reasoning"] == "hmm"
    assert r["cache_hit"] is False and r["scripted"] is False
    assert r["finish_reason"] == "stop" and r["empty"] is False and r["truncated"] is False
    assert r["sampling"] == {"temperature": 0.7, "top_p": 0.95, "max_tokens": 256, "seed": 11}
    assert r["attempts"] == 1 and r["error"] is None and r["latency_s"] > 0
    t = model.totals()
    assert t.calls == 1 and t.spent_usd == pytest.approx(expected_cost)
    assert t.usage == Usage(200, 1000, 50, 30) == t.usage_new


def test_full_messages_logged_on_request(server, tmp_path):
    from speedrunner.core.llm import build_model

    m = build_model(
        ModelConfig(provider="vllm", name="q", base_url=server.base_url),
        namespace="n",
        calls_log_path=tmp_path / "calls.jsonl",
        log_full_messages=True,
    )
    m.complete(MSGS, purpose="critic", call_id="1")
    row = json.loads((tmp_path / "calls.jsonl").read_text())
    assert row["messages"] == [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "observation 1"},
    ]


def test_scripted_costs_zero_and_is_flagged(make_model, tmp_path):
    m = make_model(provider="scripted", name="demo")
    c = m.complete([Message("user", "Available actions: a, b")], purpose="actor", call_id="0")
    assert c.cost_usd == 0.0 and c.scripted
    row = json.loads((tmp_path / "llm_calls.jsonl").read_text())
    assert (
        row["scripted"] is True and row["cost_usd"] == 0.0 and row["endpoint"] == "scripted://local"
    )
    assert m.totals().scripted == 1


def test_totals_unknown_cost_counted(server, make_model):
    m = make_model(provider="vllm", name="unknown-model", base_url=server.base_url)
    for i in range(3):
        m.complete(MSGS, purpose="actor", call_id=str(i))
    t = m.totals()
    assert t.calls == 3 and t.unknown_cost_calls == 3 and t.spent_usd == 0.0
