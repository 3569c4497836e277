"""The progress display: stdout only, the run's own metric, no ETA before there is data."""

from __future__ import annotations

import pytest

from speedrunner.core.runtime.checkpoint import Totals
from speedrunner.core.runtime.progress import ProgressReporter


def test_progress_runs_show_mean_progress_not_success(capsys: pytest.CaptureFixture[str]) -> None:
    reporter = ProgressReporter(4, scripted=False, metric="progress")
    reporter.batch_started()
    reporter.training_episode(False, 0.5, index=0)
    reporter.training_episode(False, 0.0, index=1)
    out, err = capsys.readouterr()
    assert err == ""
    first, second = out.splitlines()
    assert "episodes done 1/4 (episode 0: progress 0.50)" in first and "| progress 50%" in first
    assert "| progress 25%" in second and "success" not in out
    assert "ETA" not in out  # no whole batch timed yet

    reporter.batch_finished(version=1)
    reporter.training_episode(True, 1.0, index=2)
    out = capsys.readouterr().out
    assert (
        "knowledge v1 ready" in out
        and "episodes done 3/4 (episode 2: success)" in out
        and "ETA" in out
    )


def test_a_resumed_run_carries_its_metric_forward(capsys: pytest.CaptureFixture[str]) -> None:
    reporter = ProgressReporter(
        10,
        scripted=True,
        totals=Totals(episodes=2, successes=1),
        metric="success",
        spend=lambda: "spent unknown",
    )
    reporter.training_episode(True, 1.0, index=2)
    out = capsys.readouterr().out
    assert (
        out.startswith("[scripted] ")
        and "episodes done 3/10 (episode 2: success) | success 67%" in out
    )
    assert "| spent unknown |" in out


def test_the_first_episode_to_finish_is_not_called_episode_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Episodes of a batch finish out of order: index 9 succeeding first while episode 0
    fails must not read as "episode 1/200 success"."""
    reporter = ProgressReporter(200, scripted=False)
    reporter.training_episode(True, 1.0, index=9)
    reporter.training_episode(False, 0.0, index=0)
    first, second = capsys.readouterr().out.splitlines()
    assert "episodes done 1/200 (episode 9: success)" in first
    assert "episodes done 2/200 (episode 0: failure)" in second
    assert "episode 1/200" not in first + second


def test_on_an_80_column_terminal_the_scripted_label_cuts_nothing() -> None:
    """A live bar on a terminal 80 columns wide: the phase text is whole, the label still there."""
    import io

    from rich.console import Console

    out = io.StringIO()
    console = Console(width=80, force_terminal=True, file=out, color_system=None)
    reporter = ProgressReporter(
        200,
        scripted=True,
        console=console,
        totals=Totals(episodes=150, successes=149),
        spend=lambda: "spent $12.8456",
    )
    reporter.phase("eval at rollout 4: success_mean 0.000 over 2 episodes")
    reporter.training_episode(True, 1.0, index=150)
    reporter.close()
    text = out.getvalue()
    assert "[scripted] eval at rollout 4: success_mean 0.000 over 2 episodes" in text
    last = text.rstrip().rsplit("\r", 1)[-1]
    assert "[scripted] success 99% | spent $12.8456 | knowledge v0" in last and "151/200" in last
    assert "…" not in text
