"""Money after a SIGKILL: every answered call is in llm_calls.jsonl exactly once with its cost,
and calls on the wire at the kill are reported as possibly billed.

The fake server keeps its own record of what it answered (what a provider would bill).
Runs kill themselves with many calls in flight (8 parallel episodes, 0.3 s latency).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from speedrunner.core.atomic import read_jsonl
from speedrunner.core.llm.accounting import messages_digest
from speedrunner.core.llm.types import Message

from . import prewarmed
from .harness import REPO, KillingPolicy, clean_env, run, train_cmd

pytestmark = pytest.mark.slow

MANY_IN_FLIGHT = (
    "--set",
    "run.rollouts=8",
    "--set",
    "run.sleep_every=8",
    "--set",
    "run.eval_every=8",
    "--set",
    "run.parallel_episodes=8",
    "--set",
    "run.eval_episodes=0",
)


def paid_rows(run_dir: Path) -> list[dict]:
    return [
        r
        for r in read_jsonl(run_dir / "llm_calls.jsonl")
        if not r["cache_hit"] and r["error"] is None
    ]


@pytest.mark.parametrize("kill_at", [9, 21])
def test_the_log_lists_every_answered_call_once_and_bounds_what_was_in_flight(
    tmp_path: Path, kill_at: int
) -> None:
    from speedrunner.testing.fake_llm_server import FakeLLMServer

    policy = KillingPolicy(kill_at=kill_at)
    server = FakeLLMServer(callback=policy, model_name="fake-model", latency_s=0.3).start()
    run_dir = tmp_path / "run"
    try:
        cmd = train_cmd("babyai", "react-gpt-seq.yaml", run_dir, server.base_url, *MANY_IN_FLIGHT)
        proc = prewarmed.popen(cmd, cwd=REPO, env=clean_env())
        policy.pid = proc.pid
        proc.communicate(timeout=300)
        assert proc.returncode == -9 and policy.killed
        resumed = run([*cmd[:3], "--resume", str(run_dir)])
        assert resumed.returncode == 0, resumed.stderr[-3000:]
    finally:
        server.stop()

    answered = Counter(digest(b) for b in server.answered)
    logged = Counter(r["messages_sha256"] for r in paid_rows(run_dir))
    # Every paid row is a call the server answered; no call id is paid twice in the log.
    assert not logged - answered
    assert len({r["call_id"] for r in paid_rows(run_dir)}) == len(paid_rows(run_dir))
    # What the server answered beyond the log is bounded by the calls reported in flight.
    unlogged = sum((answered - logged).values())
    unaccounted = json.loads((run_dir / "summary.json").read_text())["unaccounted"]
    assert unlogged <= unaccounted["calls_in_flight_at_kills"]
    if unaccounted["calls_in_flight_at_kills"]:
        assert "were in flight when the run was killed" in resumed.stderr
        assert unaccounted["max_usd"] > 0
    # Summing spent_usd gives the money of the logged answers, nothing twice.
    spent = sum(r["spent_usd"] for r in read_jsonl(run_dir / "llm_calls.jsonl"))
    assert abs(spent - sum(r["cost_usd"] for r in paid_rows(run_dir))) < 1e-12


def digest(body: dict) -> str:
    """The log's ``messages_sha256`` of the request the server answered."""
    return messages_digest([Message(m["role"], m["content"]) for m in body["messages"]])
