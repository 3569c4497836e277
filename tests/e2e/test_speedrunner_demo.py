"""The offline SpeedRunner demo: configs/babyai/speedrunner-scripted-seq.yaml with the recorded
inducer and actor (configs/babyai/recorded/speedrunner-babyai-seq.yaml), here on its first two
batches.

The recorded inducer analyses batch 0 in the sandbox, adds a navigation skill and a "pick up,
then go to" skill, and after batch 1 makes the navigation skill a private helper; the recorded
actor calls the mission skill, so LLM calls per episode fall after the first sleep. Every
artifact says scripted."""

from __future__ import annotations

import json
import runpy
import sys

import pytest
import yaml

from .harness import REPO, run

CONFIG = REPO / "configs" / "babyai" / "speedrunner-scripted-seq.yaml"
RECORDED = REPO / "configs" / "babyai" / "recorded" / "speedrunner-babyai-seq.yaml"


def test_the_checked_in_recording_is_what_its_generator_writes():
    generator = runpy.run_path(str(REPO / "scripts" / "record_speedrunner_babyai.py"))
    assert yaml.safe_load(RECORDED.read_text()) == generator["script"]()
    # Relative to the config file, so the demo runs from any directory.
    assert (
        CONFIG.parent / yaml.safe_load(CONFIG.read_text())["model"]["script"]
    ).resolve() == RECORDED.resolve()


@pytest.mark.slow
def test_the_offline_demo_learns_skills_and_llm_calls_fall_after_the_first_sleep(tmp_path):
    run_dir = tmp_path / "run"
    proc = run(
        [
            sys.executable,
            "-m",
            "speedrunner.benchmarks.babyai.train",
            "--config_file",
            str(CONFIG),
            "--run_dir",
            str(run_dir),
            "--set",
            "run.rollouts=20",
            "--set",
            "run.eval_every=20",
            "--set",
            "run.eval_episodes=0",
        ],
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    before = [m["llm_calls"] for m in metrics if m["batch"] == 0]
    after = [m for m in metrics if m["batch"] == 1]
    assert before == [30] * 10 and all(m["scripted"] for m in metrics)
    assert (
        sum(m["llm_calls"] for m in after) / len(after) < 5
        and sum(m["success"] for m in after) >= 8
    )

    first = json.loads((run_dir / "sleep" / "batch_0000" / "sleep.json").read_text())
    assert first["scripted"] and first["edits"] == [
        "add_function go_to",
        "add_function pick_up_then_go_to",
    ]
    analysis = json.loads((run_dir / "sleep" / "batch_0000" / "turn_0000.json").read_text())
    assert analysis["tool"] == "run_python" and analysis["result"].startswith(
        "10 episodes, 0 successes; LLM calls: [30, 30, 30, 30, 30, 30, 30, 30, 30, 30]"
    )
    second = json.loads((run_dir / "sleep" / "batch_0001" / "sleep.json").read_text())
    assert second["edits"] == ["make_private go_to"] and second["public"] == ["pick_up_then_go_to"]
    calls = json.loads((run_dir / "sleep" / "batch_0001" / "turn_0000.json").read_text())["result"]
    assert calls.startswith(
        f"10 skill calls in 10 episodes; {sum(m['success'] for m in after)} successes"
    )
    gen2 = (run_dir / "codebook" / "gen_2.py").read_text()
    assert "def _go_to(env, name: str)" in gen2 and "reached = _go_to(env, first)" in gen2
    assert json.loads((run_dir / "summary.json").read_text())["scripted"] is True
    assert all(
        json.loads(line)["scripted"]
        for line in (run_dir / "llm_calls.jsonl").read_text().splitlines()
    )
