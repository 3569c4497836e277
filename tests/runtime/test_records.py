"""The rows a run writes have one typed schema (``speedrunner.core.records``): the loop writes
through it, every key it writes is declared, and a format-1 run's rows read back unchanged."""

import json

import pytest
from pydantic import ValidationError

from speedrunner.core.atomic import read_jsonl
from speedrunner.core.records import (
    EvalRow,
    MetricsRow,
    RunSummary,
    SummaryError,
    dump_row,
    read_summary,
)
from speedrunner.core.runtime import skill_metrics

from ..e2e.harness import REPO
from .fakes import PolicyModel, smart_policy
from .test_loop import make_config, make_runner

FORMAT_1 = REPO / "tests" / "fixtures" / "run_format_1"


def _round_trip(model: type[MetricsRow] | type[EvalRow], rows: list[dict]) -> None:
    """Each row validates with no undeclared key and dumps back to exactly what was written."""
    for row in rows:
        assert list(dump_row(model.model_validate(row)).items()) == list(row.items())


def test_the_rows_the_loop_writes_are_the_schema_with_no_key_left_undeclared(tmp_path):
    config = make_config(rollouts=2, sleep_every=2, eval_every=2, eval_episodes=2)
    runner, _ = make_runner(tmp_path, PolicyModel(smart_policy, cost=0.01), config)
    runner.run()
    metrics, evals = read_jsonl(tmp_path / "metrics.jsonl"), read_jsonl(tmp_path / "eval.jsonl")
    assert len(metrics) == 2 and len(evals) == 2
    _round_trip(MetricsRow, metrics)
    _round_trip(EvalRow, evals)


def test_a_key_the_loop_writes_but_the_schema_does_not_declare_stops_the_write(
    tmp_path, monkeypatch
):
    fields = skill_metrics.episode_fields
    monkeypatch.setattr(
        skill_metrics, "episode_fields", lambda t: {**fields(t), "undeclared_field": 1}
    )
    runner, _ = make_runner(
        tmp_path, PolicyModel(smart_policy), make_config(rollouts=2, eval_episodes=0)
    )
    with pytest.raises(ValidationError, match="undeclared_field"):
        runner.run()


@pytest.mark.parametrize("name", ["react", "speedrunner"])
def test_format_1_rows_read_as_the_schema_and_dump_back_unchanged(name):
    _round_trip(MetricsRow, read_jsonl(FORMAT_1 / name / "metrics.jsonl"))
    _round_trip(EvalRow, read_jsonl(FORMAT_1 / name / "eval.jsonl"))


def test_numbers_keep_the_type_they_were_written_with():
    """An int progress or cost stays an int: the same run gives byte-identical files."""
    row = {**read_jsonl(FORMAT_1 / "react" / "metrics.jsonl")[0], "progress": 1, "cost_usd": 0}
    assert dump_row(MetricsRow.model_validate(row)) == row
    assert type(dump_row(MetricsRow.model_validate(row))["progress"]) is int


# ---------------------------------------------------------------- summary.json


def _summary_bytes(summary: RunSummary) -> str:
    """What ``write_summary`` puts in the file, for a byte comparison."""
    return json.dumps(dump_row(summary), indent=2) + "\n"


@pytest.mark.parametrize("name", ["react", "speedrunner"])
def test_every_key_of_a_stored_summary_is_declared_and_it_reads_back_byte_for_byte(name):
    """A format-1 summary.json (a finished run, a stopped one) is a RunSummary with no key left
    undeclared (extra is forbidden), and written back it is the very same bytes."""
    summary = read_summary(FORMAT_1 / name)
    assert _summary_bytes(summary) == (FORMAT_1 / name / "summary.json").read_text("utf-8")


def test_the_summary_the_loop_writes_is_the_model_and_every_reader_reads_it(tmp_path):
    config = make_config(rollouts=2, sleep_every=2, eval_every=2, eval_episodes=2)
    runner, _ = make_runner(tmp_path, PolicyModel(smart_policy, cost=0.01), config)
    result = runner.run()
    stored = read_summary(tmp_path)
    assert (
        stored == result.summary
        and _summary_bytes(stored) == (tmp_path / "summary.json").read_text()
    )
    assert stored.status == "finished" and stored.training.episodes == 2
    assert (
        stored.final_eval is not None and stored.final_eval.rollout == stored.eval[-1].rollout == 2
    )
    assert "per_episode" not in json.loads((tmp_path / "summary.json").read_text())["final_eval"]


def test_an_undeclared_summary_key_is_refused():
    doc = json.loads((FORMAT_1 / "react" / "summary.json").read_text())
    with pytest.raises(ValidationError, match="undeclared"):
        RunSummary.model_validate({**doc, "undeclared": 1})


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (None, "is missing"),
        ("{half written", "cannot be read"),
        ('{"status": "finished"}', "run_id: Field required"),
    ],
)
def test_a_missing_or_malformed_summary_is_an_error_naming_the_file(tmp_path, text, says):
    if text is not None:
        (tmp_path / "summary.json").write_text(text)
    with pytest.raises(SummaryError) as e:
        read_summary(tmp_path)
    assert str(tmp_path / "summary.json") in str(e.value) and says in str(e.value)
    assert "--resume" in str(e.value)


def test_every_summary_field_is_documented_in_the_run_directory_page():
    page = (REPO / "docs" / "run-directory.md").read_text("utf-8")
    for name, field in RunSummary.model_fields.items():
        assert f"`{name}`" in page, f"docs/run-directory.md does not name summary.json's {name}"
        assert field.description, name
