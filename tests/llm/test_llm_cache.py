"""Cache and replay: a resumed run replays what it paid for; mismatches and opt-out call for
real."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap

from speedrunner.core.llm import Message
from speedrunner.core.llm.cache import ResponseCache
from speedrunner.testing.fake_llm_server import Reply

MSGS = [Message("system", "s"), Message("user", "u")]


def _rows(tmp_path):
    return [json.loads(x) for x in (tmp_path / "llm_calls.jsonl").read_text().splitlines()]


def test_replay_after_restart_with_new_objects(server, make_model, tmp_path):
    server.push(Reply(text="paid", prompt_tokens=1000, completion_tokens=100))
    first = make_model(provider="openai", name="gpt-5.4-mini", base_url=server.base_url)
    a = first.complete(MSGS, purpose="actor", call_id="ep0/0")
    first.close()
    assert a.cost_usd and a.cost_usd > 0 and not a.cached

    second = make_model(provider="openai", name="gpt-5.4-mini", base_url=server.base_url)
    b = second.complete(MSGS, purpose="actor", call_id="ep0/0")
    assert len(server.chat_requests()) == 1  # nothing new reached the server
    assert b.cached and b.text == "paid" and b.cost_usd == a.cost_usd and b.usage == a.usage
    t = second.totals()
    assert t.replayed == 1 and t.spent_usd == 0.0 and t.replayed_usd == a.cost_usd
    rows = _rows(tmp_path)
    assert [r["cache_hit"] for r in rows] == [False, True]
    assert rows[1]["spent_usd"] == 0.0 and rows[1]["cost_usd"] == rows[0]["cost_usd"]
    assert rows[1]["attempts"] == 0 and rows[1]["request_hash"] == rows[0]["request_hash"]


def test_replay_in_a_new_process(server, tmp_path):
    script = textwrap.dedent(
        f"""
        from speedrunner.core.config.schema import ModelConfig
        from speedrunner.core.llm import Message, build_model
        m = build_model(ModelConfig(provider="vllm", name="q", base_url={server.base_url!r}),
                        namespace="run-7", cache_path={str(tmp_path / "c.sqlite")!r},
                        calls_log_path={str(tmp_path / "llm_calls.jsonl")!r})
        out = [
            m.complete([Message("user", f"q{{i}}")], purpose="actor", call_id=f"c{{i}}")
            for i in range(3)
        ]
        print(sum(c.cached for c in out))
        """
    )
    runs = [
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
        for _ in range(2)
    ]
    assert [r.returncode for r in runs] == [0, 0], runs[1].stderr
    assert [r.stdout.strip() for r in runs] == ["0", "3"]
    assert len(server.chat_requests()) == 3


def test_other_namespace_does_not_replay(server, make_model):
    make_model(provider="vllm", name="q", base_url=server.base_url, namespace="A").complete(
        MSGS, purpose="actor", call_id="x"
    )
    c = make_model(provider="vllm", name="q", base_url=server.base_url, namespace="B").complete(
        MSGS, purpose="actor", call_id="x"
    )
    assert not c.cached and len(server.chat_requests()) == 2


def test_replay_disabled_still_stores(server, make_model, tmp_path):
    make_model(provider="vllm", name="q", base_url=server.base_url).complete(
        MSGS, purpose="actor", call_id="x"
    )
    off = make_model(provider="vllm", name="q", base_url=server.base_url, replay=False)
    c = off.complete(MSGS, purpose="actor", call_id="x")
    assert not c.cached and len(server.chat_requests()) == 2
    cache = ResponseCache(tmp_path / "llm_cache.sqlite")
    assert cache.count("run-1") == 1
    cache.close()


def test_base_url_is_not_part_of_the_key(make_model):
    from speedrunner.testing.fake_llm_server import FakeLLMServer

    with FakeLLMServer() as s1, FakeLLMServer() as s2:
        make_model(provider="vllm", name="q", base_url=s1.base_url).complete(
            MSGS, purpose="actor", call_id="x"
        )
        c = make_model(provider="vllm", name="q", base_url=s2.base_url).complete(
            MSGS, purpose="actor", call_id="x"
        )
        assert c.cached and not s2.chat_requests()


def test_same_call_id_different_request_calls_for_real_and_warns(server, make_model, caplog):
    server.push(Reply(text="old"), Reply(text="new"))
    make_model(provider="vllm", name="q", base_url=server.base_url).complete(
        MSGS, purpose="actor", call_id="x"
    )
    model = make_model(provider="vllm", name="q", base_url=server.base_url)
    changed = [Message("system", "s"), Message("user", "different")]
    with caplog.at_level(logging.WARNING, logger="speedrunner.core.llm.client"):
        c = model.complete(changed, purpose="actor", call_id="x")
    assert not c.cached and c.text == "new" and len(server.chat_requests()) == 2
    assert any("different request" in r.getMessage() for r in caplog.records)
    # sampling is part of the request too
    c2 = model.complete(changed, purpose="actor", call_id="x", temperature=0.5)
    assert not c2.cached
    # the stored row now holds the latest request, which replays
    c3 = model.complete(changed, purpose="actor", call_id="x", temperature=0.5)
    assert c3.cached


def test_concurrent_threads_share_the_cache(server, make_model):
    import threading

    model = make_model(provider="vllm", name="q", base_url=server.base_url)
    threads = [
        threading.Thread(
            target=model.complete,
            args=([Message("user", str(i))],),
            kwargs={"purpose": "actor", "call_id": f"t{i}"},
        )
        for i in range(16)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    again = make_model(provider="vllm", name="q", base_url=server.base_url)
    assert all(
        again.complete([Message("user", str(i))], purpose="actor", call_id=f"t{i}").cached
        for i in range(16)
    )
    assert len(server.chat_requests()) == 16


def test_scripted_resume_gives_the_same_answers(tmp_path, make_model):
    script = tmp_path / "s.json"
    script.write_text(json.dumps(["one", "two", "three"]))
    m1 = make_model(provider="scripted", name="s", script=str(script))
    assert (
        m1.complete([Message("user", "a")], purpose="actor", call_id="train/0000/actor/0000").text
        == "one"
    )
    assert (
        m1.complete([Message("user", "b")], purpose="actor", call_id="train/0000/actor/0001").text
        == "two"
    )
    assert (
        m1.complete([Message("user", "c")], purpose="actor", call_id="train/0001/actor/0000").text
        == "one"
    )
    # resume: a new provider object; episode 0 finished (loaded from disk, never re-asked),
    # episode 1 replays its first call from the cache and then continues live
    m2 = make_model(provider="scripted", name="s", script=str(script))
    r0 = m2.complete([Message("user", "c")], purpose="actor", call_id="train/0001/actor/0000")
    r1 = m2.complete([Message("user", "d")], purpose="actor", call_id="train/0001/actor/0001")
    r2 = m2.complete([Message("user", "e")], purpose="actor", call_id="train/0002/actor/0000")
    assert (r0.cached, r1.cached, r2.cached) == (True, False, False)
    assert [r0.text, r1.text, r2.text] == ["one", "two", "one"]
    assert all(r["scripted"] for r in _rows(tmp_path))
    # without any cache, a fresh provider answers the same call ids the same way
    m3 = make_model(provider="scripted", name="s", script=str(script), cache=False)
    for cid, text in [("train/0001/actor/0001", "two"), ("train/0000/actor/0002", "three")]:
        assert m3.complete([Message("user", "x")], purpose="actor", call_id=cid).text == text


def test_a_request_sent_but_never_answered_is_reported_once_with_a_price_bound(
    server, make_model, tmp_path
):
    from speedrunner.core.llm.journal import reconcile, unaccounted

    model = make_model(provider="openai", name="gpt-5.4-mini", base_url=server.base_url)
    model.cache.mark_sent("run-1", "ep0/3", "actor", model._max_cost(MSGS, model.sampling_for({})))
    result = reconcile(tmp_path / "llm_cache.sqlite", tmp_path / "llm_calls.jsonl", "run-1")
    assert [c.call_id for c in result.in_flight] == ["ep0/3"]
    assert "1 call(s) were in flight" in result.message() and "at most $" in result.message()
    assert (
        reconcile(tmp_path / "llm_cache.sqlite", tmp_path / "llm_calls.jsonl", "run-1").in_flight
        == []
    )
    summary = unaccounted(tmp_path / "llm_cache.sqlite", "run-1")
    assert summary["calls_in_flight_at_kills"] == 1 and summary["max_usd"] > 0
