"""The spending cap through ManagedModel: a call that could cross it is never sent.

Calls go to the fake LLM server over HTTP (the openai SDK, as in a run); the server bills
each request at the model's price. Threads call at once, like parallel episodes.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from speedrunner.core.config.schema import ModelConfig, Prices
from speedrunner.core.llm.build import build_model
from speedrunner.core.llm.spend_cap import SpendCap, SpendCapReached, SweepLedger
from speedrunner.core.llm.types import Message
from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply

PRICES = Prices(input=1.0, cached_input=0.1, output=2.0)


def _model(url: str, cap: SpendCap, tmp_path: Path):
    config = ModelConfig(
        provider="vllm",
        name="fake-model",
        base_url=url,
        prices=PRICES,
        sampling={"max_tokens": 100},
        max_attempts=1,
    )
    return build_model(
        config,
        namespace="run",
        cache_path=tmp_path / "cache.sqlite",
        calls_log_path=tmp_path / "calls.jsonl",
        spend_cap=cap,
    )


def test_parallel_calls_never_take_spend_past_the_cap(tmp_path: Path) -> None:
    billed = []
    lock = threading.Lock()

    def bill(body: dict) -> Reply:
        # the most a provider bills
        prompt = sum(len(m["content"].encode()) for m in body["messages"])
        with lock:
            billed.append((prompt * 1.0 + 100 * 2.0) / 1e6)
        return Reply(text="ok", prompt_tokens=prompt, completion_tokens=100, delay_s=0.02)

    cap = SpendCap(cap=0.01)
    with FakeLLMServer(callback=bill, model_name="fake-model") as server:
        model = _model(server.base_url, cap, tmp_path)

        def call(i: int) -> str:
            try:
                model.complete(
                    [Message("user", f"question {i} " + "x" * 200)],
                    purpose="actor",
                    call_id=f"c{i}",
                )
                return "answered"
            except SpendCapReached:
                return "refused"

        with ThreadPoolExecutor(8) as pool:
            outcomes = list(pool.map(call, range(200)))
        model.close()
    assert sum(billed) <= 0.01 + 1e-12  # the provider never billed past the cap
    assert outcomes.count("answered") == len(billed) > 10  # it called until the cap was near
    assert "refused" in outcomes
    assert cap.reached is not None and cap.spent == pytest.approx(sum(billed), abs=1e-6)
    # Once reached, every later call is refused before it is sent, and a replay is still free.
    with pytest.raises(SpendCapReached):
        cap.reserve(0.0)


def test_the_sweep_ledger_is_one_cap_over_runs(tmp_path: Path) -> None:
    path = tmp_path / "spend.json"
    a, b = SweepLedger(path, 1.0, "run-a"), SweepLedger(path, 1.0, "run-b")
    a.register(0.3)
    b.register(0.2)
    held = a.reserve(0.4)
    with pytest.raises(SpendCapReached) as refused:  # 0.3 + 0.2 + 0.4 in flight + 0.2 > 1.0
        b.reserve(0.2)
    assert refused.value.scope == "sweep" and refused.value.exit_code == 3
    a.settle(held, 0.1)  # the call cost less than its worst case
    b.reserve(0.2)
    assert a.total() == pytest.approx(0.3 + 0.1 + 0.2 + 0.2)
    a.register(0.4)  # a resumed run enters itself afresh
    assert a.total() == pytest.approx(0.4 + 0.2 + 0.2)


def test_a_stop_names_the_spend_and_what_was_still_in_flight_apart(tmp_path: Path) -> None:
    """\"Spent" is completed calls only; a call on the wire at the stop is shown beside it, at its
    worst case; calls a kill left in flight count against the cap but are not "spent"."""
    cap = SpendCap(cap=1.0, spent=0.25, lost=0.125)
    on_the_wire = cap.reserve(0.5)
    with pytest.raises(SpendCapReached) as refused:  # 0.25 + 0.125 + 0.5 + 0.25 > 1.0
        cap.reserve(0.25)
    assert cap.snapshot() == {
        "max_cost_usd": 1.0,
        "reached": True,
        "in_flight_usd": 0.5,
        "over_reservation_usd": 0.0,
    }
    assert (
        cap.describe(0.25)
        == "spent $0.2500 of cap $1.0000 (+ up to $0.1250 unanswered, may have been billed)"
    )
    text = refused.value.stopped(0.25, cap.snapshot()["in_flight_usd"])
    assert (
        "The run spent $0.2500; up to $0.1250 more may have been billed for requests "
        "that got no answer" in text
    )
    assert text.endswith("; up to $0.5000 more was in flight when the cap stopped the run")
    assert "the next call could cost up to $0.2500, more than the $0.1250 the cap had left" in text
    cap.settle(on_the_wire, 0.0625)
    assert cap.spent == 0.3125 and cap.snapshot()["in_flight_usd"] == 0.0
    assert not refused.value.stopped(0.3125, 0.0).count("in flight when")
