"""The performance suite (benchmarks/run_all.py): its pieces measure what they say, and the
suite prints every figure with a number. No timing is asserted: the machine is shared."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = REPO / "benchmarks"


@pytest.fixture(autouse=True)
def _scripts_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))


def test_a_missed_target_says_by_how_much_and_a_met_one_says_met() -> None:
    from perf_common import Row

    missed = Row("harness", 0.7, "ms", 0.5)
    assert missed.met is False
    assert missed.verdict() == "MISSED by 0.20 ms (1.40x the target)"
    assert Row("harness", 0.5, "ms", 0.5).verdict() == "met"
    assert Row("strict", 1.5, "x", 1.5, "<").met is False  # "< 1.5x" is not met at 1.5x
    assert Row("throughput", 7.0, "x", 6.0, ">=").met is True
    assert Row("throughput", 4.5, "x", 6.0, ">=").verdict() == "MISSED by 1.50 x (0.75x the target)"
    assert Row("reuse", 0.99, "of prompt").verdict() == "-"  # no target: none invented
    assert Row("failed", math.nan, "ms", 1.0).met is None


def test_harness_time_of_a_turn_excludes_its_model_call_and_env_steps() -> None:
    from harness_step_overhead import turn_overheads

    # turn 0: call 0.0-1.0, env step 1.5-3.5, next call at 4.0 -> 4 - 1 - 2 = 1
    # turn 1: call 4.0-4.5, no env step (invalid answer), next call at 5.0 -> 0.5
    calls = [(0.0, 1.0), (4.0, 4.5), (5.0, 6.0)]
    steps = [(1.5, 3.5), (6.5, 7.0)]
    assert turn_overheads(calls, steps) == [1.0, 0.5]


def test_harness_overhead_is_measured_per_turn_of_real_episodes() -> None:
    from harness_step_overhead import measure

    overheads, env_s, episodes = measure("crafter", 12)
    assert episodes == 1
    assert len(overheads) == 11  # every turn but the last (it has no next call to end it)
    assert all(0 < o < 1 for o in overheads)
    assert env_s > 0


def test_tree_rss_sums_the_children_of_a_process() -> None:
    from perf_common import tree_rss

    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; b = bytearray(200_000_000); sys.stdout.write('x'); "
            "sys.stdout.flush(); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None and child.stdout.read(1) == b"x"
        alone, _ = tree_rss(child.pid)
        rss, processes = tree_rss(os.getpid())
        assert alone > 200_000_000
        assert processes >= 2 and rss > alone
    finally:
        child.kill()
        child.wait()


def test_babyai_client_side_does_not_import_the_level_generator() -> None:
    """A run's start-up: the episodes are played on the server, minigrid is not needed here."""
    code = (
        "import sys, speedrunner.benchmarks.babyai.benchmark, speedrunner.train_cli; "
        "print('minigrid' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_run_all_smoke_prints_every_figure_with_a_number(tmp_path: Path) -> None:
    """Sections 2 and 3 (a BabyAI server, the fake LLM server, a train subprocess): the rest
    start JVMs and sandboxes and are covered by their pieces above and by the full run."""
    out_json = tmp_path / "perf.json"
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "run_all.py"),
            "--smoke",
            "--only",
            "2",
            "3",
            "--json",
            str(out_json),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out_json.read_text())["rows"]
    figures = [r["figure"] for r in rows]
    assert sum(f.startswith("2. wake batch of 10") for f in figures) == 1
    assert sum(f.startswith("2. evaluation of 30") for f in figures) == 1
    assert sum(f.startswith("3. start-up") for f in figures) == 1
    for row in rows:
        assert math.isfinite(row["value"]) and row["value"] > 0
        assert row["verdict"] in ("met",) or row["verdict"].startswith("MISSED by")
        assert row["figure"] in done.stdout
    assert "SMOKE" in done.stdout
    assert time.monotonic() - started < 240


def test_a_failing_figure_is_a_row_with_its_error_and_the_suite_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import run_all
    from perf_common import Row

    def broken(smoke: bool) -> list[Row]:
        raise RuntimeError("the JVM did not start")

    monkeypatch.setattr(
        run_all,
        "SECTIONS",
        {"1": ("works", lambda smoke: [Row("1. works", 0.2, "ms", 0.5)]), "4": ("broken", broken)},
    )
    assert run_all.main(["--json", str(tmp_path / "t.json")]) == 1
    rows = json.loads((tmp_path / "t.json").read_text())["rows"]
    assert [r["figure"] for r in rows] == ["1. works", "4. broken"]
    assert rows[0]["verdict"] == "met"
    assert "FAILED: RuntimeError: the JVM did not start" in rows[1]["detail"]
    assert rows[1]["value"] is None and rows[1]["met"] is None
    out = capsys.readouterr().out
    assert "1 of 1 targets met" in out and "the JVM did not start" in out
