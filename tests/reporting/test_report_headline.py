"""The report's headline, its grouping by experiment, and its numbers for people (fast:
run directories written directly with known numbers, no training)."""

from __future__ import annotations

import csv
from html import unescape
from pathlib import Path

import pytest

from speedrunner.cli import main

from .synthetic import Spec, write_run

SHORT = ["run.rollouts=20"]
SUCCESS = {
    "react": [0.1, 0.2, 0.3],
    "opo": [0.6, 0.7, 0.8],
    "speedrunner": [0.2, 0.5, 0.8],
    "speedrunner_no_cl": [0.0, 1.0, 1.0, 1.0],
    "asi": [0.4],
}
"""Final evaluation success per seed of each method (babyai/seq, gpt-5.4-mini)."""
SPENT = {"react": [0.5, 0.6, 0.7], "opo": [1.0, 1.0, None], "speedrunner": [0.25, 0.25, 0.5]}


def table(out: Path, name: str) -> list[dict]:
    with open(out / "tables" / f"{name}.csv", newline="") as f:
        return list(csv.DictReader(f))


def md_headline(out: Path) -> list[list[str]]:
    """The headline's Markdown rows, cell by cell."""
    md = (out / "report.md").read_text().split("## Headline", 1)[1].split("## Plots", 1)[0]
    return [
        [c.strip() for c in line.strip("|").split(" | ")]
        for line in md.splitlines()
        if line.startswith("| ") and not line.startswith("| experiment")
    ]


