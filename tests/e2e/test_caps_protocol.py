"""The caps never bind the paper's protocol at the shipped configs' defaults: a competent
hand-written codebook, installed through SpeedRunner's real inducer protocol and played
through the real wake path (sandboxed skill calls), finishes an episode in one or two LLM
calls, with no cap hit recorded (Crafter: the whole 2,000-action episode may be one call).

Only the schedule is shortened (a few rollouts, a sleep after each). The episodes before
the codebook exists (generation 0) are cut after a few LLM calls by
``benchmark.max_llm_calls``, which cannot hide a failure: an episode that needed more than
two calls would show that budget's count.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .caps_fakes import babyai_fake, crafter_fake
from .harness import REPO, run, start_server

pytestmark = pytest.mark.slow
NO_CAP_HITS = {
    "max_skill_actions": 0,
    "skill_timeout": 0,
    "max_iterations_per_world": 0,
    "max_functions": 0,
    "max_codebook_chars": 0,
    "max_functions_per_episode": 0,
    "max_inducer_turns": 0,
}


def train(benchmark: str, config: str, run_dir: Path, fake, *extra: str) -> Path:
    server = start_server(fake)
    try:
        cmd = [
            sys.executable,
            "-m",
            f"speedrunner.benchmarks.{benchmark}.train",
            "--config_file",
            str(REPO / "configs" / benchmark / config),
            "--run_dir",
            str(run_dir),
            "--set",
            "model.provider=vllm",
            "--set",
            f"model.base_url={server.base_url}",
            "--set",
            "model.name=fake-model",
            *extra,
        ]
        proc = run(cmd, timeout=900)
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir


def episodes(run_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((run_dir / "episodes").rglob("*.json"))]


def with_codebook(run_dir: Path, skill: str) -> list[dict]:
    played = [e for e in episodes(run_dir) if e["knowledge_version"] >= 1]
    assert played and all(e["steps"][0]["parsed_action"].startswith(f"{skill}(") for e in played)
    return played


def test_crafter_at_the_shipped_defaults_one_skill_call_plays_the_episode(tmp_path):
    run = train(
        "crafter",
        "speedrunner-gpt-crafter.yaml",
        tmp_path / "run",
        crafter_fake(),
        "--set",
        "run.rollouts=3",
        "--set",
        "run.sleep_every=1",
        "--set",
        "run.eval_every=3",
        "--set",
        "run.eval_episodes=2",
        "--set",
        "benchmark.max_llm_calls=3",
    )
    config = json.loads((run / "config.resolved.json").read_text())
    assert (
        config["method"]["max_skill_actions"] is None
        and config["method"]["skill_timeout_s"] is None
    )
    sleep = json.loads((run / "sleep" / "batch_0000" / "sleep.json").read_text())
    assert sleep["edits"][-1] == "add_function keep_playing" and sleep["ended_by"] == "submit"

    played = with_codebook(run, "keep_playing")
    assert len(played) == 4  # training episodes 1, 2 and both final evaluation episodes
    for e in played:
        assert e["llm_calls"] <= 2 and e["cap_hits"] == {}
        assert all(
            s["skill_call"]["stopped_by"] in ("episode_done", "max_actions", "returned")
            for s in e["steps"]
        )
    assert (
        max(e["env_actions"] for e in played) > 50
    )  # the old per-call cap would have cut these short
    summary = json.loads((run / "summary.json").read_text())
    assert summary["cap_hits"] == NO_CAP_HITS
    assert summary["eval_cap_hits"] == {"max_skill_actions": 0, "skill_timeout": 0}


def test_babyai_with_a_hand_written_codebook_stays_at_two_llm_calls_and_90_percent_success(
    tmp_path,
):
    run = train(
        "babyai",
        "speedrunner-gpt-seq.yaml",
        tmp_path / "run",
        babyai_fake(),
        "--set",
        "run.rollouts=1",
        "--set",
        "run.sleep_every=1",
        "--set",
        "run.eval_every=1",
        "--set",
        "run.eval_episodes=30",
        "--set",
        "benchmark.max_llm_calls=3",
    )
    final = [e for e in episodes(run) if e["split"] == "eval" and e["knowledge_version"] == 1]
    assert len(final) == 30 and final == with_codebook(run, "pick_up_then_go_to")
    assert all(e["llm_calls"] <= 2 and e["cap_hits"] == {} for e in final)
    assert sum(e["success"] for e in final) / len(final) >= 0.9
    assert json.loads((run / "summary.json").read_text())["cap_hits"] == NO_CAP_HITS
