"""The spending cap (run.max_cost_usd, a sweep's max_cost_usd) against the fake LLM server.

The server bills every request it answers at the run's prices (what a provider would charge),
so "never crosses the cap" is checked on the provider's side, calls still on the wire at the
stop included. Episodes run in parallel (two per batch and per evaluation) with latency, so
calls are in flight together when the cap is checked.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from speedrunner.core.atomic import read_jsonl
from speedrunner.core.llm.spend_cap import CAP_EXIT_CODE
from speedrunner.testing.babyai_expert import BabyAIExpert
from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply
from speedrunner.testing.realistic import RealisticFake

from .harness import REPO, clean_env, rows, run, train_cmd

pytestmark = pytest.mark.slow

CONFIG = ("babyai", "opo-gpt-seq.yaml")
SMALL = (
    "--set",
    "model.sampling.max_tokens=64",
    "--set",
    "run.parallel_episodes=all",
    "--set",
    "benchmark.max_llm_calls=30",
    "--set",
    "speedrun.metric=train_success_rolling",
    "--set",
    "speedrun.window=2",
    "--set",
    "speedrun.target=0.5",
)
PRICE_IN, PRICE_CACHED, PRICE_OUT = 1.0, 0.1, 2.0  # harness.PRICES, USD per 1M tokens
COMPARED = {"run_spent_usd", "max_cost_usd"}  # figures of the money, not of the results


class BillingPolicy:
    """The realistic fake (an expert actor) with a prompt of 4 bytes a token,
    billing what it answers."""

    def __init__(self) -> None:
        self.billed = 0.0
        self.answered = 0
        self._lock = threading.Lock()
        # An expert actor wins levels, so the speedrun target is reached and has a cost.
        self.fake = RealisticFake(variants=0.0, actor=BabyAIExpert.for_run(0, "seq", 8))

    def __call__(self, body: dict) -> Reply:
        reply = self.fake(body)
        prompt = max(reply.prompt_tokens, len(json.dumps(body["messages"]).encode()) // 4)
        cached = min(reply.cached_tokens or 0, prompt)
        reply.prompt_tokens, reply.cached_tokens, reply.delay_s = prompt, cached, 0.05
        with self._lock:
            self.billed += (
                (prompt - cached) * PRICE_IN
                + cached * PRICE_CACHED
                + reply.completion_tokens * PRICE_OUT
            ) / 1e6
            self.answered += 1
        return reply


def _train(run_dir: Path, url: str, *extra: str):
    return run(train_cmd(*CONFIG, run_dir, url, *SMALL, *extra))


def _resume(run_dir: Path, *extra: str):
    return run(
        [
            sys.executable,
            "-m",
            "speedrunner.benchmarks.babyai.train",
            "--resume",
            str(run_dir),
            *extra,
        ]
    )


def _results(path: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in COMPARED} for r in rows(path)]


FLOAT_SLACK = 1e-9
"""Two sums of the same prices in different orders can differ in the last bit (seen in CI:
0.029684 logged against 0.029683999999999995 billed)."""


def _spent(run_dir: Path) -> float:
    return sum(r["spent_usd"] for r in read_jsonl(run_dir / "llm_calls.jsonl"))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The same run, uncapped: what a capped, resumed run must end identical to."""
    run_dir = tmp_path_factory.mktemp("uncapped") / "run"
    policy = BillingPolicy()
    server = FakeLLMServer(callback=policy, model_name="fake-model").start()
    try:
        proc = _train(run_dir, server.base_url)
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-2000:]
    spending = json.loads((run_dir / "summary.json").read_text())[
        "spending"
    ]  # shown without a cap too
    assert spending["max_cost_usd"] is None and spending["spent_usd"] == pytest.approx(
        _spent(run_dir), abs=1e-6
    )
    return run_dir, policy.billed


