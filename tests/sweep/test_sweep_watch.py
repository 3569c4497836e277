"""A sweep you can watch: a line when each run starts (with its log and run directory), a
status block every so often while runs go (episodes of planned, spend, the sweep's total),
and ``speedrunner report SWEEP.yaml`` over the sweep's runs."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from speedrunner.cli import main as cli_main
from speedrunner.sweep.spec import load_sweep

from ..reporting.synthetic import summary_doc
from .test_sweep_runs import BABYAI, env, sweep_cmd


def small_sweep(where: Path, seeds: str = "[0, 1]", rollouts: int = 20) -> Path:
    path = where / "watch.yaml"
    path.write_text(
        textwrap.dedent(f"""
        name: watch
        configs: [{BABYAI}/opo-scripted-seq.yaml]
        output_root: {where / "out"}
        set:
          model.provider: scripted
          run.rollouts: {rollouts}
          run.sleep_every: 2
          run.eval_every: {rollouts}
          run.eval_episodes: 1
          run.parallel_episodes: 1
          benchmark.max_llm_calls: 6
        grid:
          run.seed: {seeds}
    """)
    )
    return path


def _summary(*, episodes: int = 0, **fields: object) -> dict[str, object]:
    """A complete summary.json of a model's run with these fields and training episodes."""
    training = {**summary_doc()["training"], "episodes": episodes}  # type: ignore[dict-item]
    return summary_doc(
        training=training, **{"model": "gpt-5.4-mini", "scripted": False, "note": None, **fields}
    )


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_status_block_shows_each_running_runs_episodes_and_spend_from_its_files(tmp_path):
    from speedrunner.sweep.watch import HEARTBEAT, Watch

    runs = load_sweep(small_sweep(tmp_path, seeds="[0, 1, 2, 3]")).runs
    fresh, older_summary, no_spent_key, unpriced = runs
    for r in runs:
        r.run_dir.mkdir(parents=True)
    (fresh.run_dir / "summary.json").write_text(
        json.dumps(  # an earlier attempt's, until the run rewrites it
            _summary(status="interrupted", episodes=0, spent_usd=0.0)
        )
    )
    os.utime(fresh.run_dir / "summary.json", (time.time() - 60, time.time() - 60))
    clock, out = Clock(), io.StringIO()
    watch = Watch(runs, every_s=30, out=out, clock=clock)
    for r in runs[:3]:
        watch.started(r, "start", "new")
    assert (
        f"[start] {fresh.label} (new): run dir {fresh.run_dir}; log {fresh.log_file}"
        in out.getvalue()
    )

    # A summary.json from the run's start, and a newer checkpoint: the checkpoint's count wins.
    (older_summary.run_dir / "summary.json").write_text(
        json.dumps(
            _summary(
                status="running", model="fake-realistic", scripted=False, episodes=2, spent_usd=0.25
            )
        )
    )
    (older_summary.run_dir / "checkpoint.json").write_text(json.dumps({"totals": {"episodes": 6}}))
    # A run killed before its first summary.json: its checkpoint counts, its calls' log is summed
    # (a torn last line skipped).
    (no_spent_key.run_dir / "checkpoint.json").write_text(json.dumps({"totals": {"episodes": 4}}))
    calls = no_spent_key.run_dir / "llm_calls.jsonl"
    calls.write_text(
        json.dumps({"spent_usd": 0.5})
        + "\n"
        + json.dumps({"spent_usd": 0.0, "cache_hit": True})
        + "\n"
        + '{"spent_usd": 9'
    )
    (unpriced.run_dir / "summary.json").write_text(
        "{half written"
    )  # damaged: nothing yet (its resume rewrites it)
    clock.now = 30
    block = watch.status()
    assert block is not None
    lines = block.splitlines()
    assert lines[0] == (
        "status at 30 s: 3 running, 0 ended, 1 waiting; sweep: 10/80 episodes, spent $0.7500"
    )
    assert lines[1:] == [
        f"  {fresh.label}: 0/20 episodes, spent $0.0000 (starting)",
        f"  {older_summary.label}: 6/20 episodes, spent $0.2500 fake LLM",
        f"  {no_spent_key.label}: 4/20 episodes, spent $0.5000 (starting)",
    ]

    # Nothing changed: no block, until the heartbeat is due.
    clock.now = 60
    assert watch.status() is None
    clock.now = 30 + HEARTBEAT * 30
    assert watch.status() is not None

    # The log grows (the torn line completed) and a price is unknown: the sum says so, never 0.
    with calls.open("a") as f:
        f.write("0}\n" + json.dumps({"spent_usd": None}) + "\n")
    (unpriced.run_dir / "summary.json").write_text(
        json.dumps(_summary(status="running", scripted=False, spent_usd=None, episodes=1))
    )
    watch.started(unpriced, "resume", "continuing (interrupted)")
    watch.ended(fresh.run_id)
    lines = watch.status().splitlines()
    assert lines[0].endswith("3 running, 1 ended, 0 waiting; sweep: 11/80 episodes, spent unknown")
    assert f"  {no_spent_key.label}: 4/20 episodes, spent unknown (starting)" in lines
    assert f"  {unpriced.label}: 1/20 episodes, spent unknown" in lines
    assert not any(fresh.label in line for line in lines[1:])  # ended runs leave the block


