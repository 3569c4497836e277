"""A run directory started before the caps were protocol config still resumes, under the
caps it started with (``max_skill_actions: 50`` and ``skill_timeout_s: 60`` as stored, the
library caps it had then: 40 functions, 60,000 characters).

``tests/fixtures/run_before_caps`` was made by the code before that change: SpeedRunner on
BabyAI with the scripted model (4 rollouts, a sleep every 2), SIGKILLed after its first
batch's checkpoint.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from speedrunner.catalog import config_loader
from speedrunner.core.config.yaml_source import read_yaml_source
from speedrunner.core.runtime.caps import upgrade_stored_method
from speedrunner.core.runtime.loop import config_fingerprint

from ..e2e.harness import run

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "run_before_caps"
SOURCE = read_yaml_source(FIXTURE / "config.yaml")


def stored(run_dir: Path) -> dict:
    return json.loads((run_dir / "config.resolved.json").read_text())


def test_the_stored_config_resolves_to_its_old_caps_and_its_old_fingerprint():
    resolved = stored(FIXTURE)
    assert "max_functions" not in resolved["method"] and resolved["method"]["max_skill_actions"] == 50
    config = config_loader().from_resolved(upgrade_stored_method(resolved), source=SOURCE)
    method = config.method
    assert (method.max_skill_actions, method.skill_timeout_s) == (50, 60.0)
    assert (method.max_functions, method.max_codebook_chars) == (40, 60_000)
    checkpoint = json.loads((FIXTURE / "checkpoint.json").read_text())
    assert config_fingerprint(config) == checkpoint["results_config_sha256"]
    # Read with today's defaults instead (no library cap), it would be another run.
    assert config_fingerprint(config_loader().from_resolved(resolved, source=SOURCE)) != checkpoint["results_config_sha256"]


@pytest.mark.slow
def test_resume_finishes_the_run_and_counts_caps_from_then_on(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir)
    proc = run([sys.executable, "-m", "speedrunner.benchmarks.babyai.train", "--resume", str(run_dir)], timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    checkpoint = json.loads((run_dir / "checkpoint.json").read_text())
    assert checkpoint["completed_batches"] == 2 and checkpoint["metrics_rows"] == 4
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert ["cap_hits" in r for r in rows] == [False, False, True, True]  # rows before the resume stay as written
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "finished"
    assert set(summary["cap_hits"]) == {"max_skill_actions", "skill_timeout", "max_functions", "max_codebook_chars",
                                        "max_functions_per_episode", "max_inducer_turns", "max_iterations_per_world"}
    assert stored(run_dir) == stored(FIXTURE)  # the stored config is never rewritten
