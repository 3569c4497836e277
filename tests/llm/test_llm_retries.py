"""Fault injection: what is retried, how long we wait, what is never retried, and limits."""

from __future__ import annotations

import json
import threading
import time

import pytest

from speedrunner.core.llm import Backoff, Message
from speedrunner.core.llm.provider import CallFailure
from speedrunner.errors import LLMError
from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply

MSGS = [Message("user", "hello")]


def _vllm(make_model, server, **kw):
    return make_model(provider="vllm", name="q", base_url=server.base_url, **kw)


def test_429_retry_after_is_honoured(server, make_model):
    server.push(Reply.rate_limited(retry_after=0.3))
    model = _vllm(make_model, server)
    c = model.complete(MSGS, purpose="actor", call_id="r")
    times = [r.received_at for r in server.requests]
    assert c.text == "ok" and len(times) == 2
    assert times[1] - times[0] >= 0.3  # tiny backoff otherwise: the header decided the wait


def test_retry_after_is_capped():
    b = Backoff(initial_s=0.001, max_s=0.01, retry_after_cap_s=0.5)
    f = CallFailure("x", kind="http", endpoint="e", status=429, retry_after=3600)
    assert 0.5 <= b.wait_s(f, 1) <= 0.55
    plain = CallFailure("x", kind="http", endpoint="e", status=500)
    assert all(b.wait_s(plain, n) <= 0.01 for n in range(1, 20))


def test_500_then_success_records_attempts(server, make_model, tmp_path):
    server.push(Reply.error(500), Reply.error(502), Reply(text="fine"))
    c = _vllm(make_model, server).complete(MSGS, purpose="actor", call_id="r")
    assert c.text == "fine"
    row = json.loads((tmp_path / "llm_calls.jsonl").read_text().splitlines()[-1])
    assert row["attempts"] == 3 and row["endpoint"] == server.base_url


def test_timeout_is_retried(server, make_model):
    server.push(Reply.timeout(delay_s=1.5))
    model = _vllm(make_model, server, timeout_s=0.3)
    t0 = time.monotonic()
    c = model.complete(MSGS, purpose="actor", call_id="t")
    assert c.text == "ok" and len(server.chat_requests()) == 2
    assert time.monotonic() - t0 < 1.4


def test_malformed_json_is_retried_then_gives_up(server, make_model):
    server.push(Reply.malformed_json(), Reply(text="good"))
    model = _vllm(make_model, server)
    assert model.complete(MSGS, purpose="actor", call_id="m").text == "good"
    server.push(*[Reply.malformed_json()] * 4)
    with pytest.raises(LLMError, match=r"after 4 attempt\(s\): malformed"):
        model.complete(MSGS, purpose="actor", call_id="m2")


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_client_errors_are_never_retried(server, make_model, tmp_path, status):
    server.push(Reply.error(status))
    model = _vllm(make_model, server)
    with pytest.raises(LLMError) as e:
        model.complete(MSGS, purpose="actor", call_id="bad")
    assert len(server.chat_requests()) == 1
    msg = str(e.value)
    assert (
        f"HTTP {status}" in msg
        and "1 attempt" in msg
        and server.base_url in msg
        and "Not retried" in msg
    )
    row = json.loads((tmp_path / "llm_calls.jsonl").read_text().splitlines()[-1])
    assert row["error"] and row["response"] is None and row["attempts"] == 1
    assert model.totals().failed == 1


def test_a_context_overflow_is_its_own_error_and_not_retried(server, make_model):
    from speedrunner.errors import ContextLengthError

    server.push(Reply.context_overflow(), Reply.error(400))
    model = _vllm(make_model, server)
    with pytest.raises(ContextLengthError, match="maximum context length"):
        model.complete(MSGS, purpose="actor", call_id="long")
    assert len(server.chat_requests()) == 1
    with pytest.raises(LLMError) as e:  # any other 400 stays a plain LLMError
        model.complete(MSGS, purpose="actor", call_id="bad")
    assert not isinstance(e.value, ContextLengthError)


def test_bounded_attempts_then_llm_error_says_what_happened(server, make_model):
    server.push(*[Reply.error(503)] * 3)
    model = _vllm(make_model, server, max_attempts=3)
    with pytest.raises(LLMError) as e:
        model.complete(MSGS, purpose="actor", call_id="x")
    msg = str(e.value)
    assert "after 3 attempt(s)" in msg and "HTTP 503" in msg and server.base_url in msg
    assert "max_attempts=3" in msg
    assert isinstance(e.value.__cause__, CallFailure)
    assert len(server.chat_requests()) == 3


def test_connection_refused_is_retried_then_fails(make_model):
    with FakeLLMServer() as dead:
        url = dead.base_url
    model = make_model(provider="vllm", name="q", base_url=url, max_attempts=2)
    with pytest.raises(LLMError, match="connection"):
        model.complete(MSGS, purpose="actor", call_id="x")


def test_empty_and_truncated_are_returned_and_flagged(server, make_model, tmp_path):
    server.push(
        Reply.empty(), Reply(text=None), Reply(text="<think>long thinking", finish_reason="length")
    )
    model = _vllm(make_model, server)
    empty = model.complete(MSGS, purpose="actor", call_id="e1")
    null = model.complete(MSGS, purpose="actor", call_id="e2")
    cut = model.complete(MSGS, purpose="actor", call_id="e3")
    assert empty.text == "" and null.text == "" and cut.text == ""
    assert cut.finish_reason == "length" and cut.reasoning == "long thinking"
    rows = [json.loads(x) for x in (tmp_path / "llm_calls.jsonl").read_text().splitlines()]
    assert [r["empty"] for r in rows] == [True, True, True]
    assert [r["truncated"] for r in rows] == [False, False, True]
    assert len(server.chat_requests()) == 3  # not retried


def test_concurrency_limit_per_endpoint(make_model):
    with FakeLLMServer(latency_s=0.1) as srv:
        model = make_model(provider="vllm", name="q", base_url=srv.base_url, max_concurrency=3)
        errors: list[BaseException] = []

        def worker(i: int) -> None:
            try:
                model.complete([Message("user", f"q{i}")], purpose="actor", call_id=f"c{i}")
            except BaseException as e:  # surface in the main thread
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert len(srv.chat_requests()) == 12
        assert srv.max_in_flight == 3
        assert model.totals().calls == 12