def test_a_small_cap_stops_before_crossing_and_a_higher_cap_resumes_to_the_uncapped_result(
    tmp_path, reference
):
    ref_dir, ref_billed = reference
    cap = round(ref_billed / 2, 6)  # half of what the whole run costs: it must stop on the way
    policy = BillingPolicy()
    server = FakeLLMServer(callback=policy, model_name="fake-model").start()
    run_dir = tmp_path / "run"
    try:
        capped = _train(run_dir, server.base_url, "--set", f"run.max_cost_usd={cap}")
        billed_at_stop = policy.billed
        summary = json.loads((run_dir / "summary.json").read_text())
        assert capped.returncode == CAP_EXIT_CODE, capped.stderr[-2000:]
        assert summary["status"] == "budget_reached"
        assert summary["spending"]["max_cost_usd"] == cap and summary["spending"]["reached"] is True
        assert (
            "stopped: run spending cap" in capped.stderr
            and "--set run.max_cost_usd=" in capped.stderr
        )
        assert (
            f"of cap ${cap:.4f}" in capped.stdout
        )  # the progress line shows spend against the cap
        assert f"--resume {run_dir}" in capped.stderr
        # Never crossed: what the provider billed (calls on the wire at the stop included) and
        # what the run logged both stay within the cap; and the stop came well before the end.
        # (Logged and billed add the same prices in different orders: equal up to float rounding.)
        assert 0 < _spent(run_dir) <= billed_at_stop + FLOAT_SLACK and billed_at_stop <= cap
        assert billed_at_stop < ref_billed
        # The same cap again: it stops again, at once, paying nothing more.
        again = _resume(run_dir)
        assert again.returncode == CAP_EXIT_CODE
        assert policy.billed <= cap

        resumed = _resume(run_dir, "--set", "run.max_cost_usd=1.0")
        assert resumed.returncode == 0, resumed.stderr[-2000:]
    finally:
        server.stop()
    for name in ("metrics.jsonl", "eval.jsonl"):
        assert _results(run_dir / name) == _results(ref_dir / name), name
    # Nothing paid twice: the capped and the resumed processes together paid what one
    # uninterrupted run pays (calls the stop left on the wire at most once more).
    assert policy.billed == pytest.approx(ref_billed, rel=0.05)
    final = json.loads((run_dir / "summary.json").read_text())
    assert (
        json.loads((ref_dir / "speedrun.json").read_text())["train_cost_usd"] > 0
    )  # reached, at a cost
    assert final["status"] == "finished" and final["spending"]["max_cost_usd"] == 1.0
    assert final["training"]["cost_usd"] == pytest.approx(
        json.loads((ref_dir / "summary.json").read_text())["training"]["cost_usd"]
    )
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    assert metrics[-1]["max_cost_usd"] == 1.0 and metrics[-1]["run_spent_usd"] > 0
    # The leaderboard's record (cost to target included) is the uncapped run's; the cap is not
    # part of what decides results (same results fingerprint).
    volatile = {
        "result_id",
        "run_id",
        "started_at",
        "written_at",
        "git_commit",
        "git_dirty",
        "elapsed_s",
        "train_episode_and_sleep_time_s",
    }
    record, ref_record = (json.loads((d / "speedrun.json").read_text()) for d in (run_dir, ref_dir))
    assert {k: v for k, v in record.items() if k not in volatile} == {
        k: v for k, v in ref_record.items() if k not in volatile
    }
    # The report says what was spent against the cap.
    from speedrunner.core.reporting import build_report

    report = build_report([run_dir], tmp_path / "report")
    spent = json.loads((run_dir / "summary.json").read_text())["spent_usd"]
    assert (
        f"spent ${spent:.4f} of cap $1.0000" in (report.out / "report.md").read_text()
    )  # the run's one figure


def test_a_cap_needs_prices(tmp_path):
    proc = run(
        [
            sys.executable,
            "-m",
            "speedrunner.benchmarks.babyai.train",
            "--config_file",
            str(REPO / "configs" / "babyai" / "react-gpt-seq.yaml"),
            "--quick_test",
            "--run_dir",
            str(tmp_path / "run"),
            "--set",
            "model.provider=vllm",
            "--set",
            "model.base_url=http://127.0.0.1:9/v1",
            "--set",
            "model.name=unpriced-model",
            "--set",
            "run.max_cost_usd=1",
            "--skip_preflight",
        ]
    )
    assert proc.returncode == 2
    assert "has no price" in proc.stderr and "model.prices=" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_two_sweep_workers_share_one_cap(tmp_path, reference):
    from speedrunner.sweep.cli import ledger_path
    from speedrunner.sweep.spec import load_sweep

    _, ref_billed = reference
    policy = BillingPolicy()
    server = FakeLLMServer(callback=policy, model_name="fake-model").start()
    cap = round(ref_billed, 6)  # the two runs together would cost about twice that
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(f"""
name: capped
configs: [{REPO / "configs" / CONFIG[0] / CONFIG[1]}]
output_root: {tmp_path / "runs"}
max_cost_usd: {cap}
set:
  model.provider: vllm
  model.base_url: {server.base_url}
  model.name: fake-model
  model.prices: {{input: {PRICE_IN}, cached_input: {PRICE_CACHED}, output: {PRICE_OUT}}}
  model.sampling.max_tokens: 64
  run.rollouts: 4
  run.sleep_every: 2
  run.eval_every: 2
  run.eval_episodes: 2
grid:
  run.seed: [0, 1]
""")
    cmd = [sys.executable, "-m", "speedrunner.cli", "sweep", str(sweep_file), "--workers", "2"]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=600, cwd=REPO, env=clean_env()
        )
        billed_at_stop = policy.billed
        sweep = load_sweep(sweep_file)
        spent = [_spent(r.run_dir) for r in sweep.runs]
        # Raised caps (the sweep's, and every run's own in `set`): the same runs go on and finish.
        text = sweep_file.read_text().replace(f"max_cost_usd: {cap}", "max_cost_usd: 5.0")
        sweep_file.write_text(text.replace("set:\n", "set:\n  run.max_cost_usd: 2.5\n"))
        rerun = subprocess.run(
            cmd, capture_output=True, text=True, timeout=600, cwd=REPO, env=clean_env()
        )
    finally:
        server.stop()
    assert proc.returncode == CAP_EXIT_CODE, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "budget_reached" in proc.stdout and "spending cap" in proc.stderr
    assert billed_at_stop <= cap
    assert sum(spent) <= cap + FLOAT_SLACK and all(
        s > 0 for s in spent
    )  # both ran, together within the cap
    assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
    again = load_sweep(sweep_file)
    assert [r.run_dir for r in again.runs] == [
        r.run_dir for r in sweep.runs
    ]  # continued, not restarted
    for r in again.runs:
        summary = json.loads((r.run_dir / "summary.json").read_text())
        assert summary["status"] == "finished" and summary["training"]["episodes"] == 4
        assert (
            summary["spending"]["max_cost_usd"] == 2.5
            and summary["spending"]["sweep_max_cost_usd"] == 5.0
        )
    ledger = json.loads(ledger_path(again).read_text())
    assert set(ledger["runs"]) == {r.run_id for r in sweep.runs}
    assert sum(e["spent"] for e in ledger["runs"].values()) == pytest.approx(
        sum(_spent(r.run_dir) for r in again.runs)
    )
