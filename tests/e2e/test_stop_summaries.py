"""However a run stops — Ctrl-C, SIGTERM, its spending cap, a model failing for good —
summary.json holds the totals of its last checkpoint, and the run's spend is one figure:
the same in summary.json, the console's last line and the budget message, and equal to what
llm_calls.jsonl records.

Real ``python -m speedrunner.benchmarks.babyai.train`` runs against the fake LLM server. The
server stops the run itself, at a fixed request of the second batch (after the first
checkpoint), so every stop comes at the same point.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest

from speedrunner.core.atomic import read_jsonl
from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply

from . import prewarmed
from .harness import REPO, clean_env, policy_reply, train_cmd

pytestmark = pytest.mark.slow

ONE_AT_A_TIME = ("--set", "model.sampling.max_tokens=64", "--set", "run.parallel_episodes=1")
STOP_AT = 3
"""The stop comes at the third actor request after the first sleep phase's guide (batch 2)."""


class StoppingPolicy:
    """Answers like ``policy_reply``; at ``STOP_AT`` it signals the run, or fails from then on."""

    def __init__(self, how: str) -> None:
        self.how = how
        self.pid: int | None = None
        self.guides = 0
        self.after_guide = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict) -> Reply:
        with self._lock:
            if "strategy guide" in body["messages"][0]["content"]:
                self.guides += 1
            elif self.guides:
                self.after_guide += 1
            due = self.after_guide >= STOP_AT
            signal_now = due and self.after_guide == STOP_AT and self.how in ("SIGINT", "SIGTERM")
        if signal_now:
            assert self.pid is not None
            os.kill(self.pid, getattr(signal, self.how))
        if due and self.how == "fail":
            return Reply.error(401)
        return policy_reply(body)


def usd(amount: float) -> str:
    """How every line prints dollars (docs/spending.md)."""
    return f"${amount:.4f}"


def _stop(tmp_path: Path, how: str, *extra: str) -> tuple[int, str, str, Path]:
    policy = StoppingPolicy(how)
    run_dir = tmp_path / "run"
    with FakeLLMServer(callback=policy, model_name="fake-model") as server:
        cmd = train_cmd(
            "babyai", "opo-gpt-seq.yaml", run_dir, server.base_url, *ONE_AT_A_TIME, *extra
        )
        proc = prewarmed.popen(cmd, cwd=REPO, env=clean_env())
        policy.pid = proc.pid
        out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err, run_dir


def _assert_true_summary(run_dir: Path, out: str, status: str) -> dict:
    """summary.json holds the last checkpoint's totals, and the log's spend, as the console says."""
    summary = json.loads((run_dir / "summary.json").read_text())
    checkpoint = json.loads((run_dir / "checkpoint.json").read_text())
    assert summary["status"] == status and summary["ended_at"] is not None
    assert checkpoint["totals"]["episodes"] >= 2, (
        "the stop was meant to come after the first checkpoint"
    )
    assert summary["training"] == checkpoint["totals"]
    assert summary["elapsed_s"] == checkpoint["elapsed_s"] > 0
    assert summary["knowledge_version"] == checkpoint["knowledge_version"]
    evals = read_jsonl(run_dir / "eval.jsonl")
    assert (
        [e["rollout"] for e in summary["eval"]]
        == [e["rollout"] for e in evals]
        == checkpoint["eval_points_done"]
    )
    logged = sum(
        r["spent_usd"] for r in read_jsonl(run_dir / "llm_calls.jsonl") if r["error"] is None
    )
    spent = summary["spent_usd"]
    assert spent == pytest.approx(logged, abs=1e-9) and spent > 0
    assert summary["spending"]["spent_usd"] == spent
    last = [line for line in out.splitlines() if line.startswith("run summary")][-1]
    assert last.startswith(
        f"run summary [{status}]: {checkpoint['totals']['episodes']} training episodes"
    )
    assert f"| spent {usd(spent)} " in last
    return summary


@pytest.mark.parametrize(
    "how, code, reason", [("SIGINT", 130, "Ctrl-C"), ("SIGTERM", 143, "SIGTERM")]
)
def test_a_signal_leaves_the_checkpoints_totals_and_the_spend(
    tmp_path: Path, how: str, code: int, reason: str
) -> None:
    rc, out, err, run_dir = _stop(tmp_path, how)
    assert rc == code, err[-3000:]
    summary = _assert_true_summary(run_dir, out, "interrupted")
    assert summary["status_reason"] == reason


def test_a_model_failing_for_good_leaves_the_checkpoints_totals_and_the_spend(
    tmp_path: Path,
) -> None:
    rc, out, err, run_dir = _stop(tmp_path, "fail")
    assert rc == 1, err[-3000:]
    summary = _assert_true_summary(run_dir, out, "failed")
    assert "HTTP 401" in summary["status_reason"]


def test_a_budget_stop_shows_one_spent_figure_everywhere(tmp_path: Path) -> None:
    rc, out, err, run_dir = _stop(tmp_path, "none", "--set", "run.max_cost_usd=0.005")
    assert rc == 3, err[-3000:]
    summary = _assert_true_summary(run_dir, out, "budget_reached")
    spent = usd(summary["spent_usd"])
    message = err[err.index("stopped: run spending cap") :]
    assert f"The run spent {spent} ({run_dir / 'summary.json'} has it as spent_usd)" in message
    assert f"The run spent {spent}" in summary["status_reason"]
    assert message.count("$") == summary["status_reason"].count("$")  # no other dollar figure
    in_flight = summary["spending"]["in_flight_usd"]
    assert (f"up to {usd(in_flight)} more was in flight" in message) == (in_flight > 0)
