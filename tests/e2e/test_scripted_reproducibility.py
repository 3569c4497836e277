"""Same config + seed + scripted model -> the same run, bit for bit (apart from wall-clock
fields), whether episodes run in parallel or not and whether the run was SIGKILLed and resumed."""

import json
import signal
import subprocess
import sys
import time

import pytest

from speedrunner.core.runtime.speedrun import WALL_CLOCK_FIELDS

from .harness import REPO, clean_env, rows

CONFIG = str(REPO / "configs" / "babyai" / "opo-scripted-seq.yaml")
TIMING = {"latency_s", "cached"}


def cmd(run_dir, *extra):
    return [
        sys.executable,
        "-m",
        "speedrunner.benchmarks.babyai.train",
        "--config_file",
        CONFIG,
        "--run_dir",
        str(run_dir),
        "--set",
        "run.rollouts=20",
        "--set",
        "run.eval_every=10",
        "--set",
        "run.eval_episodes=6",
        *extra,
    ]


def episodes(run_dir):
    out = {}
    for path in sorted((run_dir / "episodes").rglob("*.json")):
        data = json.loads(path.read_text())
        data.pop("wall_time_s")
        for step in data["steps"]:
            for key in TIMING:
                step.pop(key)
        out[str(path.relative_to(run_dir))] = data
    return out


@pytest.mark.slow
def test_parallelism_and_a_sigkill_change_nothing(tmp_path):
    serial, parallel, killed = tmp_path / "serial", tmp_path / "parallel", tmp_path / "killed"
    for run_dir, workers in ((serial, 1), (parallel, 4)):
        proc = subprocess.run(
            cmd(run_dir, "--set", f"run.parallel_episodes={workers}"),
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]

    # Kill the third run with SIGKILL once it is well into training, then resume it.
    proc = subprocess.Popen(
        cmd(killed, "--set", "run.parallel_episodes=4"),
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    log = killed / "llm_calls.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not log.exists() or log.read_text().count("\n") < 400):
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    assert (
        json.loads((killed / "summary.json").read_text())["status"] == "running"
    )  # never finished
    resumed = subprocess.run(
        [sys.executable, "-m", "speedrunner.benchmarks.babyai.train", "--resume", str(killed)],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]

    for name in ("metrics.jsonl", "eval.jsonl"):
        assert rows(serial / name) == rows(parallel / name) == rows(killed / name), name
    assert episodes(serial) == episodes(parallel) == episodes(killed)
    per_run = WALL_CLOCK_FIELDS | {
        "run_id",
        "result_id",
        "started_at",
    }  # the ids name each run directory
    speedrun = [
        {k: v for k, v in json.loads((d / "speedrun.json").read_text()).items() if k not in per_run}
        for d in (serial, parallel, killed)
    ]
    assert speedrun[0] == speedrun[1] == speedrun[2] and speedrun[0]["status"] == "finished"
    assert len(rows(serial / "metrics.jsonl")) == 20
    for run_dir in (serial, parallel, killed):
        assert (run_dir / "guide" / "gen_2.md").read_bytes() == (
            serial / "guide" / "gen_2.md"
        ).read_bytes()
