"""An offline comparison that can show a difference: react and speedrunner against the fake
served as ``speedrunner fake-llm --policy expert`` (BabyAI's bot as the actor, 30 % of the
answers dressed as real models write them). SpeedRunner's inducer writes skills that do a
mission's steps and its actor calls them, so it needs fewer actor calls per episode at equal
or higher success; every file of the runs names the model fake-expert."""

from __future__ import annotations

import json

import pytest

from speedrunner.testing.realistic import serve

from .harness import run, train_cmd

pytestmark = pytest.mark.slow


def _final_eval(tmp_path, method: str, url: str) -> dict:
    run_dir = tmp_path / method
    proc = run(
        train_cmd(
            "babyai",
            f"{method}-gpt-seq.yaml",
            run_dir,
            url,
            "--set",
            "model.name=fake-expert",
            "--set",
            "benchmark.max_llm_calls=30",
        ),
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["model"] == "fake-expert" and summary["status"] == "finished"
    return summary["final_eval"]


def test_speedrunner_needs_fewer_actor_calls_than_react_against_the_expert_fake(tmp_path):
    server = serve(0, policy="expert")  # the command's defaults: 30 % variants, seed 0
    try:
        react = _final_eval(tmp_path, "react", server.base_url)
        speedrunner = _final_eval(tmp_path, "speedrunner", server.base_url)
    finally:
        server.stop()
    assert react["success_mean"] > 0  # the expert wins levels, so the comparison can show something
    assert speedrunner["success_mean"] >= react["success_mean"]
    assert speedrunner["skill_calls_mean"] > 0
    assert speedrunner["llm_calls_mean"] < react["llm_calls_mean"]
