"""One durable write path for paid calls (issue #33): ``llm_calls.jsonl`` is the log, written
(and fsynced) before the answer is stored in the response cache; the cache no longer keeps a
second copy of every row. A process SIGKILLed at any point of a call resumes without paying
twice, and every logged answer is exactly the answer the cache replays.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from speedrunner.core.llm import Message
from speedrunner.core.llm.accounting import answer_from_row
from speedrunner.core.llm.cache import ResponseCache
from speedrunner.core.llm.journal import reconcile, unaccounted
from speedrunner.core.llm.types import ToolSpec
from speedrunner.testing.fake_llm_server import Reply

CALLS = 6

# A run's model in a child process: each call's answer is logged, then cached; KILL_AT names
# the point of call KILL_CALL where the process SIGKILLs itself (a real kill, no cleanup).
CHILD = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from speedrunner.core.config.schema import ModelConfig
    from speedrunner.core.llm import Message, build_model
    from speedrunner.core.llm.accounting import CallLog
    from speedrunner.core.llm.cache import ResponseCache
    from speedrunner.core.llm.provider_openai import OpenAIChatProvider

    run_dir, base_url = Path(sys.argv[1]), sys.argv[2]
    kill_at, kill_call, calls = sys.argv[3], sys.argv[4], int(sys.argv[5])

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    def wrap(cls, name, before):
        original = getattr(cls, name)
        def hooked(self, *args, **kwargs):
            hit = current[0] == kill_call
            if hit and before:
                die()
            result = original(self, *args, **kwargs)
            if hit and not before:
                die()
            return result
        setattr(cls, name, hooked)

    current = [None]
    where = {
        "answered": (OpenAIChatProvider, "call", False),  # answer received, nothing recorded
        "logged": (CallLog, "append", False),  # row written and fsynced, answer not cached
        "committed": (ResponseCache, "commit_answer", False),  # both done
    }
    if kill_at in where:
        wrap(*where[kill_at])
    model = build_model(
        ModelConfig(provider="openai", name="gpt-5.4-mini", base_url=base_url, max_attempts=1),
        namespace="run-1",
        cache_path=run_dir / "llm_cache.sqlite",
        calls_log_path=run_dir / "llm_calls.jsonl",
    )
    for i in range(calls):
        current[0] = f"ep0/{i}"
        messages = [Message("system", "s"), Message("user", f"step {i}")]
        model.complete(messages, purpose="actor", call_id=current[0])
    model.close()
""")


