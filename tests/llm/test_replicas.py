"""Several OpenAI-compatible servers for one model (vLLM data-parallel replicas).

What a lab relies on: calls spread over the replicas; each replica's concurrency limit holds
across every process of a sweep; a replica that dies is taken out, so later calls do not each
pay a failed attempt, and comes back once it answers; which replica served a call is in
llm_calls.jsonl; the cache and replay do not depend on it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from speedrunner.core.llm.provider import CallFailure
from speedrunner.core.llm.replicas import MAX_OUT_S, Replicas
from speedrunner.core.llm.types import Message
from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply

MSGS = [Message("user", "hi")]


def calls(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "llm_calls.jsonl").read_text().splitlines()]


def test_a_dead_replica_is_taken_out_and_comes_back(make_model, tmp_path):
    with FakeLLMServer() as a, FakeLLMServer() as b:
        url_a, url_b = a.base_url.rstrip("/"), b.base_url.rstrip("/")
        model = make_model(provider="vllm", name="q", base_url=[url_a, url_b])
        a.stop()  # replica a dies
        for i in range(20):
            assert model.complete(MSGS, purpose="actor", call_id=f"ep/{i}").text == "ok"
        rows = calls(tmp_path)
        retried = [r for r in rows if r["attempts"] > 1]
        assert len(retried) == 1, retried  # only the first call that met it paid a failure
        served = [r["endpoint"] for r in rows if r.get("response") is not None]
        assert served and set(served) == {url_b}  # the replica is recorded
        assert model._replicas.out() == [url_a]


def test_the_replica_that_served_a_call_does_not_change_its_replay(make_model, tmp_path):
    with FakeLLMServer() as a, FakeLLMServer() as b:
        urls = [a.base_url, b.base_url]
        first = make_model(provider="vllm", name="q", base_url=urls)
        answers = [first.complete(MSGS, purpose="actor", call_id=f"ep/{i}").text for i in range(6)]
        served = len(a.chat_requests()) + len(b.chat_requests())
        # The same run resumed with the replicas listed the other way round: all replayed.
        again = make_model(provider="vllm", name="q", base_url=list(reversed(urls)))
        assert [
            again.complete(MSGS, purpose="actor", call_id=f"ep/{i}").text for i in range(6)
        ] == answers
        assert len(a.chat_requests()) + len(b.chat_requests()) == served


def test_out_of_service_time_doubles_up_to_a_cap_and_an_answer_resets_it():
    now = [0.0]
    r = Replicas(["http://a", "http://b"], clock=lambda: now[0])
    down = CallFailure("refused", kind="connection", endpoint="http://a")
    bad_request = CallFailure("bad", kind="http", status=400, endpoint="http://a")
    r.failed("http://a", bad_request)
    assert r.out() == []  # our request was wrong: the server is fine
    spans = []
    for _ in range(12):
        r.failed("http://a", down)
        spans.append(r._out_until["http://a"] - now[0])
    assert spans[0] == 5.0 and spans[1] == 10.0 and spans[-1] == MAX_OUT_S
    assert all(r.pick(f"c{i}", 1) == "http://b" for i in range(20))
    now[0] += MAX_OUT_S + 1  # time served: it is tried again
    assert {r.pick(f"c{i}", 1) for i in range(20)} == {"http://a", "http://b"}
    r.failed("http://b", down)
    r.failed("http://a", down)  # both out: the one back first is used
    assert r.pick("c0", 1) == "http://b"
    r.answered("http://a")
    assert r.out() == ["http://b"]


def test_each_replicas_limit_holds_across_the_processes_of_a_sweep(tmp_path):
    """Four processes share two replicas with max_concurrency 2 each (SPEEDRUNNER_LLM_SLOTS_DIR,
    what `speedrunner sweep` sets): neither replica ever has more than 2 calls in flight."""
    lock = threading.Lock()
    in_flight: dict[str, int] = {"a": 0, "b": 0}
    peak: dict[str, int] = {"a": 0, "b": 0}

    def slow(name):
        def policy(body):
            with lock:
                in_flight[name] += 1
                peak[name] = max(peak[name], in_flight[name])
            time.sleep(0.05)
            with lock:
                in_flight[name] -= 1
            return Reply(text="ok")

        return policy

    with FakeLLMServer(callback=slow("a")) as a, FakeLLMServer(callback=slow("b")) as b:
        script = textwrap.dedent(f"""
            import threading
            from speedrunner.core.config.schema import ModelConfig
            from speedrunner.core.llm import build_model
            from speedrunner.core.llm.types import Message
            model = build_model(ModelConfig(provider="vllm", name="q", max_concurrency=2,
                                            base_url={[a.base_url, b.base_url]!r}), namespace="p")
            def work(t):
                for i in range(6):
                    model.complete([Message("user", "hi")], purpose="actor", call_id=f"{{t}}/{{i}}")
            threads = [threading.Thread(target=work, args=(f"t{{k}}",)) for k in range(4)]
            [t.start() for t in threads]; [t.join() for t in threads]
        """)
        env = {
            "SPEEDRUNNER_LLM_SLOTS_DIR": str(tmp_path / "slots"),
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": ":".join(sys.path),
        }
        procs = [subprocess.Popen([sys.executable, "-c", script], env=env) for _ in range(4)]
        assert all(p.wait(timeout=120) == 0 for p in procs)
    assert len(a.chat_requests()) + len(b.chat_requests()) == 4 * 4 * 6
    assert 1 <= peak["a"] <= 2 and 1 <= peak["b"] <= 2, peak


@pytest.mark.slow
def test_a_run_on_two_replicas_killed_mid_run_resumes_and_pays_no_call_twice(tmp_path):
    """Issue #24's kill-and-resume on replicas: a run spread over two servers is SIGKILLed
    with calls in flight, then ``--resume``d. It finishes; no call id is paid twice; every
    paid answer is one a replica gave, recorded with the replica that gave it; what the
    servers answered beyond the log is at most what the run reported in flight at the kill."""
    from collections import Counter

    from speedrunner.core.atomic import read_jsonl
    from speedrunner.core.llm.accounting import messages_digest

    from ..e2e import prewarmed
    from ..e2e.harness import REPO, KillingPolicy, clean_env, run, train_cmd

    policy = KillingPolicy(kill_at=30)  # one count over both replicas
    a = FakeLLMServer(callback=policy, model_name="fake-model", latency_s=0.1).start()
    b = FakeLLMServer(callback=policy, model_name="fake-model", latency_s=0.1).start()
    urls = [a.base_url.rstrip("/"), b.base_url.rstrip("/")]
    run_dir = tmp_path / "run"
    try:
        cmd = train_cmd(
            "babyai",
            "react-gpt-seq.yaml",
            run_dir,
            f"[{urls[0]}, {urls[1]}]",
            "--set",
            "run.rollouts=8",
            "--set",
            "run.sleep_every=4",
            "--set",
            "run.eval_every=8",
            "--set",
            "run.eval_episodes=1",
            "--set",
            "run.parallel_episodes=4",
        )
        proc = prewarmed.popen(cmd, cwd=REPO, env=clean_env())
        policy.pid = proc.pid
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == -9 and policy.killed, err[-3000:]
        before = len(read_jsonl(run_dir / "llm_calls.jsonl"))
        resumed = run([*cmd[:3], "--resume", str(run_dir)])
        assert resumed.returncode == 0, resumed.stderr[-3000:]
    finally:
        a.stop()
        b.stop()
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "finished"
    rows = read_jsonl(run_dir / "llm_calls.jsonl")
    assert 0 < before < len(rows)  # killed mid-run, then went on
    paid = [r for r in rows if not r["cache_hit"] and r["error"] is None]
    assert len({r["call_id"] for r in paid}) == len(paid)  # no call paid twice
    assert {r["endpoint"] for r in paid} == set(urls)  # each row names its replica; both served
    answered = Counter(
        messages_digest([Message(m["role"], m["content"]) for m in body["messages"]])
        for server in (a, b)
        for body in server.answered
    )
    logged = Counter(r["messages_sha256"] for r in paid)
    assert not logged - answered  # every paid answer came from a replica
    in_flight = json.loads((run_dir / "summary.json").read_text())["unaccounted"][
        "calls_in_flight_at_kills"
    ]
    assert sum((answered - logged).values()) <= in_flight
