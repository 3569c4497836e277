"""``speedrunner report`` on runs made by the scripted model: files, numbers, marks, errors.

Every expected number is computed here from the fixture runs' own files (metrics.jsonl,
eval.jsonl, episodes, guides, codebooks) or known from the recorded demo, never copied
from the report.
"""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import pytest

from speedrunner.cli import main

pytestmark = pytest.mark.slow  # the fixture runs train entry points in subprocesses

PLOTS = (
    "eval_progress",
    "cost_per_episode",
    "output_tokens_per_episode",
    "llm_calls_per_episode",
    "llm_calls_amortised_per_episode",
    "within_2_llm_calls_share",
    "frontier",
    "knowledge_size",
    "skills",
    "skill_api_tokens",
)


@pytest.fixture(scope="module")
def report(fixture_runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    assert main(["report", str(fixture_runs.root), "--out", str(out)]) == 0
    return out


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def table(report: Path, name: str) -> list[dict]:
    with open(report / "tables" / f"{name}.csv", newline="") as f:
        return list(csv.DictReader(f))


def row_of(rows: list[dict], method: str, **where) -> dict:
    (row,) = [r for r in rows if r["method"] == method and all(r[k] == v for k, v in where.items())]
    return row


def close(cell: str, expected: float | None) -> bool:
    if expected is None:
        return cell == ""
    return float(cell) == pytest.approx(expected, rel=1e-5, abs=1e-9)


def mean_sd(values: list[float]) -> tuple[float, float | None]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def test_every_plot_is_written_as_png_and_svg_and_says_scripted(report):
    for name in PLOTS:
        png, svg = report / "plots" / f"{name}.png", report / "plots" / f"{name}.svg"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        text = svg.read_text()
        assert "SCRIPTED MODEL" in text, f"{name}.svg does not say the numbers are scripted"
        # opo seed 2 is not finished
        assert "partial: runs in progress" in text or name in ("skills", "skill_api_tokens"), name
    assert "1 in progress" in (report / "plots" / "eval_progress.svg").read_text()  # the opo legend


def test_summary_equals_numbers_computed_from_the_run_files(report, fixture_runs):
    summary = table(report, "summary")
    opo = row_of(summary, "opo")
    assert (opo["seeds"], opo["in_progress"], opo["scripted"]) == ("3", "1", "true")
    per_seed = {seed: jsonl(path / "metrics.jsonl") for seed, path in fixture_runs.opo.items()}
    evals = {seed: jsonl(path / "eval.jsonl") for seed, path in fixture_runs.opo.items()}
    llm = [statistics.fmean(r["llm_calls"] for r in rows) for rows in per_seed.values()]
    tokens = [
        statistics.fmean(r["tokens"]["output"] + r["sleep_output_tokens_share"] for r in rows)
        for rows in per_seed.values()
    ]
    final = [e[-1]["progress_mean"] for e in evals.values()]
    rollouts = [len(rows) for rows in per_seed.values()]
    for column, values in (
        ("llm_calls_per_episode", llm),
        ("output_tokens_per_episode", tokens),
        ("final_eval_progress", final),
        ("rollouts_done", rollouts),
    ):
        mean, sd = mean_sd(values)
        assert close(opo[f"{column}_mean"], mean) and close(opo[f"{column}_sd"], sd), column
    assert opo["speedrun_target"] == "success >= 0.9" and opo["speedrun_reached"] == "0/3"

    demo = row_of(summary, "speedrunner")
    assert (demo["seeds"], demo["in_progress"], demo["llm_calls_per_episode_sd"]) == ("1", "0", "")
    demo_rows = jsonl(fixture_runs.speedrunner / "metrics.jsonl")
    assert close(
        demo["llm_calls_per_episode_mean"], statistics.fmean(r["llm_calls"] for r in demo_rows)
    )
    calls = [
        sum(1 for s in json.loads(p.read_text())["steps"] if s["skill_call"])
        for p in sorted((fixture_runs.speedrunner / "episodes" / "train").glob("*.json"))
    ]
    assert len(calls) == 50 and close(demo["skill_calls_per_episode_mean"], statistics.fmean(calls))

    react = row_of(summary, "react")  # no evaluation at all: those cells are empty, not 0
    assert react["final_eval_progress_mean"] == "" and react["final_eval_rollout_mean"] == ""
    assert close(react["llm_calls_per_episode_mean"], 30) and react["rollouts_done_mean"] == "2"
    assert opo["skill_calls_per_episode_mean"] == ""  # OPO has no skills


def test_curves_are_per_batch_and_partial_where_a_run_is_in_progress(report, fixture_runs):
    curves = table(report, "curves")

    def point(method, curve, rollout):
        return row_of(curves, method, curve=curve, rollout=str(rollout))

    # SpeedRunner demo: in batch 0 the recorded actor turns left for 30 calls; in batch 1 it
    # makes one skill call per episode, which finishes the episode.
    assert close(point("speedrunner", "llm_calls_per_episode", 10)["value_mean"], 30)
    assert close(point("speedrunner", "llm_calls_per_episode", 20)["value_mean"], 1)
    assert close(point("speedrunner", "skill_calls_per_episode", 10)["value_mean"], 0)
    assert close(point("speedrunner", "skill_calls_per_episode", 20)["value_mean"], 1)
    # 30 calls each
    assert close(point("speedrunner", "within_2_llm_calls_share", 10)["value_mean"], 0)
    batch1 = [
        t
        for p in sorted((fixture_runs.speedrunner / "episodes" / "train").glob("*.json"))
        if (t := json.loads(p.read_text()))["index"] in range(10, 20)
    ]
    finished = [t["llm_calls"] <= 2 and t["stop_reason"] in ("success", "env_done") for t in batch1]
    assert close(
        point("speedrunner", "within_2_llm_calls_share", 20)["value_mean"],
        statistics.fmean(finished),
    )
    skill_steps = [s for t in batch1 for s in t["steps"] if s["skill_call"]]
    assert close(
        point("speedrunner", "actions_per_skill_call", 20)["value_mean"],
        sum(len(s["executed"]) for s in skill_steps) / len(skill_steps),
    )
    sleep_calls = [
        r["sleep_llm_calls_share"]
        for r in jsonl(fixture_runs.speedrunner / "metrics.jsonl")
        if r["batch"] == 1
    ]
    assert close(
        point("speedrunner", "llm_calls_amortised_per_episode", 20)["value_mean"],
        1 + statistics.fmean(sleep_calls),
    )

    batch0 = [
        statistics.fmean(r["llm_calls"] for r in jsonl(p / "metrics.jsonl") if r["batch"] == 0)
        for p in fixture_runs.opo.values()
    ]
    first = point("opo", "llm_calls_per_episode", 2)
    assert first["n"] == "3" and close(first["value_mean"], mean_sd(batch0)[0])
    assert close(first["value_sd"], mean_sd(batch0)[1])

    # The run left in progress has no evaluation at rollout 10: that point averages 2 seeds.
    killed = jsonl(fixture_runs.opo[fixture_runs.in_progress_seed] / "eval.jsonl")
    assert 10 not in [e["rollout"] for e in killed]
    last = point("opo", "eval_progress", 10)
    done = [
        next(
            e["progress_mean"]
            for e in jsonl(fixture_runs.opo[s] / "eval.jsonl")
            if e["rollout"] == 10
        )
        for s in (0, 1)
    ]
    assert last["n"] == "2" and close(last["value_mean"], statistics.fmean(done))
    assert point("opo", "eval_progress", 0)["n"] == "3"


def test_knowledge_per_generation_matches_the_guides_and_the_recorded_codebook(
    report, fixture_runs
):
    knowledge = table(report, "knowledge")
    # Recorded codebook: gen 1 = go_to + pick_up_then_go_to (which calls go_to twice);
    # gen 2 makes go_to the private _go_to. |E|/(|V|(|V|-1)) = 1/2, chain of 2 functions.
    expected = {0: ("0", "0", 0.0, "0"), 1: ("2", "0", 0.5, "2"), 2: ("1", "1", 0.5, "2")}
    for gen, (public, private, dens, depth) in expected.items():
        row = row_of(knowledge, "speedrunner", generation=str(gen))
        lines = len(
            (fixture_runs.speedrunner / "codebook" / f"gen_{gen}.py").read_text().splitlines()
        )
        assert (
            row["public_functions_mean"],
            row["private_functions_mean"],
            row["max_call_depth_mean"],
        ) == (public, private, depth), gen
        assert close(row["call_graph_density_mean"], dens) and close(row["lines_mean"], lines), gen
        assert close(row["skill_api_tokens_mean"], api_tokens(fixture_runs.speedrunner, gen)), gen
    # The recorded actor calls pick_up_then_go_to, which calls go_to: two levels in generation
    # 1's episodes.
    assert row_of(knowledge, "speedrunner", generation="1")["dynamic_max_call_depth_mean"] == "2"
    guides = {
        seed: sorted(int(f.stem[4:]) for f in (p / "guide").glob("gen_*.md"))
        for seed, p in fixture_runs.opo.items()
    }
    # paused mid-way: fewer generations
    assert len(guides[fixture_runs.in_progress_seed]) < len(guides[0])
    for gen in guides[0]:
        chars = [
            len(f.read_text())
            for p in fixture_runs.opo.values()
            if (f := p / "guide" / f"gen_{gen}.md").exists()
        ]
        row = row_of(knowledge, "opo", generation=str(gen))
        assert row["n"] == str(len(chars)) and close(
            row["guide_chars_mean"], statistics.fmean(chars)
        ), gen
    assert row["n"] == "2"  # the last generation: the run in progress has not reached it


def api_tokens(run: Path, gen: int) -> int:
    """The skills section of the actor's first message for generation ``gen``, re-rendered here."""
    from speedrunner.core.codebook import Codebook
    from speedrunner.core.runtime.actor import PROMPTS
    from speedrunner.core.runtime.skill_metrics import estimate_tokens
    from speedrunner.methods.wake_sleep.codebook_knowledge import TITLE

    api = Codebook.load(run, gen).render_api()
    return estimate_tokens(PROMPTS.render("knowledge", title=TITLE, text=api)) if api else 0


def test_runs_table_marks_the_resumed_and_the_unfinished_run(report, fixture_runs):
    runs = table(report, "runs")
    resumed = row_of(runs, "opo", seed=str(fixture_runs.resumed_seed))
    assert (resumed["status"], resumed["resumes"], resumed["rollouts"]) == (
        "finished",
        "1",
        "10/10",
    )
    left = row_of(runs, "opo", seed=str(fixture_runs.in_progress_seed))
    done = len(jsonl(fixture_runs.opo[fixture_runs.in_progress_seed] / "metrics.jsonl"))
    assert left["status"] == "running" and left["rollouts"] == f"{done}/10" and done < 10
    assert all(r["scripted"] == "true" for r in runs) and len(runs) == 5


def test_markdown_shows_the_csv_numbers_and_both_warnings(report):
    md = (report / "report.md").read_text()
    assert "SCRIPTED MODEL" in md and "**Not finished:**" in md
    for row in table(report, "summary"):
        for key, mean in row.items():
            if key.endswith("_mean") and mean:
                sd = row[key[:-5] + "_sd"]
                assert (f"{mean} ± {sd}" if sd else f"| {mean} |") in md, key


def test_html_is_one_file_that_needs_no_network(report):
    html = (report / "report.html").read_text()
    assert 'id="scripted-banner"' in html and 'id="progress-banner"' in html
    # The scripted model costs nothing: that figure is one line, every other one an inlined image.
    assert html.count('src="data:image/png;base64,') == len(PLOTS) - 1
    assert "Cost per episode vs rollouts (actor + amortised sleep): all 0 in every run" in html
    for fetch in (
        'src="http',
        "src='http",
        'href="http',
        '<link rel="stylesheet"',
        "<script src",
        "@import",
        "url(",
    ):
        assert fetch not in html, fetch
    assert (
        "gen_1 → gen_2 (+3 −3 lines): make_private go_to — go_to is now the private helper _go_to"
        in html
    )
    assert "+def _go_to(env, name: str)" in html.replace("&gt;", ">")  # the rename, as a diff line
    # run text never becomes markup
    assert '<b id="injected">' not in html and html.count("</script>") == 2


def test_one_run_directory_gets_its_report_inside_it(fixture_runs, capsys):
    run = fixture_runs.speedrunner
    assert main(["report", str(run)]) == 0
    assert (run / "report" / "report.html").is_file()
    assert "SCRIPTED" in capsys.readouterr().out


def test_a_run_over_its_share_of_the_html_embeds_an_evenly_spaced_sample(
    fixture_runs, tmp_path, monkeypatch
):
    from speedrunner.core.reporting import html

    monkeypatch.setattr(html, "MAX_EMBEDDED_BYTES", 150_000)
    assert main(["report", str(fixture_runs.speedrunner), "--out", str(tmp_path)]) == 0
    page = (tmp_path / "report.html").read_text()
    data = json.loads(
        page.split('<script type="application/json" id="report-data">', 1)[1].split("</script>", 1)[
            0
        ]
    )
    (run,) = data["runs"]
    stored = 50 + len(list((fixture_runs.speedrunner / "episodes" / "eval").rglob("*.json")))
    labels = [(e["split"], e["index"]) for e in run["episodes"]]
    assert 1 < len(labels) < stored and run["omitted"] == stored - len(labels)
    assert labels[0] == ("train", 0) and labels[-1][0] == "eval"  # spread over the whole run
    assert len(json.dumps(run["episodes"])) <= 150_000


def test_a_rerun_of_a_seed_counts_as_a_run_not_as_another_seed(fixture_runs, tmp_path):
    import shutil

    copy = tmp_path / "runs" / "opo-seed0-again"
    shutil.copytree(fixture_runs.opo[0], copy)
    out = tmp_path / "report"
    assert main(["report", str(fixture_runs.opo[0]), str(copy), "--out", str(out)]) == 0
    (row,) = table(out, "summary")
    assert (row["seeds"], row["runs"]) == ("1", "2")
    assert "n=2 runs of 1 seed" in (out / "plots" / "eval_progress.svg").read_text()
    assert (
        main(
            ["report", str(fixture_runs.opo[0]), str(fixture_runs.opo[0]) + "/", "--out", str(out)]
        )
        == 0
    )
    assert table(out, "summary")[0]["runs"] == "1"  # the same directory twice is one run


def test_runs_that_differ_only_in_provider_are_two_experiments(fixture_runs, tmp_path):
    """A model name served by vLLM and the same name on its own API never average as one:
    two runs alike but for ``model.provider`` (same method, task set and model name) are two
    experiments of one run each."""
    import shutil

    copies = []
    for provider in ("openai", "vllm"):
        copy = tmp_path / "runs" / f"opo-seed0-on-{provider}"
        shutil.copytree(fixture_runs.opo[0], copy)
        resolved = json.loads((copy / "config.resolved.json").read_text("utf-8"))
        resolved["model"].update(provider=provider, name="gpt-5.4-mini")
        (copy / "config.resolved.json").write_text(json.dumps(resolved), "utf-8")
        summary = json.loads((copy / "summary.json").read_text("utf-8"))
        summary.update(model="gpt-5.4-mini", scripted=False)
        (copy / "summary.json").write_text(json.dumps(summary), "utf-8")
        copies.append(copy)
    out = tmp_path / "report"
    assert main(["report", *map(str, copies), "--out", str(out)]) == 0
    rows = table(out, "summary")
    assert len(rows) == 2 and all(r["runs"] == "1" for r in rows), rows
    models = sorted(r["model"] for r in rows)
    assert models == ["gpt-5.4-mini", "gpt-5.4-mini via vllm"], rows
