"""Runs made once per session by the scripted train entry point, for the report tests.

- ``opo`` seeds 0, 1, 2 on BabyAI (the README's main job, with a tiny schedule): seed 0 runs
  to the end; seed 1 is SIGKILLed after its first batch and finished with ``--resume``;
  seed 2 is paused (SIGSTOP) after its first batch and stays a live run in progress for the
  whole session — its process holds the run's lock and ``summary.json`` says ``running`` —
  until the session ends and it is killed.
- ``speedrunner`` seed 0: the offline SpeedRunner demo (recorded inducer and actor) on its
  first five batches, so codebook generations, skill calls and call trees exist, and
  training episode 46's skill call stops at the per-call action cap.
- ``react`` seed 0: two episodes whose scripted answer at turn 1 is an invalid action (and
  whose first thought carries HTML markup), and no evaluation at all (``run.eval_episodes=0``).

All five start at once; about 25 s on 2 cores.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from ..e2e import prewarmed
from ..e2e.harness import REPO, clean_env, run

BABYAI = REPO / "configs" / "babyai"
OPO = (
    "--config_file",
    str(BABYAI / "opo-scripted-seq.yaml"),
    "--set",
    "run.rollouts=10",
    "--set",
    "run.sleep_every=2",
    "--set",
    "run.eval_every=4",
    "--set",
    "run.eval_episodes=2",
)
SPEEDRUNNER = (
    "--config_file",
    str(BABYAI / "speedrunner-scripted-seq.yaml"),
    "--set",
    "run.rollouts=50",
    "--set",
    "run.eval_every=20",
    "--set",
    "run.eval_episodes=2",
    "--set",
    "method.max_skill_actions=100",
)  # a binding cap: its stops and counts are shown
REACT = (
    "--config_file",
    str(BABYAI / "react-gpt-seq.yaml"),
    "--set",
    "model.provider=scripted",
    "--set",
    "run.rollouts=2",
    "--set",
    "run.sleep_every=2",
    "--set",
    "run.eval_episodes=0",
)
MARKUP = '</script><b id="injected">run text is shown as text</b>'
"""Run files are untrusted text: the report must show this literally, never as markup."""
INVALID = "Thought: (scripted test answer) an action that does not exist.\nAction: fly away"
SLOW = ("--set", "run.parallel_episodes=1")  # operational only: more time to kill after batch 0


@dataclass(frozen=True)
class FixtureRuns:
    root: Path
    opo: dict[int, Path]
    speedrunner: Path
    react: Path
    resumed_seed: int = 1
    in_progress_seed: int = 2


def _train(run_dir: Path, *args: str) -> prewarmed.Process | subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "speedrunner.benchmarks.babyai.train",
        *args,
        "--run_dir",
        str(run_dir),
    ]
    return prewarmed.popen(cmd, cwd=REPO, env=clean_env())


def _signal_after_first_batch(
    proc: prewarmed.Process | subprocess.Popen, run_dir: Path, sig: signal.Signals
) -> None:
    metrics = run_dir / "metrics.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if metrics.exists() and len(metrics.read_bytes().splitlines()) >= 2:
            proc.send_signal(sig)
            break
        time.sleep(0.01)
    if sig == signal.SIGSTOP:
        assert proc.poll() is None, (
            f"the run ended before it could be paused mid-way ({proc.returncode})"
        )
        return
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == -sig, (
        f"the run was not killed mid-way ({proc.returncode}): {stderr[-2000:]}"
    )


def _finish(proc: prewarmed.Process | subprocess.Popen) -> None:
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-3000:]


@pytest.fixture(scope="session")
def fixture_runs(tmp_path_factory) -> Iterator[FixtureRuns]:
    root = tmp_path_factory.mktemp("report-runs")
    opo = {seed: root / f"opo-seed{seed}" for seed in (0, 1, 2)}
    speedrunner, react = root / "speedrunner-seed0", root / "react-seed0"
    script = root / "react-script.yaml"
    script.write_text(
        yaml.safe_dump(
            [f"Thought: (scripted test answer) {MARKUP}\nAction: turn left", INVALID]
            + ["Action: turn left"] * 28
        )
    )
    done = _train(opo[0], *OPO)
    demo = _train(speedrunner, *SPEEDRUNNER)
    invalid = _train(react, *REACT, "--set", f"model.script={script}")
    killed = _train(opo[1], *OPO, "--set", "run.seed=1", *SLOW)
    paused = _train(opo[2], *OPO, "--set", "run.seed=2", *SLOW)
    try:
        _signal_after_first_batch(killed, opo[1], signal.SIGKILL)
        _signal_after_first_batch(paused, opo[2], signal.SIGSTOP)
        resume = run(
            [sys.executable, "-m", "speedrunner.benchmarks.babyai.train", "--resume", str(opo[1])],
            timeout=300,
        )
        assert resume.returncode == 0, resume.stderr[-3000:]
        for proc in (done, demo, invalid):
            _finish(proc)
        yield FixtureRuns(root, opo, speedrunner, react)
    finally:
        paused.kill()  # SIGKILL works on a stopped process; its BabyAI server follows it
        paused.communicate(timeout=60)
