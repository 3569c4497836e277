"""benchmarks/full_schedule.py: its lower bound is what latency alone forces, read from the
calls the run made, and each stretch of wall time is charged to the phase it belongs to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _scripts_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))


def test_a_group_needs_its_longest_episode_or_its_calls_spread_over_the_workers() -> None:
    from full_schedule import group_bound

    assert group_bound([10, 3, 3], workers=3) == 10  # the longest episode decides
    assert group_bound([10] * 30, workers=10) == 30  # three rounds of ten
    assert group_bound([5, 5, 5], workers=2) == 8  # ceil(15 / 2)
    assert group_bound([], workers=4) == 0


def test_the_bound_reads_batches_evaluations_and_sleep_turns_from_the_run(tmp_path: Path) -> None:
    from full_schedule import read_bound

    (tmp_path / "config.resolved.json").write_text(
        json.dumps({"run": {"parallel_episodes": 2}, "model": {"max_concurrency": 32}})
    )
    rows = [{"batch": 0, "llm_calls": c} for c in (4, 4, 4)] + [
        {"batch": 1, "llm_calls": c} for c in (1, 9, 1)
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "eval.jsonl").write_text(json.dumps({"per_episode": [{"llm_calls": 3}] * 4}) + "\n")
    for batch, turns in ((0, 2), (1, 1)):
        (tmp_path / "sleep" / f"batch_{batch:04d}").mkdir(parents=True)
        (tmp_path / "sleep" / f"batch_{batch:04d}" / "sleep.json").write_text(
            json.dumps({"turns": turns})
        )
    bound, facts = read_bound(tmp_path)
    assert (bound.wake_calls, bound.eval_calls, bound.sleep_calls) == (6 + 9, 6, 3)
    assert bound.seconds(0.1) == pytest.approx(2.4)
    assert facts["episodes"] == 6


def test_wall_time_is_charged_to_the_phase_each_progress_line_opened() -> None:
    from full_schedule import Phases

    p = Phases(
        lines=[
            (2.0, "run directory: x"),
            (3.0, "eval at rollout 0"),
            (4.0, "eval at rollout 0: success_mean 0.000 over 2 episodes"),
            (4.5, "wake: batch 1/1"),
            (6.0, "episodes done 1/1"),
            (7.0, "sleep: batch 1/1 (learning from knowledge v0)"),
            (9.0, "knowledge v1 ready"),
            (9.5, "eval at rollout 1"),
            (10.0, "eval at rollout 1: success_mean 0.000 over 2 episodes"),
            (10.2, "done: 1 training"),
            (11.0, "done"),
        ]
    )
    p.add(started=0.0)
    assert (p.startup_s, p.eval_s, p.wake_s, p.sleep_s) == (3.0, 1.5, 2.5, 2.0)
    assert p.exit_s == pytest.approx(0.8)
    assert p.between_s == pytest.approx(1.2)
    assert p.loop_s == pytest.approx(7.2)