def _child(tmp_path: Path, base_url: str, kill_at: str, kill_call: str) -> int:
    env = {**os.environ, "OPENAI_API_KEY": "sk-fake"}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path), base_url, kill_at, kill_call, str(CALLS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode in (0, -signal.SIGKILL), proc.stderr
    return proc.returncode


def _rows(tmp_path: Path) -> list[dict]:
    return [json.loads(x) for x in (tmp_path / "llm_calls.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(
    ("kill_at", "asked_twice", "restored"),
    [
        (
            "answered",
            1,
            0,
        ),  # in flight at the kill: reported, asked again (it may have been billed)
        ("logged", 0, 1),  # the row is the record: the answer goes back to the cache, replayed
        ("committed", 0, 0),  # both done: plain replay
    ],
)
def test_a_sigkill_at_any_point_of_a_call_pays_it_once(
    server, tmp_path, kill_at, asked_twice, restored
) -> None:
    server.push(
        *[
            Reply(text=f"answer {i}", prompt_tokens=1000, completion_tokens=100)
            for i in range(2 * CALLS)
        ]
    )
    assert _child(tmp_path, server.base_url, kill_at, "ep0/2") == -signal.SIGKILL
    assert len(server.chat_requests()) == 3

    result = reconcile(tmp_path / "llm_cache.sqlite", tmp_path / "llm_calls.jsonl", "run-1")
    assert result.restored_answers == restored
    assert [c.call_id for c in result.in_flight] == (["ep0/2"] if asked_twice else [])

    assert _child(tmp_path, server.base_url, "", "") == 0  # the resumed run, to the end
    assert len(server.chat_requests()) == CALLS + asked_twice
    rows = _rows(tmp_path)
    paid = [r["call_id"] for r in rows if not r["cache_hit"] and r["error"] is None]
    assert sorted(paid) == [
        f"ep0/{i}" for i in range(CALLS)
    ]  # each answer logged as paid exactly once
    assert [r["call_id"] for r in rows if r["cache_hit"]] == ["ep0/0", "ep0/1"] + (
        [] if asked_twice else ["ep0/2"]
    )
    assert sum(r["spent_usd"] for r in rows) == pytest.approx(
        sum(r["cost_usd"] for r in rows if not r["cache_hit"] and r["error"] is None)
    )
    # The call in flight at the kill is in the log too, at its worst case: every later process
    # counts it.
    assert [r["call_id"] for r in rows if r.get("in_flight_at_kill")] == (
        ["ep0/2"] if asked_twice else []
    )
    assert all(r["unknown_usd"] > 0 for r in rows if r.get("in_flight_at_kill"))
    assert (
        unaccounted(tmp_path / "llm_cache.sqlite", "run-1")["calls_in_flight_at_kills"]
        == asked_twice
    )


def test_the_cache_no_longer_keeps_a_second_copy_of_each_row(server, make_model, tmp_path) -> None:
    server.push(*[Reply(text=f"a{i}") for i in range(3)])
    model = make_model(provider="openai", name="gpt-5.4-mini", base_url=server.base_url)
    for i in range(3):
        model.complete([Message("user", f"q{i}")], purpose="actor", call_id=f"c{i}")
    model.close()
    with sqlite3.connect(tmp_path / "llm_cache.sqlite") as conn:
        tables = {
            name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        assert tables == {"responses", "pending", "lost_in_flight"}
        assert conn.execute("SELECT COUNT(*) FROM responses").fetchone() == (3,)
    assert len(_rows(tmp_path)) == 3


TOOLS = [
    ToolSpec(
        "add_function",
        "Add a function.",
        {"type": "object", "properties": {"code": {"type": "string"}}},
    )
]


def test_every_logged_answer_is_the_answer_the_cache_replays(server, make_model, tmp_path) -> None:
    """The log can stand in for the cache: text, reasoning, usage, cost, finish reason and
    tool calls (Gemini's thought signature included) come back from a row unchanged."""
    server.push(
        Reply(
            text="<think>hm</think>Move north.",
            reasoning_tokens=3,
            cached_tokens=4,
            prompt_tokens=40,
        ),
        Reply(text="cut", finish_reason="length"),
    )
    openai = make_model(provider="openai", name="gpt-5.4-mini", base_url=server.base_url)
    openai.complete([Message("user", "a")], purpose="actor", call_id="t0")
    openai.complete([Message("user", "b")], purpose="actor", call_id="t1", max_tokens=3)
    server.push(
        Reply(
            text=None,
            reasoning="thinking",
            tool_calls=[{"name": "add_function", "arguments": {"code": "x"}}],
        )
    )
    gemini = make_model(
        provider="gemini", name="gemini-3-flash", base_url=server.root_url, tool_protocol="native"
    )
    gemini.complete([Message("user", "c")], purpose="inducer", call_id="t2", tools=TOOLS)

    cache = ResponseCache(tmp_path / "llm_cache.sqlite")
    try:
        rows = _rows(tmp_path)
        assert len(rows) == 3
        for row in rows:
            entry = cache.get("run-1", row["call_id"])
            assert entry is not None and answer_from_row(row) == entry.completion, row["call_id"]
        assert answer_from_row(rows[2]).tool_calls[0].signature  # type: ignore[union-attr]
    finally:
        cache.close()


def test_an_answer_restored_from_its_row_is_replayed_not_paid_again(
    server, make_model, tmp_path, monkeypatch
) -> None:
    """In process: the cache's commit fails after the row was written (a kill there)."""
    server.push(Reply(text="paid", prompt_tokens=1000, completion_tokens=100))
    model = make_model(provider="openai", name="gpt-5.4-mini", base_url=server.base_url)

    class Killed(BaseException):
        pass

    with monkeypatch.context() as m:
        m.setattr(ResponseCache, "commit_answer", lambda *a, **k: (_ for _ in ()).throw(Killed()))
        with pytest.raises(Killed):
            model.complete([Message("user", "u")], purpose="actor", call_id="ep0/0")
    assert ResponseCache(tmp_path / "llm_cache.sqlite").get("run-1", "ep0/0") is None
    result = reconcile(tmp_path / "llm_cache.sqlite", tmp_path / "llm_calls.jsonl", "run-1")
    assert result.restored_answers == 1 and result.in_flight == []
    again = make_model(provider="openai", name="gpt-5.4-mini", base_url=server.base_url)
    answer = again.complete([Message("user", "u")], purpose="actor", call_id="ep0/0")
    assert answer.cached and answer.text == "paid" and len(server.chat_requests()) == 1
    assert (
        reconcile(
            tmp_path / "llm_cache.sqlite", tmp_path / "llm_calls.jsonl", "run-1"
        ).restored_answers
        == 0
    )
