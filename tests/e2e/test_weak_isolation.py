"""A SpeedRunner run whose user named the rlimits tier: it runs to the end, and every artifact
(summary.json, the trajectories, the sleep records) and the report say the isolation was weak.

Attack (issue 22): analysis code under the rlimits tier reads the whole run directory; that is
now only allowed when chosen by name, and then never silently."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .harness import REPO, clean_env, run, start_server
from .speedrunner_fakes import SpeedRunnerFakeLLM
from .test_speedrunner import LEVELS, cmd, episode, sleep_dir

pytestmark = pytest.mark.slow


def test_a_run_under_the_named_rlimits_tier_says_so_everywhere(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    server = start_server(SpeedRunnerFakeLLM(LEVELS, code=True))
    try:
        proc = run(
            [*cmd("speedrunner", run_dir, server.base_url), "--set", "run.sandbox=rlimits"],
            timeout=600,
        )
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resource limits only" in proc.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["sandbox_tier"] == "rlimits" and summary["isolation"].startswith(
        "WEAK ISOLATION"
    )
    sleep = json.loads((sleep_dir(run_dir, 0) / "sleep.json").read_text())
    assert sleep["run_python_calls"] >= 1 and sleep["analysis_tier"] == "rlimits"
    assert sleep["isolation"].startswith("WEAK ISOLATION")
    assert episode(run_dir, 2)["sandbox_tier"] == "rlimits"  # the first episode played with skills
    report = subprocess.run(
        [
            sys.executable,
            "-m",
            "speedrunner.cli",
            "report",
            str(run_dir),
            "--out",
            str(tmp_path / "report"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(),
        cwd=REPO,
    )
    assert report.returncode == 0, report.stderr[-3000:]
    html = next((tmp_path / "report").glob("*.html")).read_text()
    assert 'id="isolation-banner"' in html and "WEAK ISOLATION in" in html
