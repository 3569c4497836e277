"""The README's report command, after the main job and a quick test of the same config, shows
two experiments, never one average of both.

The main job is the session's OPO seed-0 run (the README's config on a tiny schedule,
``conftest.py``); the quick test is run here as the README's command with ``--quick_test``.
"""

from __future__ import annotations

import csv
import re
import shutil
import sys

import pytest

from speedrunner.cli import main

from ..e2e.harness import REPO, run
from ..e2e.test_main_job import readme_main_job

pytestmark = pytest.mark.slow  # a quick-test run of the train entry point, and the session's runs


def readme_report_command() -> list[str]:
    section = (REPO / "README.md").read_text().split("## The main job", 1)[1]
    line = re.search(r"^(speedrunner report [^#\n]+)", section, re.M).group(1)
    return line.split()


def test_the_readme_report_after_the_main_job_and_a_quick_test_shows_two_rows(
    fixture_runs, tmp_path, monkeypatch, capsys
):
    main_job = readme_main_job()
    config = main_job[main_job.index("--config_file") + 1]
    quick = run(
        [sys.executable, *main_job[1:3], "--config_file", str(REPO / config), "--quick_test"],
        cwd=tmp_path,
    )
    assert quick.returncode == 0, quick.stderr[-3000:]
    shutil.copytree(
        fixture_runs.opo[0], tmp_path / "runs" / "babyai" / "main-job" / "seed0" / "r0001"
    )

    command = readme_report_command()
    assert command[:3] == ["speedrunner", "report", "runs/babyai"], command
    monkeypatch.chdir(tmp_path)
    assert main(command[1:]) == 0
    out = tmp_path / command[command.index("--out") + 1]
    with open(out / "tables" / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2, rows
    quick_row, main_row = sorted(rows, key=lambda r: r["variant"] != "quick test")
    assert quick_row["variant"] == "quick test" and main_row["variant"].startswith(
        "rollouts 10, "
    ), rows
    assert (quick_row["rollouts_done_mean"], main_row["rollouts_done_mean"]) == ("4", "10")
    assert all(r["runs"] == "1" and r["seeds"] == "1" and r["rollouts_done_sd"] == "" for r in rows)
    assert "kept apart" in capsys.readouterr().out
