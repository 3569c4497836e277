"""What a run directory records: file modes that follow the umask, real elapsed time and a
run status, resumes in provenance, names that say what a hash covers, and no real model's
name on a scripted run."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from speedrunner.benchmarks.babyai.benchmark import OWNER_FILE
from speedrunner.errors import CheckpointError

from .harness import REPO, clean_env

pytestmark = pytest.mark.slow

SCRIPTED = str(REPO / "configs" / "babyai" / "opo-scripted-seq.yaml")
TRAIN = [sys.executable, "-m", "speedrunner.benchmarks.babyai.train"]


def train(*args: str, umask: int = 0o022) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*TRAIN, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=clean_env(),
        preexec_fn=lambda: os.umask(umask),
    )


@pytest.mark.parametrize("umask", [0o022, 0o027], ids=["umask022", "umask027"])
def test_every_file_and_directory_follows_the_umask(tmp_path: Path, umask: int) -> None:
    run_dir = tmp_path / "run"
    proc = train("--config_file", SCRIPTED, "--quick_test", "--run_dir", str(run_dir), umask=umask)
    assert proc.returncode == 0, proc.stderr[-3000:]
    paths = [run_dir, *run_dir.rglob("*")]
    assert any(p.name == "llm_cache.sqlite" for p in paths) and any(
        p.suffix == ".jsonl" for p in paths
    )
    for path in paths:
        mode = stat.S_IMODE(path.stat().st_mode)
        if (
            path.name == OWNER_FILE
        ):  # the one secret (the BabyAI server's owner token): the user's only
            assert mode == 0o600, f"{path}: {oct(mode)}"
        elif path.is_dir():
            assert mode == 0o777 & ~umask, f"{path}: {oct(mode)}"
        else:
            # read bits exactly as the umask allows (collaborators can read), nothing beyond it
            assert mode & 0o444 == 0o444 & ~umask, f"{path}: {oct(mode)}"
            assert mode & ~(0o666 & ~umask) == 0, f"{path}: {oct(mode)}"


def test_summary_has_real_elapsed_time_timestamps_and_a_status(tmp_path: Path) -> None:
    import time

    run_dir = tmp_path / "run"
    started = time.monotonic()
    proc = train(
        "--config_file",
        SCRIPTED,
        "--quick_test",
        "--run_dir",
        str(run_dir),
        "--set",
        "run.parallel_episodes=2",
    )
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["status_reason"] is None
    assert (
        summary["started_at"] < summary["ended_at"] or summary["started_at"] == summary["ended_at"]
    )
    assert summary["started_at"].endswith("+00:00")
    assert 0 < summary["elapsed_s"] <= took  # real time of the process, not a sum
    assert (
        "episode_and_sleep_time_s" in summary["training"]
        and "wall_time_s" not in summary["training"]
    )
    checkpoint = json.loads((run_dir / "checkpoint.json").read_text())
    assert "results_config_sha256" in checkpoint and "config_sha256" not in checkpoint
    provenance = json.loads((run_dir / "provenance.json").read_text())
    assert "config_file_sha256" in provenance and "config_sha256" not in provenance
    assert provenance["config_file_sha256"] != checkpoint["results_config_sha256"]


def test_a_failed_run_says_failed_with_the_reason(tmp_path: Path) -> None:
    from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply

    from .harness import train_cmd

    server = FakeLLMServer(default=Reply.error(401), model_name="fake-model").start()
    try:
        proc = subprocess.run(
            train_cmd("babyai", "react-gpt-seq.yaml", tmp_path / "run", server.base_url),
            capture_output=True,
            text=True,
            timeout=300,
            cwd=REPO,
            env=clean_env(),
        )
    finally:
        server.stop()
    assert proc.returncode == 1, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "failed" and "HTTP 401" in summary["status_reason"]
    assert f"--resume {tmp_path / 'run'}" in proc.stderr


def test_a_checkpoint_of_another_format_is_refused_by_name(tmp_path: Path) -> None:
    from speedrunner.core.runtime.checkpoint import load_checkpoint

    (tmp_path / "checkpoint.json").write_text(
        json.dumps(
            {
                "format": "speedrunner-checkpoint/1",
                "run_id": "r0001",
                "config_sha256": "abc",
                "totals": {"episodes": 20, "wall_time_s": 12.5},
            }
        )
    )
    with pytest.raises(CheckpointError, match="'speedrunner-checkpoint/1'.*Start a new run"):
        load_checkpoint(tmp_path, run_id="r0001", results_config_sha256="abc")


def test_a_scripted_run_never_carries_the_real_models_name(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = train(
        "--config_file",
        str(REPO / "configs" / "babyai" / "opo-gpt-seq.yaml"),
        "--quick_test",
        "--run_dir",
        str(run_dir),
        "--set",
        "model.provider=scripted",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    resolved = json.loads((run_dir / "config.resolved.json").read_text())
    assert resolved["model"]["name"] == "scripted"
    results = [
        run_dir / n
        for n in (
            "config.resolved.json",
            "llm_calls.jsonl",
            "summary.json",
            "speedrun.json",
            "metrics.jsonl",
            "eval.jsonl",
            "checkpoint.json",
        )
    ]
    results += list((run_dir / "episodes").rglob("*.json")) + list((run_dir / "guide").glob("*.md"))
    for path in results:
        assert "gpt-5.4-mini" not in path.read_text(), path.name
    calls = [json.loads(line) for line in (run_dir / "llm_calls.jsonl").read_text().splitlines()]
    assert {c["model"] for c in calls} == {"scripted"}
    assert json.loads((run_dir / "summary.json").read_text())["model"] == "scripted"


def test_the_scripted_guide_is_a_labelled_placeholder_and_generation_0_is_written(
    tmp_path: Path,
) -> None:
    run_dir = tmp_path / "run"
    proc = train("--config_file", SCRIPTED, "--quick_test", "--run_dir", str(run_dir))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (run_dir / "guide" / "gen_0.md").read_text() == "\n"  # the empty first guide
    guide = (run_dir / "guide" / "gen_2.md").read_text()
    assert guide.startswith("<!-- written by the SCRIPTED model")
    assert "[Placeholder guide written by the SCRIPTED model, not an LLM.]" in guide
    assert "no 'Available actions:' line" not in guide and "- Read the task first" in guide