def test_nothing_running_prints_no_status(tmp_path):
    from speedrunner.sweep.watch import Watch

    runs = load_sweep(small_sweep(tmp_path)).runs
    watch = Watch(runs, every_s=1, out=io.StringIO())
    assert watch.status() is None


def test_queued_runs_are_announced_when_their_log_grows_and_end_when_their_summary_says_so(
    tmp_path,
):
    """Ray and SLURM start runs elsewhere: the sweep sees a start in the run's log, and (SLURM,
    which says nothing per run) an end in a summary.json written since."""
    from speedrunner.sweep.watch import Watch

    run = load_sweep(small_sweep(tmp_path, seeds="[0]")).runs[0]
    run.log_file.parent.mkdir(parents=True)
    run.log_file.write_text("=== an earlier attempt\n")
    run.run_dir.mkdir(parents=True)
    (run.run_dir / "summary.json").write_text(
        json.dumps(_summary(status="interrupted"))
    )  # the earlier attempt's
    out = io.StringIO()
    watch = Watch([run], every_s=None, out=out, ends_from_disk=True)
    watch.queued(run, "resume")
    assert f"[queued] {run.label}: run dir {run.run_dir}; log {run.log_file}" in out.getvalue()
    watch.check_queued()
    assert "[resume]" not in out.getvalue()
    with run.log_file.open("a") as f:
        f.write("=== Ray node 0123\n")
    watch.check_queued()
    assert (
        f"[resume] {run.label} (on a worker): run dir {run.run_dir}; log {run.log_file}"
        in out.getvalue()
    )
    assert "[interrupted]" not in out.getvalue()  # an older summary.json does not end it
    (run.run_dir / "summary.json").write_text(json.dumps(_summary(status="finished")))
    watch.check_queued()
    assert f"[finished] {run.label}" in out.getvalue()
    assert watch.status() is None


def test_report_over_a_sweep_none_of_whose_runs_started_says_what_to_run(tmp_path, capsys):
    path = small_sweep(tmp_path)
    assert cli_main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert (
        "none of its 2 runs has started" in err and f"run `speedrunner sweep {path}` first" in err
    )
    assert "Traceback" not in err
    # A run config given by mistake is named as such.
    assert cli_main(["report", str(BABYAI / "opo-scripted-seq.yaml")]) == 2
    assert "is a YAML file but not a sweep file" in capsys.readouterr().err


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    """A 2-run sweep with a status block every 0.05 s; its stdout."""
    tmp = tmp_path_factory.mktemp("watched")
    path = small_sweep(tmp, rollouts=30)
    proc = subprocess.run(
        sweep_cmd(path, "--status-every", "0.05"),
        env=env(),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return tmp, path, proc.stdout


@pytest.mark.slow
def test_each_run_announces_its_start_with_its_log_and_run_directory(watched):
    _, path, stdout = watched
    lines = stdout.splitlines()
    for r in load_sweep(path).runs:
        start = lines.index(f"[start] {r.label} (new): run dir {r.run_dir}; log {r.log_file}")
        end = next(
            i
            for i, ln in enumerate(lines)
            if re.match(rf"\[\d/2\] finished +{re.escape(r.label)}  ", ln)
        )
        assert start < end
        assert "run directory: " in r.log_file.read_text()  # the announced log is the run's


@pytest.mark.slow
def test_a_running_sweep_prints_each_runs_episodes_and_spend(watched):
    _, path, stdout = watched
    runs = load_sweep(path).runs
    assert "status at " in stdout
    seen = [
        (m.group(1), int(m.group(2)))
        for m in re.finditer(
            r"^  (.+): (\d+)/30 episodes, spent \$0\.0000 scripted \(no LLM\)$", stdout, re.M
        )
    ]
    assert {label for label, _ in seen} <= {r.label for r in runs}
    assert any(0 < n < 30 for _, n in seen), stdout  # caught mid-run
    totals = re.findall(r"sweep: (\d+)/60 episodes, spent \$0\.0000$", stdout, re.M)
    assert totals and all(0 <= int(t) <= 60 for t in totals)


@pytest.mark.slow
def test_report_over_a_sweep_file_covers_its_runs(watched, capsys):
    tmp, path, stdout = watched
    runs = load_sweep(path).runs
    assert f"report over the sweep's runs:\n  speedrunner report {path}" in stdout
    assert cli_main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    report = runs[0].log_file.parent.parent / "report"
    assert out.strip().endswith(str(report / "report.html")) and "report of 2 run(s)" in out
    markdown = (report / "report.md").read_text()
    assert all(f"| {r.run_dir} |" in markdown for r in runs)  # every run of the sweep, one row each

    # The same sweep file grown by a seed: the report covers the two started runs and says so.
    grown = path.with_name("grown.yaml")
    grown.write_text(path.read_text().replace("[0, 1]", "[0, 1, 2]"))
    assert cli_main(["report", str(grown), "--out", str(tmp / "grown-report")]) == 0
    captured = capsys.readouterr()
    assert "report of 2 run(s)" in captured.out
    assert "reporting 2 of its 3 runs; 1 have not started" in captured.err
