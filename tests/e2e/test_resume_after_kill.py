"""A run SIGKILLed at any point continues with --resume: nothing lost, nothing counted twice,
no answered LLM call paid for again, and the final metrics equal an uninterrupted run's."""

import collections
import json
import sys

import pytest

from . import prewarmed
from .harness import REPO, KillingPolicy, clean_env, rows, run, start_server, train_cmd

CONFIG = ("crafter", "opo-gpt-crafter.yaml")
SMALL = ("--set", "benchmark.max_env_actions=8", "--set", "run.parallel_episodes=1")


def launch(server, run_dir, policy):
    cmd = train_cmd(*CONFIG, run_dir, server.base_url, *SMALL)
    proc = prewarmed.popen(cmd, cwd=REPO, env=clean_env())
    policy.pid = proc.pid
    _, stderr = proc.communicate(timeout=400)
    return proc.returncode, stderr


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reference")
    policy = KillingPolicy()
    server = start_server(policy)
    try:
        code, stderr = launch(server, tmp / "run", policy)
    finally:
        server.stop()
    assert code == 0, stderr[-2000:]
    return tmp / "run", policy.answered


@pytest.mark.slow
@pytest.mark.parametrize(
    "kill", ["at:5", "at:30", "guide", "at:60"], ids=["eval0", "wake", "sleep", "final-eval"]
)
def test_sigkill_then_resume_equals_an_uninterrupted_run(tmp_path, reference, kill):
    ref_dir, ref_requests = reference
    policy = KillingPolicy(
        kill_at=int(kill[3:]) if kill.startswith("at:") else None, kill_on_guide=kill == "guide"
    )
    run_dir = tmp_path / "run"
    server = start_server(policy)  # the same endpoint serves the killed and the resumed process
    try:
        code, _ = launch(server, run_dir, policy)
        assert policy.killed and code == -9  # really killed by SIGKILL
        assert (
            json.loads((run_dir / "summary.json").read_text())["status"] == "running"
        )  # never finished
        resumed = run(
            [sys.executable, "-m", "speedrunner.benchmarks.crafter.train", "--resume", str(run_dir)]
        )
    finally:
        server.stop()
    assert resumed.returncode == 0, resumed.stderr[-2000:]

    for name in ("metrics.jsonl", "eval.jsonl"):
        assert rows(run_dir / name) == rows(ref_dir / name), name
    assert [p.name for p in sorted((run_dir / "episodes" / "train").iterdir())] == [
        p.name for p in sorted((ref_dir / "episodes" / "train").iterdir())
    ]
    # Calls answered before the kill were replayed from the cache, not paid again: the answered
    # calls plus the resumed run's calls are exactly the uninterrupted run's calls.
    assert collections.Counter(policy.answered) + collections.Counter(
        policy.after_kill
    ) == collections.Counter(ref_requests)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["training"]["episodes"] == 4


def test_resume_refuses_overrides(tmp_path, reference):
    ref_dir, _ = reference
    proc = run(
        [
            sys.executable,
            "-m",
            "speedrunner.benchmarks.crafter.train",
            "--resume",
            str(ref_dir),
            "--set",
            "run.seed=3",
        ]
    )
    assert proc.returncode == 2 and "run.seed cannot change on --resume" in proc.stderr
