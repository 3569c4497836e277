"""Cap hits end to end: a run at a binding per-call cap (the SpeedRunner demo run at
``method.max_skill_actions=100``) counts every stop in its trajectories, metrics.jsonl rows,
eval.jsonl rows and summary.json, and the report's caps table shows the same counts."""

from __future__ import annotations

import json

import pytest

from speedrunner.cli import main

from .test_report import jsonl, row_of, table

pytestmark = pytest.mark.slow  # the fixture runs train entry points in subprocesses


def test_cap_hits_reach_metrics_summary_and_the_report(fixture_runs, tmp_path):
    run = fixture_runs.speedrunner
    stops = {}
    for path in sorted((run / "episodes" / "train").glob("*.json")):
        episode = json.loads(path.read_text())
        capped = sum(
            s["skill_call"] is not None and s["skill_call"]["stopped_by"] == "max_actions"
            for s in episode["steps"]
        )
        stops[episode["index"]] = capped
        assert episode["cap_hits"].get("max_skill_actions", 0) == capped
    assert stops[46] >= 1  # the demo's episode 46 runs into the cap

    rows = jsonl(run / "metrics.jsonl")
    assert {r["index"]: r["cap_hits"]["max_skill_actions"] for r in rows} == stops
    assert all(
        r["sleep_cap_hits"]
        == {
            "max_functions": 0,
            "max_codebook_chars": 0,
            "max_functions_per_episode": 0,
            "max_inducer_turns": 0,
        }
        for r in rows
    )
    summary = json.loads((run / "summary.json").read_text())
    assert summary["cap_hits"] == {
        "max_skill_actions": sum(stops.values()),
        "skill_timeout": 0,
        "max_iterations_per_world": 0,
        "max_functions": 0,
        "max_codebook_chars": 0,
        "max_functions_per_episode": 0,
        "max_inducer_turns": 0,
    }
    evals = jsonl(run / "eval.jsonl")
    assert summary["eval_cap_hits"]["max_skill_actions"] == sum(
        e["cap_hits"]["max_skill_actions"] for e in evals
    )

    out = tmp_path / "report"
    assert main(["report", str(fixture_runs.root), "--out", str(out)]) == 0
    row = row_of(table(out, "caps"), "speedrunner")
    assert row["caps_in_force"].startswith(
        "max_skill_actions=100; skill_timeout_s=derived; max_functions=none"
    )
    assert float(row["train_max_skill_actions"]) == sum(stops.values())
    assert float(row["train_skill_timeout"]) == 0
    assert row_of(table(out, "caps"), "react", seed="0")["caps_in_force"] == "no skills"
    assert "Caps in force and how often each bound" in (out / "report.md").read_text()
