"""The report reads metrics.jsonl and eval.jsonl through the run schema: a row that lacks a
field the schema requires is a clear error naming the file, the row and the field."""

import json
import shutil

import pytest

from speedrunner.core.reporting.aggregate import run_numbers
from speedrunner.core.reporting.rundata import load_run
from speedrunner.errors import ReportInputError

from ..e2e.harness import REPO

FORMAT_1 = REPO / "tests" / "fixtures" / "run_format_1" / "react"


def _drop(path, row: int, key: str) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    del rows[row][key]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize(
    ("file", "key"), [("metrics.jsonl", "llm_calls"), ("eval.jsonl", "success_mean")]
)
def test_a_row_missing_a_required_field_is_a_clear_error(tmp_path, file, key):
    run = shutil.copytree(FORMAT_1, tmp_path / "run")
    _drop(run / file, 1, key)
    with pytest.raises(ReportInputError) as e:
        load_run(run)
    message = str(e.value)
    assert f"{file} row 2" in message and key in message and "Field required" in message


def test_the_report_reads_the_typed_rows(tmp_path):
    run = load_run(shutil.copytree(FORMAT_1, tmp_path / "run"))
    numbers = run_numbers(run)
    assert numbers.finals["rollouts_done"] == len(run.train_rows) == 4
    assert numbers.finals["final_eval_rollout"] == run.eval_rows[-1].rollout
    assert numbers.finals["llm_calls_per_episode"] == pytest.approx(
        sum(r.llm_calls for r in run.train_rows) / 4
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"status": "finished"', "cannot be read"),
        ('{"status": "finished"}', "is not a run summary"),
    ],
)
def test_a_broken_summary_is_refused_by_the_report_naming_the_file(tmp_path, capsys, text, says):
    """A damaged summary.json is not read as an empty one (which showed a finished run as running
    with no spend): ``speedrunner report`` exits 2 with the file named, and no traceback."""
    from speedrunner.cli import main

    run = shutil.copytree(FORMAT_1, tmp_path / "run")
    (run / "summary.json").write_text(text)
    assert main(["report", str(run), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"{run / 'summary.json'} {says}" in err and "--resume" in err and "Traceback" not in err


def test_a_run_that_stopped_before_its_first_summary_is_not_shown_as_running(tmp_path):
    """A new run that failed before its loop began (a benchmark that did not start) has no
    summary.json: its row says "not started", not "running"."""
    from speedrunner.core.reporting.rundata import load_run

    run = shutil.copytree(FORMAT_1, tmp_path / "run")
    (run / "summary.json").unlink()
    assert load_run(run).status == "not started"


def test_unanswered_attempts_of_unknown_price_are_said_so_not_refused(tmp_path):
    """A run whose unanswered attempts include an unpriced model stores unknown_spend_usd null:
    the summary reads back, and the headline says the unanswered spend is unknown."""
    from speedrunner.cli import main

    run = shutil.copytree(FORMAT_1, tmp_path / "run")
    summary = json.loads((run / "summary.json").read_text())
    summary["unknown_spend_usd"] = None
    (run / "summary.json").write_text(json.dumps(summary))
    assert main(["report", str(run), "--out", str(tmp_path / "out")]) == 0
    headline = (tmp_path / "out" / "tables" / "headline.csv").read_text()
    assert headline.splitlines()[1].split(",")[-1] == ""  # unknown, not 0
