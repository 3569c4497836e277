"""The cap counts every attempt on the wire: a provider that bills attempts it answers too
late, or bills more than it could at ``max_tokens``, cannot take the bill past the cap
unseen. The provider's own bill (``billing_fakes``) is what is checked.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from speedrunner.core.atomic import read_jsonl
from speedrunner.core.config.schema import ModelConfig
from speedrunner.core.llm.build import build_model
from speedrunner.core.llm.spend_cap import SpendCap, SpendCapReached, spend_cap, spent_in_log
from speedrunner.core.llm.spent import CallLogTotals
from speedrunner.core.llm.types import Message
from speedrunner.errors import LLMError
from speedrunner.testing.fake_llm_server import FakeLLMServer

from .billing_fakes import PRICES, BilledTimeouts, OverBilling
from .conftest import TINY

FLOAT_SLACK = 1e-9


def _model(url: str, cap: SpendCap, tmp_path: Path, **config):
    config = {"max_attempts": 3, "timeout_s": 5.0, "sampling": {"max_tokens": 1000}, **config}
    return build_model(
        ModelConfig(provider="vllm", name="fake-model", base_url=url, prices=PRICES, **config),
        namespace="run",
        cache_path=tmp_path / "llm_cache.sqlite",
        calls_log_path=tmp_path / "llm_calls.jsonl",
        spend_cap=cap,
        backoff=TINY,
    )


def _call_until_refused(model, limit: int = 40) -> SpendCapReached:
    for i in range(limit):
        try:
            model.complete(
                [Message("user", f"question {i} " + "x" * 300)], purpose="actor", call_id=f"c{i}"
            )
        except LLMError:
            continue  # failed for good: the run would go on to its next call
        except SpendCapReached as e:
            return e
    raise AssertionError(f"the cap never stopped {limit} calls")


def test_attempts_billed_after_the_timeout_count_against_the_cap(tmp_path: Path) -> None:
    provider = BilledTimeouts(late_s=0.6)
    cap = SpendCap(cap=0.01)
    with FakeLLMServer(callback=provider, model_name="fake-model") as server:
        model = _model(server.base_url, cap, tmp_path, timeout_s=0.3)
        stop = _call_until_refused(model)
        model.close()
    log = tmp_path / "llm_calls.jsonl"
    # The provider never billed past the cap, though it billed every attempt it answered too late.
    assert provider.requests >= 4 and provider.billed <= 0.01 + FLOAT_SLACK
    assert stop.spent <= 0.01
    # The log keeps each late attempt at its worst case (never $0): what the provider billed
    # is within what the log says was spent or may have been.
    unknown = sum(r.get("unknown_usd", 0.0) for r in read_jsonl(log))
    assert unknown > 0 and provider.billed <= spent_in_log(log) + unknown + FLOAT_SLACK
    assert CallLogTotals(log).read().unknown_usd == pytest.approx(unknown, abs=1e-6)
    # A resume counts it too: the cap it builds from the log holds at least what was billed.
    assert cap.lost == pytest.approx(unknown) and cap.spent == pytest.approx(spent_in_log(log))
    config = SimpleNamespace(run=SimpleNamespace(max_cost_usd=0.01))
    resumed = spend_cap(config, "run", tmp_path / "llm_cache.sqlite", log)  # type: ignore[arg-type]
    assert resumed.spent + resumed.lost >= provider.billed - FLOAT_SLACK


def test_a_provider_billing_past_max_tokens_is_flagged_and_stopped_at_the_next_call(
    tmp_path: Path, caplog
) -> None:
    provider = OverBilling()
    cap = SpendCap(cap=0.02)
    with (
        caplog.at_level(logging.WARNING, logger="speedrunner.core.llm.client"),
        FakeLLMServer(callback=provider, model_name="fake-model") as server,
    ):
        model = _model(server.base_url, cap, tmp_path)
        stop = _call_until_refused(model)
        model.close()
    rows = [r for r in read_jsonl(tmp_path / "llm_calls.jsonl") if r.get("error") is None]
    # Every such answer is counted as billed and flagged, in its row and in a warning line.
    assert rows and all(r.get("over_reservation_usd", 0.0) > 0 for r in rows)
    worst = max(r["cost_usd"] - r["over_reservation_usd"] for r in rows)  # one call's reservation
    overrun = max(r["over_reservation_usd"] for r in rows)
    assert sum(r["spent_usd"] for r in rows) == pytest.approx(provider.billed, abs=1e-6)
    assert "more than its worst case" in caplog.text and "counted as billed" in caplog.text
    # The cap is checked against it before the next call: the bill is within the cap plus at
    # most one call's overrun (calls run one at a time here), as docs/spending.md states.
    assert provider.billed <= 0.02 + overrun + FLOAT_SLACK
    assert provider.billed > 0.02 - worst  # it did call until the cap was near
    assert cap.overrun > 0 and "more than was reserved" in stop.stopped(cap.spent, 0.0)
    assert CallLogTotals(tmp_path / "llm_calls.jsonl").read().over_reservation == len(rows)


def test_a_retry_the_cap_refuses_leaves_the_late_attempt_logged_at_its_worst_case(
    tmp_path: Path,
) -> None:
    """The first attempt times out (billed); the cap has room for one attempt only, so the
    retry is refused before it is sent, and the late attempt stays counted, in the log too."""
    provider = BilledTimeouts(late_s=0.6)
    with FakeLLMServer(callback=provider, model_name="fake-model") as server:
        probe = _model(server.base_url, SpendCap(cap=None), tmp_path / "probe", timeout_s=0.3)
        worst = probe._max_cost(
            [Message("user", "question 0 " + "x" * 300)], probe.sampling_for({})
        )
        probe.close()
        cap = SpendCap(cap=worst * 1.5)
        model = _model(server.base_url, cap, tmp_path, timeout_s=0.3)
        with pytest.raises(SpendCapReached):
            model.complete(
                [Message("user", "question 0 " + "x" * 300)], purpose="actor", call_id="c0"
            )
        model.close()
    assert provider.requests == 1 and provider.billed <= cap.cap
    assert cap.lost == pytest.approx(worst) and cap.spent == 0.0
    [row] = read_jsonl(tmp_path / "llm_calls.jsonl")
    assert row["error"] and row["unknown_usd"] == pytest.approx(worst)
    from speedrunner.core.llm.cache import ResponseCache

    cache = ResponseCache(tmp_path / "llm_cache.sqlite")
    try:  # logged, so not also reported as in flight at a kill on the next resume
        assert cache.pending_sent_at("run") == {}
    finally:
        cache.close()
