"""The report shows the paper's skill metrics of a tiny skill run
(tests/runtime/test_skill_metrics.py), values checked against the same hand computation."""

from __future__ import annotations

import csv
import json

import pytest

from speedrunner.core.reporting import build_report
from speedrunner.core.rundir import RUN_FORMAT
from tests.runtime.test_skill_metrics import SOURCE, tiny_config, tiny_run


@pytest.fixture
def run_dir(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    metrics, evals = tiny_run(run)
    (run / "config.resolved.json").write_text(json.dumps(tiny_config().model_dump(mode="json")))
    (run / "provenance.json").write_text(json.dumps({"run_format": RUN_FORMAT, "run_id": run.name}))
    (run / "codebook").mkdir()
    for g, source in enumerate(['"""Empty."""\n', SOURCE, SOURCE]):  # what the fake method played
        (run / "codebook" / f"gen_{g}.py").write_text(source)
        (run / "codebook" / f"gen_{g}.json").write_text("{}")
    return run


def table(out, name: str) -> list[dict]:
    with open(out / "tables" / f"{name}.csv", newline="") as f:
        return list(csv.DictReader(f))


def curve(rows: list[dict], name: str) -> dict[int, float]:
    return {int(r["rollout"]): float(r["value_mean"]) for r in rows if r["curve"] == name}


def seeds_and_targets(run_dir) -> tuple[list[int], list[int]]:
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()]
    return [1 + r["seed"] % 4 for r in metrics], [
        1 + e["seed"] % 4 for e in evals[-1]["per_episode"]
    ]


def test_the_report_shows_the_skill_metrics(run_dir, tmp_path):
    report = build_report([run_dir], tmp_path / "report")
    train, final_eval = seeds_and_targets(run_dir)
    knowledge = {int(r["generation"]): r for r in table(report.out, "knowledge")}
    assert (
        knowledge[1]["skill_api_tokens_mean"] == "11"
        and knowledge[1]["dynamic_max_call_depth_mean"] == "2"
    )
    assert (
        knowledge[1]["max_call_depth_mean"] == "2"
        and knowledge[1]["call_graph_density_mean"] == "0.5"
    )
    assert (
        knowledge[0]["skill_api_tokens_mean"] == "0"
        and knowledge[0]["dynamic_max_call_depth_mean"] == "0"
    )
    curves = table(report.out, "curves")
    # batch 0 played generation 0 (inc by inc), batch 1 generation 1 (one skill call each)
    assert curve(curves, "within_2_llm_calls_share") == pytest.approx(
        {2: sum(t <= 2 for t in train[:2]) / 2, 4: 1.0}
    )
    assert curve(curves, "llm_calls_amortised_per_episode") == pytest.approx(
        {2: sum(train[:2]) / 2 + 1, 4: 2.0}
    )
    # none in batch 0
    assert curve(curves, "actions_per_skill_call") == pytest.approx({4: sum(train[2:]) / 2})
    assert curve(curves, "dynamic_call_depth") == {2: 0.0, 4: 2.0}
    assert curve(curves, "eval_actions_per_skill_call") == pytest.approx({4: sum(final_eval) / 3})
    assert curve(curves, "eval_within_2_llm_calls_share")[4] == 1.0
    (summary,) = table(report.out, "summary")
    assert float(summary["final_eval_skill_calls_per_episode_mean"]) == 1.0
    assert float(summary["llm_calls_amortised_per_episode_mean"]) == pytest.approx(
        (sum(train[:2]) + 2) / 4 + 1
    )
    names = {p.name for p in report.plots}
    assert {
        "skills",
        "skill_api_tokens",
        "within_2_llm_calls_share",
        "llm_calls_amortised_per_episode",
    } <= names
    assert "actions per skill call" in (report.out / "plots" / "skills.svg").read_text()
    assert "skill_api_tokens" in (report.out / "report.md").read_text()
