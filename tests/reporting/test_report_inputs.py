"""``speedrunner report`` without runs to read, and broken run inputs (fast)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from speedrunner.cli import main
from speedrunner.core.rundir import RUN_FORMAT


@pytest.mark.parametrize("what", ["missing", "empty"])
def test_a_path_without_runs_is_a_clear_error(tmp_path, capsys, what):
    path = tmp_path / "nothing"
    if what == "empty":
        path.mkdir()
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert (
        str(path) in err
        and ("does not exist" if what == "missing" else "holds no run directory") in err
    )


@pytest.mark.parametrize(
    "text, says",
    [("{", "is not a readable run directory"), ('{"run": {"seed": 0}}', "lacks run.rollouts")],
)
def test_a_broken_config_resolved_json_is_named(tmp_path, capsys, text, says):
    (tmp_path / "config.resolved.json").write_text(text)
    (tmp_path / "provenance.json").write_text(
        json.dumps({"run_format": RUN_FORMAT, "run_id": "r0001"})
    )
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "config.resolved.json" in err and says in err


def test_the_reports_page_shows_a_committed_report_plot():
    """The docs' reports page (linked from the README) shows a real plot, committed beside it."""
    repo = Path(__file__).resolve().parents[2]
    page = (repo / "docs" / "reports.md").read_text()
    images = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", page)
    assert images and all(
        (repo / "docs" / image).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for image in images
    )
    assert "configs/babyai/opo-scripted-seq.yaml" in page and "speedrunner report" in page
    assert "](docs/reports.md)" in (repo / "README.md").read_text()


def test_a_benchmarks_own_evaluation_numbers_become_curves():
    from speedrunner.core.records import EvalRow
    from speedrunner.core.reporting.aggregate import _benchmark_metrics

    from .synthetic import eval_row

    crafter = EvalRow(
        **eval_row(
            rollout=4,
            benchmark_metrics={"crafter_score": 0.43, "achievements_mean": 1, "note": "x"},
        )
    )
    assert _benchmark_metrics(crafter) == {
        "eval_crafter_score": 0.43,
        "eval_achievements_mean": 1.0,
    }
    mixed = EvalRow(
        **eval_row(
            success_by_task={
                "rates": {"goto": 1.0},
                "episodes": {"goto": 1},
                "mean_over_tasks": 0.6,
            }
        )
    )
    assert _benchmark_metrics(mixed) == {"eval_success_mean_over_tasks": 0.6}
    assert _benchmark_metrics(EvalRow(**eval_row(benchmark_metrics=None))) == {}


def test_an_unknown_cost_stays_unknown_never_zero(tmp_path):
    from speedrunner.core.records import RunSummary
    from speedrunner.core.reporting.aggregate import group_runs
    from speedrunner.core.reporting.rundata import RunData
    from speedrunner.core.reporting.tables import summary_table

    from .synthetic import eval_row, metrics_row, summary_doc

    def run(seed: int, cost: float | None) -> RunData:
        config = {
            "run": {"seed": seed, "rollouts": 2, "sleep_every": 2},
            "benchmark": {"name": "babyai", "task_set": "seq"},
            "method": {"name": "react"},
            "model": {"name": "qwen", "provider": "vllm"},
        }
        rows = [
            metrics_row(
                batch=0,
                rollout=i + 1,
                index=i,
                llm_calls=3,
                cost_usd=cost,
                scripted=False,
                sleep_output_tokens_share=0.0,
                sleep_llm_calls_share=0.0,
                within_2_llm_calls=False,
            )
            for i in range(2)
        ]
        evals = [
            eval_row(
                rollout=2, progress_mean=0.5, success_mean=0.5, cost_mean_usd=cost, scripted=False
            )
        ]
        summary = RunSummary.model_validate(
            summary_doc(status="finished", scripted=False, model="qwen")
        )
        return RunData(tmp_path / f"s{seed}", config, summary, rows, evals, None)

    (group,) = group_runs([run(0, 0.25), run(1, None)])  # a vLLM server without a price: cost null
    assert (
        group.finals["cost_per_episode"] is None
        and group.finals["final_eval_cost_per_episode"] is None
    )
    assert group.curves["cost_per_episode"] == []
    assert group.finals["llm_calls_per_episode"].mean == 3 and not group.scripted
    table = summary_table([group])
    assert table.rows[0]["cost_per_episode_mean"] == "" and "| – |" in table.markdown()


def test_asi_sleep_records_head_the_codebook_diffs(tmp_path):
    """The record ASI writes (``sleep/asi_<b>.json``) says what each generation added."""
    import json

    from speedrunner.core.reporting.knowledge import sleep_notes

    (tmp_path / "sleep").mkdir()
    (tmp_path / "sleep" / "asi_0000.json").write_text(
        json.dumps(
            {
                "batch": 0,
                "generation": 1,
                "inductions": [
                    {
                        "episode": 2,
                        "proposed": ["go_to"],
                        "added": ["go_to"],
                        "skipped": [],
                        "rejected": None,
                    },
                    {
                        "episode": 5,
                        "proposed": ["go_to", "pick"],
                        "added": ["pick"],
                        "skipped": ["go_to: exists"],
                        "rejected": None,
                    },
                    {
                        "episode": 7,
                        "proposed": ["bad"],
                        "added": [],
                        "skipped": [],
                        "rejected": "the replay failed",
                    },
                ],
            }
        )
    )
    (tmp_path / "sleep" / "asi_0001.json").write_text("{torn")
    assert sleep_notes(tmp_path) == {
        1: "added go_to (episode 2), pick (episode 5); 3 induction(s); 1 skipped (name exists); "
        "1 rejected"
    }


def test_an_all_zero_curve_gets_a_zero_based_axis_not_a_symmetric_one():
    """A scripted run's cost is 0 throughout: the axis reads 0..1 with a note, never -0.04..0.04;
    a curve with values starts at 0 and keeps its top."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from speedrunner.core.reporting.plots import _from_zero

    ax = Figure().subplots()
    ax.plot([0, 10, 20], [0.0, 0.0, 0.0])
    _from_zero(ax)
    assert ax.get_ylim() == (0, 1) and [t.get_text() for t in ax.texts] == ["every value is 0"]
    ax = Figure().subplots()
    ax.plot([0, 10, 20], [0.1, 0.3, 0.2])
    _from_zero(ax)
    low, high = ax.get_ylim()
    assert low == 0 and high >= 0.3 and len(ax.texts) == 0
