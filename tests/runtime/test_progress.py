"""The progress display: stdout only, the run's own metric, no ETA before there is data."""

from __future__ import annotations

import pytest

from speedrunner.core.runtime.checkpoint import Totals
from speedrunner.core.runtime.progress import ProgressReporter


def test_progress_runs_show_mean_progress_not_success(capsys: pytest.CaptureFixture[str]) -> None:
    reporter = ProgressReporter(4, scripted=False, metric="progress")
    reporter.batch_started()
    reporter.training_episode(False, 0.5, 0.01)
    reporter.training_episode(False, 0.0, 0.01)
    out, err = capsys.readouterr()
    assert err == ""
    first, second = out.splitlines()
    assert "episode 1/4 progress 0.50" in first and "| progress 50%" in first
    assert "| progress 25%" in second and "success" not in out
    assert "ETA" not in out  # no whole batch timed yet

    reporter.batch_finished(version=1)
    reporter.training_episode(True, 1.0, 0.01)
    out = capsys.readouterr().out
    assert "knowledge v1 ready" in out and "episode 3/4 success" in out and "ETA" in out


def test_a_resumed_run_carries_its_metric_forward(capsys: pytest.CaptureFixture[str]) -> None:
    reporter = ProgressReporter(10, scripted=True, totals=Totals(episodes=2, successes=1),
                                metric="success")
    reporter.training_episode(True, 1.0, None)
    out = capsys.readouterr().out
    assert out.startswith("[SCRIPTED MODEL") and "episode 3/10 success | success 67%" in out
    assert "cost unknown" in out
