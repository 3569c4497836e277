"""The progress display: stdout only, the run's own metric, no ETA before there is data."""

from __future__ import annotations

import pytest

from speedrunner.core.runtime.checkpoint import Totals
from speedrunner.core.runtime.progress import ProgressReporter


def test_progress_runs_show_mean_progress_not_success(capsys: pytest.CaptureFixture[str]) -> None:
    reporter = ProgressReporter(4, scripted=False, metric="progress")
    reporter.batch_started()
    reporter.training_episode(False, 0.5, 0.01, index=0)
    reporter.training_episode(False, 0.0, 0.01, index=1)
    out, err = capsys.readouterr()
    assert err == ""
    first, second = out.splitlines()
    assert "episodes done 1/4 (episode 0: progress 0.50)" in first and "| progress 50%" in first
    assert "| progress 25%" in second and "success" not in out
    assert "ETA" not in out  # no whole batch timed yet

    reporter.batch_finished(version=1)
    reporter.training_episode(True, 1.0, 0.01, index=2)
    out = capsys.readouterr().out
    assert "knowledge v1 ready" in out and "episodes done 3/4 (episode 2: success)" in out and "ETA" in out


def test_a_resumed_run_carries_its_metric_forward(capsys: pytest.CaptureFixture[str]) -> None:
    reporter = ProgressReporter(10, scripted=True, totals=Totals(episodes=2, successes=1),
                                metric="success")
    reporter.training_episode(True, 1.0, None, index=2)
    out = capsys.readouterr().out
    assert out.startswith("[SCRIPTED MODEL") and "episodes done 3/10 (episode 2: success) | success 67%" in out
    assert "cost unknown" in out


def test_the_first_episode_to_finish_is_not_called_episode_1(capsys: pytest.CaptureFixture[str]) -> None:
    """Episodes of a batch finish out of order: index 9 succeeding first while episode 0
    fails must not read as "episode 1/200 success"."""
    reporter = ProgressReporter(200, scripted=False)
    reporter.training_episode(True, 1.0, 0.0, index=9)
    reporter.training_episode(False, 0.0, 0.0, index=0)
    first, second = capsys.readouterr().out.splitlines()
    assert "episodes done 1/200 (episode 9: success)" in first
    assert "episodes done 2/200 (episode 0: failure)" in second
    assert "episode 1/200" not in first + second
