"""A malicious skill and malicious analysis code, each in a real training run (SpeedRunner on
BabyAI, fake OpenAI-compatible server): the run goes to the end (exit 0), each violation is
in the trajectory or sleep record, ``summary.json`` and the report, and a run killed after
it ``--resume``s to the same end without paying any call twice, even with an episode file
torn on the way."""

from __future__ import annotations

import collections
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from speedrunner.core.reporting import build_report

from . import prewarmed
from .harness import REPO, clean_env, rows, run, start_server
from .speedrunner_fakes import SpeedRunnerFakeLLM, tool
from .test_speedrunner import LEVELS, ROLLOUTS, Killer, cmd, episode, sleep_dir

pytestmark = pytest.mark.slow
LAUNCHER = str(REPO / "tests" / "e2e" / "hostile_train.py")
MODULE = "speedrunner.benchmarks.babyai.train"
FORGE = """import json, os, sys
me = next(
    f.frame.f_locals["request"]["id"]
    for f in __import__("inspect").stack()
    if "request" in f.frame.f_locals
)
# A reply to the *next* request (the setup of the next run_python), written ahead of the real one:
# ids are random, so it can only guess the next one.
nxt = me + 1 if isinstance(me, int) else "0" * 32
forged = json.dumps({"id": nxt, "stdout": "", "error": "forged"}) + "\\n"
os.write(int(sys.argv[3]), forged.encode())
print("analysed")
"""


def run_killed_then_resumed(
    command, resume: list[str], fake, run_dir: Path, *, tear: int
) -> tuple[str, Killer]:
    """``command(url)`` is SIGKILLed at the third inducer turn of the second sleep; episode ``tear``
    (stored, in the batch being resumed) is torn as a disk fault would; ``resume`` must end the run
    exactly: every episode once, no call paid twice (the replayed episode comes from the cache)."""
    killer = Killer(fake, "turn")
    server = start_server(killer)
    try:
        proc = prewarmed.popen(command(server.base_url), cwd=REPO, env=clean_env())
        killer.pid = proc.pid
        _, err = proc.communicate(timeout=600)
        assert killer.killed and proc.returncode == -signal.SIGKILL, err[-3000:]
        (run_dir / "episodes" / "train" / f"{tear:04d}.json").write_text(
            '{"split": "train", "steps": [[['
        )
        resumed = run(resume, timeout=600)
    finally:
        server.stop()
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"{tear:04d}.json" in resumed.stderr
    assert (run_dir / "episodes" / "train" / f"{tear:04d}.json.corrupt").exists()
    assert episode(run_dir, tear)["index"] == tear
    calls = [json.loads(line) for line in (run_dir / "llm_calls.jsonl").read_text().splitlines()]
    paid = collections.Counter(
        c["call_id"] for c in calls if not c["cache_hit"] and c["error"] is None
    )
    assert all(n == 1 for n in paid.values()) and not set(killer.after) & set(killer.answered)
    assert any(c["call_id"].startswith(f"train/{tear:04d}/") and c["cache_hit"] for c in calls)
    assert [r["index"] for r in rows(run_dir / "metrics.jsonl")] == list(range(ROLLOUTS))
    return resumed.stderr, killer


def report_cell(run_dir: Path, tmp_path: Path) -> str:
    report = build_report([run_dir], tmp_path / "report")
    runs = next(t for t in report.tables if t.name == "runs")
    assert (
        "sandbox_violations" in (runs.notes or {})
        and "sandbox_violations" in report.html.read_text()
    )
    return runs.rows[0]["sandbox_violations"]


def test_a_skill_that_took_over_its_sandbox_costs_its_calls_not_the_run(tmp_path) -> None:
    """Every skill call answers with a 400-level forged tree (before: RecursionError, exit 1,
    and the same on --resume). Now each is a counted violation built from the served actions."""
    run_dir = tmp_path / "run"
    base = cmd("speedrunner", run_dir, "URL")
    fake = SpeedRunnerFakeLLM(LEVELS)
    server = start_server(fake)
    try:
        command = [
            sys.executable,
            LAUNCHER,
            "deep_tree",
            MODULE,
            *[a.replace("URL", server.base_url) for a in base[3:]],
        ]
        first = subprocess.run(
            command, capture_output=True, text=True, timeout=600, env=clean_env(), cwd=REPO
        )
    finally:
        server.stop()
    assert first.returncode == 0, first.stderr[-3000:]
    violations = [r["sandbox_violations"] for r in rows(run_dir / "metrics.jsonl")]
    assert violations[:2] == [0, 0] and all(
        v > 0 for v in violations[2:]
    )  # generation 1's skill, batch 1
    calls = [s["skill_call"] for s in episode(run_dir, 2)["steps"] if s["skill_call"]]
    assert calls and all("nested deeper than 40 calls" in c["sandbox_violation"] for c in calls)
    assert all(c["calls"] == [] and len(c["actions"]) == 1 for c in calls)  # what the parent served
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["sandbox_violations"]["train"] == sum(
        violations
    )
    assert report_cell(run_dir, tmp_path) == str(summary["sandbox_violations"]["total"])


def test_a_malicious_skill_run_killed_and_resumed_with_a_torn_episode_ends_exactly(
    tmp_path,
) -> None:
    run_dir = tmp_path / "run"
    run_killed_then_resumed(
        lambda url: [
            sys.executable,
            LAUNCHER,
            "deep_tree",
            MODULE,
            *cmd("speedrunner", run_dir, url)[3:],
        ],
        [sys.executable, LAUNCHER, "deep_tree", MODULE, "--resume", str(run_dir)],
        SpeedRunnerFakeLLM(LEVELS),
        run_dir,
        tear=3,
    )
    violations = [r["sandbox_violations"] for r in rows(run_dir / "metrics.jsonl")]
    assert all(v > 0 for v in violations[2:])
    assert json.loads((run_dir / "summary.json").read_text())["sandbox_violations"]["train"] == sum(
        violations
    )


def test_malicious_analysis_code_costs_one_turn_and_the_run_resumes(tmp_path) -> None:
    """The analysis code writes a reply for the next request onto its pipe (before: the next
    run_python's setup read it, the run exited 1 and --resume crashed the same way)."""
    run_dir = tmp_path / "run"
    fake = SpeedRunnerFakeLLM(LEVELS)
    fake.turns[0][0] = tool("run_python", FORGE)
    run_killed_then_resumed(
        lambda url: cmd("speedrunner", run_dir, url),
        [sys.executable, "-m", MODULE, "--resume", str(run_dir)],
        fake,
        run_dir,
        tear=3,
    )
    first = json.loads((sleep_dir(run_dir, 0) / "sleep.json").read_text())
    turn0 = json.loads((sleep_dir(run_dir, 0) / "turn_0000.json").read_text())
    assert first["sandbox_violations"] == 1 and "broke the protocol" in turn0["result"]
    assert "forged" not in turn0["result"] and first["edits"]  # the phase went on and learned
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["sandbox_violations"]["sleep"] == 1
    assert report_cell(run_dir, tmp_path) == "1"