def headline_cells(out: Path) -> dict[str, dict[str, str]]:
    """The headline's HTML cells by the experiment's method (first words of the first cell)."""
    from html.parser import HTMLParser

    class Cells(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.inside, self.rows, self.head, self.cell = False, [], [], None

        def handle_starttag(self, tag, attrs):
            if tag == "table" and ("id", "table-headline") in attrs:
                self.inside = True
            elif self.inside and tag == "tr":
                self.rows.append([])
            elif self.inside and tag in ("td", "th"):
                self.cell = ""

        def handle_endtag(self, tag):
            if tag == "table":
                self.inside = False
            elif self.inside and tag in ("td", "th"):
                self.rows[-1].append(self.cell)
                self.cell = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell += data

    parser = Cells()
    parser.feed((out / "report.html").read_text())
    head, *rows = parser.rows
    return {
        row[0].split(" · ")[1] + (" fake" if "fake" in row[0] else ""): dict(
            zip(head, row, strict=True)
        )
        for row in rows
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("headline-runs")
    for method, values in SUCCESS.items():
        config = "react-gpt-seq.yaml" if method == "react" else f"{method}-gpt-seq.yaml"
        for seed, success in enumerate(values):
            spent = SPENT[method][seed] if method in SPENT else None
            write_run(
                root / f"{method}-s{seed}",
                Spec(
                    config,
                    seed,
                    SHORT,
                    success=success,
                    spent=spent,
                    llm_calls=30 if method == "react" else 12,
                    sleep_calls_share=0.0 if method == "react" else 0.5,
                    cost=0.01 if method != "asi" else None,
                ),
            )
    write_run(
        root / "opo-fake",
        Spec(
            "opo-gpt-seq.yaml",
            0,
            [
                *SHORT,
                "model.provider=vllm",
                "model.name=fake-realistic",
                "model.base_url=http://127.0.0.1:9/v1",
            ],
            success=0.5,
            spent=0.0,
        ),
    )
    return root


@pytest.fixture(scope="module")
def report(runs, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("headline-report")
    assert main(["report", str(runs), "--out", str(out)]) == 0
    return out


def test_the_headline_shows_each_experiment_with_bootstrap_intervals_over_seeds(report):
    cells = headline_cells(report)
    assert set(cells) == {"react", "opo", "speedrunner", "speedrunner_no_cl", "asi", "opo fake"}
    react, opo, sr, no_cl, asi = (
        cells[m] for m in ("react", "opo", "speedrunner", "speedrunner_no_cl", "asi")
    )
    # With 3 seeds one resample in 27 repeats the lowest seed: the 95% interval spans the seeds.
    assert (react["seeds"], react["final evaluation"], react["95% interval"]) == (
        "3",
        "20.0% success",
        "[10.0%, 30.0%]",
    )
    assert (opo["final evaluation"], opo["95% interval"]) == ("70.0% success", "[60.0%, 80.0%]")
    # 4 seeds 0,1,1,1: the all-zero resample (1/256) is under 2.5%, one zero or fewer (5.1%) is not.
    assert (no_cl["seeds"], no_cl["final evaluation"], no_cl["95% interval"]) == (
        "4",
        "75.0% success",
        "[25.0%, 100%]",
    )
    assert (asi["seeds"], asi["95% interval"]) == (
        "1",
        "– (1 seed)",
    )  # one seed: no interval, never 0
    assert react["vs react"] == "baseline" and react["P(better than react)"] == "baseline"
    diff, interval = opo["vs react"].split(" pp ")
    low, high = (float(x.replace("−", "-")) for x in interval.strip("[]").split(", "))
    assert (
        diff == "+50.0" and 30 <= low < 50 < high <= 70
    )  # between the extreme resamples 0.6-0.3 and 0.8-0.1
    assert (
        opo["P(better than react)"] == "1.00 [1.00, 1.00]"
    )  # every opo seed beats every react seed
    # speedrunner 0.2, 0.5, 0.8 vs react 0.1, 0.2, 0.3: 7 wins and 1 tie of 9 pairs = 0.833
    assert sr["P(better than react)"].startswith("0.833 [")
    assert (
        asi["vs react"].startswith("+20.0 pp – (1 seed)")
        and asi["P(better than react)"] == "– (< 3 seeds)"
    )
    assert cells["opo fake"]["vs react"] == "– (no react run)"  # no react run on the fake model
    (fake,) = [
        line
        for line in (report / "report.md").read_text().splitlines()
        if "· fake-realistic" in line
    ]
    assert fake.startswith("| babyai/seq · opo · fake-realistic (fake LLM server) |")
    assert (
        react["actor LLM calls / episode (with sleep)"] == "30.0 (30.0)"
        and opo["actor LLM calls / episode (with sleep)"] == "12.0 (12.5)"
    )
    assert react["$ / episode"] == "$0.0100" and asi["$ / episode"] == "unknown"
    assert react["total $"] == "$1.80" and sr["total $"] == "$1.00"
    assert (
        opo["total $"] == "– (unknown in some runs)"
        and no_cl["total $"] == "– (unknown in every run)"
    )


def test_the_headline_csv_has_the_numbers_and_the_report_is_reproducible(runs, report, tmp_path):
    rows = {
        r["method"] + ("-fake" if r["model_kind"] == "fake" else ""): r
        for r in table(report, "headline")
    }
    react = rows["react"]
    assert (
        react["metric"],
        float(react["final"]),
        float(react["final_ci_low"]),
        float(react["final_ci_high"]),
    ) == ("success", pytest.approx(0.2), pytest.approx(0.1), pytest.approx(0.3))
    assert float(rows["speedrunner"]["improvement_probability"]) == pytest.approx(7.5 / 9)
    assert (
        float(react["total_cost_usd"]) == pytest.approx(1.8) and rows["asi"]["final_ci_low"] == ""
    )
    assert rows["opo-fake"]["model_kind"] == "fake" and rows["react"]["model_kind"] == "llm"
    again = tmp_path / "again"
    assert main(["report", str(runs), "--out", str(again)]) == 0
    assert (again / "report.md").read_bytes() == (
        report / "report.md"
    ).read_bytes()  # seeded bootstrap
    assert (again / "tables" / "headline.csv").read_bytes() == (
        report / "tables" / "headline.csv"
    ).read_bytes()


def test_the_headline_is_at_the_top_of_the_html_and_the_markdown(report):
    html = (report / "report.html").read_text()
    assert html.index('id="table-headline"') < html.index('id="plots"') < html.index('id="tables"')
    md = (report / "report.md").read_text()
    assert md.index("## Headline") < md.index("## Plots") < md.index("## Tables (all columns)")
    assert (
        "| babyai/seq · react · gpt-5.4-mini | 3 | 20.0% success | [10.0%, 30.0%] | baseline |"
        in md
    )
    assert "95% percentile bootstrap over seeds" in md and "Agarwal et al. 2021" in md


def test_runs_csv_has_each_runs_total_dollars(report):
    runs = {(r["method"], r["seed"], r["model"]): r for r in table(report, "runs")}
    assert float(runs[("react", "2", "gpt-5.4-mini")]["total_cost_usd"]) == pytest.approx(0.7)
    assert runs[("opo", "2", "gpt-5.4-mini")]["total_cost_usd"] == ""  # spent_usd null: unknown
    assert runs[("speedrunner_no_cl", "0", "gpt-5.4-mini")]["total_cost_usd"] == ""  # unknown


def test_spend_that_may_have_been_billed_unseen_is_shown_beside_the_total_never_in_it(tmp_path):
    root = tmp_path / "runs"
    for seed, unknown in ((0, 0.0), (1, 0.02)):
        write_run(
            root / f"s{seed}",
            Spec("react-gpt-seq.yaml", seed, SHORT, spent=0.5, unknown_spend=unknown),
        )
    out = tmp_path / "report"
    assert main(["report", str(root), "--out", str(out)]) == 0
    assert (
        headline_cells(out)["react"]["total $"]
        == "$1.00 (+ up to $0.0200 unanswered, may have been billed)"
    )
    runs = {r["seed"]: r for r in table(out, "runs")}
    assert float(runs["1"]["unknown_spend_usd"]) == pytest.approx(0.02)
    assert float(runs["1"]["total_cost_usd"]) == pytest.approx(0.5)
    (headline_row,) = table(out, "headline")
    assert float(headline_row["unknown_spend_usd"]) == pytest.approx(0.02)


def test_a_baseline_can_be_chosen_and_an_absent_one_is_a_clear_error(runs, tmp_path, capsys):
    out = tmp_path / "by-opo"
    assert main(["report", str(runs), "--out", str(out), "--baseline", "opo"]) == 0
    cells = headline_cells(out)
    assert cells["opo"]["vs opo"] == "baseline" and cells["react"]["vs opo"].startswith(
        "−50.0 pp ["
    )
    assert cells["react"]["P(better than opo)"] == "0 [0, 0]"
    assert (
        " · opo · " in md_headline(out)[0][0]
    )  # the baseline leads, the methods compared with it below
    capsys.readouterr()
    assert main(["report", str(runs), "--out", str(tmp_path / "x"), "--baseline", "voyager"]) == 2
    err = capsys.readouterr().err
    assert "--baseline voyager" in err and "opo" in err and "Traceback" not in err


def test_runs_that_differ_in_more_than_the_seed_are_separate_rows_labelled_by_the_difference(
    tmp_path, capsys
):
    root = tmp_path / "runs"
    for seed in (0, 1):
        write_run(
            root / f"r20-s{seed}", Spec("opo-gpt-seq.yaml", seed, ["run.rollouts=20"], success=0.2)
        )
        write_run(
            root / f"r40-s{seed}", Spec("opo-gpt-seq.yaml", seed, ["run.rollouts=40"], success=0.9)
        )
    write_run(root / "quick", Spec("opo-gpt-seq.yaml", 0, quick_test=True, success=0.0))
    write_run(root / "react", Spec("react-gpt-seq.yaml", 0, ["run.rollouts=40"], success=0.5))
    # An operational difference (parallelism, the server's URL) does not make another experiment.
    write_run(
        root / "r20-s2",
        Spec(
            "opo-gpt-seq.yaml",
            2,
            [
                "run.rollouts=20",
                "run.parallel_episodes=1",
                "benchmark.server_url=http://127.0.0.1:9",
            ],
            success=0.5,
        ),
    )
    out = tmp_path / "report"
    assert main(["report", str(root), "--out", str(out)]) == 0
    summary = {r["variant"]: r for r in table(out, "summary") if r["method"] == "opo"}
    assert set(summary) == {"rollouts 20", "rollouts 40", "quick test"}, summary
    assert [summary[v]["runs"] for v in ("rollouts 20", "rollouts 40", "quick test")] == [
        "3",
        "2",
        "1",
    ]
    assert float(summary["rollouts 40"]["final_eval_success_mean"]) == pytest.approx(
        0.9
    )  # never averaged
    console = capsys.readouterr().out
    note = "babyai/seq opo (gpt-5.4-mini): 3 experiments kept apart, not averaged"
    for text in (
        console,
        (out / "report.md").read_text(),
        unescape((out / "report.html").read_text()),
    ):
        assert note in text and "run.rollouts" in text and '"quick test" (1 run)' in text
    runs = table(out, "runs")
    assert len({r["experiment"] for r in runs if r["method"] == "opo"}) == 3
    assert {r["variant"] for r in runs if r["run_id"].startswith("r20")} == {"rollouts 20"}
    assert "babyai/seq opo (gpt-5.4-mini) — quick test" in (out / "report.html").read_text()
    # Only the experiment with react's settings is compared with it (never a quick test with a
    # full run).
    cells = {row[0]: row for row in md_headline(out)}
    assert cells["babyai/seq · opo · gpt-5.4-mini — rollouts 40"][4] == "+40.0 pp – (1 seed)"
    assert (
        cells["babyai/seq · opo · gpt-5.4-mini — quick test"][4]
        == "– (no react run with the same settings)"
    )


def test_plots_whose_every_value_is_zero_collapse_to_one_line(runs, tmp_path):
    root = tmp_path / "runs"
    for seed in (0, 1):
        write_run(root / f"s{seed}", Spec("react-gpt-seq.yaml", seed, SHORT, cost=0.0, spent=0.0))
    out = tmp_path / "report"
    assert main(["report", str(root), "--out", str(out)]) == 0
    html, md = (out / "report.html").read_text(), (out / "report.md").read_text()
    line = "Cost per episode vs rollouts (actor + amortised sleep): all 0 in every run"
    assert line in html and line in md
    assert 'id="plot-cost_per_episode"' in html and "plots/cost_per_episode.png)" not in md
    assert "Knowledge size per generation: no value in any run" in html  # react keeps no knowledge
    assert '<figure id="plot-llm_calls_per_episode"' in html  # 30 calls: a real figure
    assert "![Actor LLM calls per episode vs rollouts](plots/llm_calls_per_episode.png)" in md


@pytest.mark.parametrize(
    "value, text",
    [
        (0.0666667, "0.0667"),
        (30, "30.0"),
        (0.5, "0.500"),
        (1234.5, "1,234"),
        (-0.2, "−0.200"),
        (None, "–"),
        (0, "0"),
    ],
)
def test_numbers_are_shown_to_three_significant_digits(value, text):
    from speedrunner.core.reporting.humanize import dollars, percent, points, sig3

    assert sig3(value) == text
    assert (percent(0.0666667), percent(1.0), dollars(0.0123456), dollars(None), points(0.133)) == (
        "6.67%",
        "100%",
        "$0.0123",
        "–",
        "+13.3 pp",
    )


@pytest.mark.parametrize(
    "config",
    [
        "babyai/opo-scripted-seq.yaml",
        "babyai/speedrunner-gpt-seq.yaml",
        "crafter/voyager-gpt-crafter.yaml",
        "scienceworld/react-gpt-t3.yaml",
    ],
)
def test_the_settings_compared_are_those_of_the_runs_own_results_fingerprint(config):
    """Rebuilt from config.resolved.json, the report's view hashes to the run's own
    results_config_sha256 (the seed in): the report separates runs by what the run itself
    says decides its results."""
    import hashlib
    import json

    from speedrunner.catalog import config_loader
    from speedrunner.core.reporting.experiments import results_view_of
    from speedrunner.core.runtime.loop import config_fingerprint

    from ..e2e.harness import REPO

    loaded = config_loader().load(REPO / "configs" / config, overrides=["run.seed=4"])
    view = results_view_of(json.loads(json.dumps(loaded.resolved_json())))
    assert hashlib.sha256(
        json.dumps(view, sort_keys=True).encode()
    ).hexdigest() == config_fingerprint(loaded.config)


def test_the_command_ignores_operational_settings_of_the_benchmark(tmp_path):
    """In a fresh ``speedrunner report`` process (nothing imported beforehand), the BabyAI
    server's URL is operational: runs that differ in it are one experiment, while runs that
    differ in their schedule are two."""
    import subprocess
    import sys

    root = tmp_path / "runs"
    write_run(root / "a", Spec("opo-gpt-seq.yaml", 0, SHORT))
    write_run(
        root / "b", Spec("opo-gpt-seq.yaml", 1, [*SHORT, "benchmark.server_url=http://127.0.0.1:9"])
    )
    write_run(root / "c", Spec("opo-gpt-seq.yaml", 0, ["run.rollouts=30"]))
    out = tmp_path / "report"
    proc = subprocess.run(
        [sys.executable, "-m", "speedrunner.cli", "report", str(root), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    rows = {r["variant"]: r["runs"] for r in table(out, "summary")}
    assert rows == {"rollouts 20": "2", "rollouts 30": "1"}, rows
