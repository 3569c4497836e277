"""Sweep files: expansion to stable run directories, clear errors, SLURM shards, the sbatch
script."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from speedrunner.cli import main as cli_main
from speedrunner.errors import ConfigError
from speedrunner.sweep.cli import sbatch_script
from speedrunner.sweep.execute import plan
from speedrunner.sweep.spec import load_sweep, parse_shard, shard

from ..reporting.synthetic import eval_row, summary_doc

REPO = Path(__file__).resolve().parents[2]
BABYAI = REPO / "configs" / "babyai"


def write(tmp_path: Path, body: str, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def small(tmp_path: Path, *, output_root: str = "out", extra: str = "") -> Path:
    return write(
        tmp_path,
        f"""
        name: demo
        configs: [{BABYAI}/opo-scripted-seq.yaml, {BABYAI}/react-gpt-seq.yaml]
        output_root: {tmp_path / output_root}
        set: {{model.provider: scripted, run.rollouts: 20}}
        grid:
          run.seed: [0, 1]
        {extra}
    """,
    )


def test_two_configs_by_two_seeds_expand_to_four_stable_run_directories(tmp_path):
    sweep = load_sweep(small(tmp_path))
    dirs = [r.run_dir for r in sweep.runs]
    assert [r.label for r in sweep.runs] == [
        "opo-scripted-seq run.seed=0",
        "opo-scripted-seq run.seed=1",
        "react-gpt-seq run.seed=0",
        "react-gpt-seq run.seed=1",
    ]
    assert len(set(dirs)) == 4
    # The ordinary layout, with a run id from the sweep name and what defines the run.
    assert dirs[1].relative_to(tmp_path / "out").parts[:3] == (
        "babyai",
        "opo-scripted-seq",
        "seed1",
    )
    assert all(d.name.startswith("demo-") and len(d.name) == len("demo-") + 10 for d in dirs)
    # Same file again (and in another output root, or with `set` reordered): the same run ids.
    again = load_sweep(small(tmp_path))
    assert [r.run_dir for r in again.runs] == dirs
    moved = load_sweep(small(tmp_path, output_root="elsewhere"))
    assert [r.run_id for r in moved.runs] == [d.name for d in dirs]
    reordered = write(
        tmp_path,
        small(tmp_path)
        .read_text()
        .replace(
            "{model.provider: scripted, run.rollouts: 20}",
            "{run.rollouts: 20, model.provider: scripted}",
        ),
    )
    assert [r.run_id for r in load_sweep(reordered).runs] == [d.name for d in dirs]
    # A different override is a different run.
    longer = write(
        tmp_path, small(tmp_path).read_text().replace("run.rollouts: 20", "run.rollouts: 30")
    )
    assert not {r.run_id for r in load_sweep(longer).runs} & {d.name for d in dirs}
    # Each run's command carries its overrides; runs are started with the generic train command
    # (any installed benchmark and method), which takes the benchmark from the config.
    run = sweep.runs[3]
    assert {"run.seed=1", 'model.provider="scripted"', "run.rollouts=20"} <= set(run.overrides)
    from speedrunner.sweep.execute import command

    cmd = command(run, "start")
    assert cmd[1:4] == ["-m", "speedrunner.cli", "train"] and cmd[
        cmd.index("--config_file") + 1
    ] == str(run.config_file)


def test_named_override_sets_and_globs(tmp_path):
    path = write(
        tmp_path,
        f"""
        name: grid
        configs: ["{BABYAI}/react-*-seq.yaml"]
        grid:
          model:
            gpt: {{model.provider: openai, model.name: gpt-5.4-mini}}
            gemini: {{model.provider: gemini, model.name: gemini-3-flash-preview}}
          run.seed: [0, 1, 2]
        output_root: {tmp_path}
    """,
    )
    runs = load_sweep(path).runs
    stems = sorted({r.config_file.stem for r in runs})
    assert stems == ["react-gemini-seq", "react-gpt-seq", "react-qwen-seq"]
    assert len(runs) == 3 * 2 * 3
    assert "react-gpt-seq model=gemini run.seed=2" in [r.label for r in runs]
    assert len({r.run_dir for r in runs}) == len(runs)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("name: x\nconfigs: [a.yaml]\ngird: {}\n", "unknown key 'gird' (did you mean 'grid'?)"),
        (
            "name: x\nconfigs: [a.yaml]\nresources: {num_cpu: 2}\n",
            "unknown key 'resources.num_cpu' (did you mean 'num_cpus'?)",
        ),
        ("configs: [a.yaml]\n", "name: required key is missing"),
        ("name: x y\nconfigs: [a.yaml]\n", "name: use letters, digits"),
        ("name: x\nconfigs: [nowhere.yaml]\n", "'nowhere.yaml' matches no config file"),
        (
            f"name: x\nconfigs: [{BABYAI}/opo-scripted-seq.yaml]\ngrid: {{seed: [0]}}\n",
            "'seed' is not a dotted config key",
        ),
        (
            "name: x\nconfigs: [a.yaml]\ngrid: {run.seed: 3}\n",
            "grid axis 'run.seed': expected a list of values",
        ),
        (
            f"name: x\nconfigs: [{BABYAI}/opo-scripted-seq.yaml]\ngrid: {{run.seeed: [0, 1]}}\n",
            "opo-scripted-seq run.seeed=0: ",
        ),
    ],
)
def test_bad_sweep_files_fail_with_the_problem_and_the_fix(tmp_path, body, expected):
    path = write(tmp_path, body)
    with pytest.raises(ConfigError) as e:
        load_sweep(path)
    assert expected in str(e.value)


def test_a_bad_run_override_names_the_run_and_the_key(tmp_path, capsys):
    path = write(
        tmp_path, f"name: x\nconfigs: [{BABYAI}/opo-scripted-seq.yaml]\nset: {{run.seeed: 1}}\n"
    )
    assert cli_main(["sweep", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "opo-scripted-seq: " in err and "run.seeed" in err and "did you mean 'seed'" in err


def test_dry_run_prints_every_run_and_what_would_happen(tmp_path, capsys):
    path = small(tmp_path)
    assert cli_main(["sweep", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    sweep = load_sweep(path)
    assert "4 of 4 runs" in out
    for r in sweep.runs:
        assert str(r.run_dir) in out and r.label in out
    assert out.count("start ") == 4 and not any(r.run_dir.exists() for r in sweep.runs)
    assert cli_main(["sweep", str(path), "--dry-run", "--shard", "1/3"]) == 0
    assert "1 of 4 runs" in capsys.readouterr().out


def test_every_run_is_in_exactly_one_shard(tmp_path):
    base = load_sweep(small(tmp_path)).runs[0]
    for total in (1, 2, 3, 5, 7, 16, 37, 100):
        runs = [dataclasses.replace(base, index=i, run_id=f"demo-{i}") for i in range(total)]
        for count in range(1, 41):
            shards = [shard(runs, i, count) for i in range(count)]
            ids = [r.run_id for s in shards for r in s]
            assert sorted(ids) == sorted(r.run_id for r in runs), (total, count)
            sizes = [len(s) for s in shards]
            assert max(sizes) - min(sizes) <= 1
            assert shards == [shard(runs, i, count) for i in range(count)]  # stable


@pytest.mark.parametrize("text", ["3/3", "-1/2", "1/0", "a/b", "2"])
def test_bad_shards_are_refused(text):
    with pytest.raises(ConfigError, match="--shard"):
        parse_shard(text)


def test_slurm_backend_requires_a_shard(tmp_path, capsys):
    assert cli_main(["sweep", str(small(tmp_path)), "--backend", "slurm"]) == 2
    assert "--backend slurm needs --shard I/N" in capsys.readouterr().err


def test_the_sbatch_script_runs_one_shard_per_array_task(tmp_path):
    sweep = load_sweep(small(tmp_path))
    script = sbatch_script(sweep, 3)
    assert "#SBATCH --array=0-2" in script
    assert '--backend slurm --shard "${SLURM_ARRAY_TASK_ID}/3"' in script
    assert str(sweep.path) in script
    checked = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert checked.returncode == 0, checked.stderr
    assert "--array=0-3" in sbatch_script(sweep, 10)  # never more tasks than runs


def test_ray_missing_gives_the_install_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    assert cli_main(["sweep", str(small(tmp_path)), "--backend", "ray"]) == 2
    err = capsys.readouterr().err
    assert "--backend ray needs Ray" in err and 'pip install -e ".[ray]"' in err


def test_ray_resources_reserve_scienceworld_jvm_memory(tmp_path):
    sw = REPO / "configs" / "scienceworld" / "react-gpt-t4.yaml"
    path = write(
        tmp_path,
        f"""
        name: res
        configs: [{sw}, {BABYAI}/react-gpt-seq.yaml]
        set: {{run.parallel_episodes: 4}}
        output_root: {tmp_path}
        resources: {{num_cpus: 2}}
    """,
    )
    scienceworld, babyai = load_sweep(path).runs
    assert scienceworld.memory_bytes == 6 * 2**30 and scienceworld.num_cpus == 2  # 1.5 GB per JVM
    assert babyai.memory_bytes is None
    pinned = write(
        tmp_path, path.read_text().replace("{num_cpus: 2}", "{num_cpus: 2, memory_gb: 2}")
    )
    assert {r.memory_bytes for r in load_sweep(pinned).runs} == {2 * 2**30}


def test_plan_reads_the_run_directory_and_warns_when_the_config_file_changed(tmp_path):
    config = tmp_path / "react.yaml"
    config.write_bytes((BABYAI / "react-gpt-seq.yaml").read_bytes())
    path = write(tmp_path, f"name: p\nconfigs: [react.yaml]\noutput_root: {tmp_path / 'out'}\n")
    run = load_sweep(path).runs[0]
    assert plan(run) == ("start", "new")
    run.run_dir.mkdir(parents=True)
    (run.run_dir / "stray").write_text("x")
    assert plan(run)[0] == "broken"  # not a run directory: never overwritten
    (run.run_dir / "provenance.json").write_text("{}")
    (run.run_dir / "config.yaml").write_bytes(config.read_bytes())
    (run.run_dir / "summary.json").write_text(json.dumps(summary_doc(status="interrupted")))
    assert plan(run) == ("resume", "continuing (interrupted)")
    (run.run_dir / "summary.json").write_text(json.dumps(summary_doc(status="finished")))
    assert plan(run) == ("skip", "finished earlier")
    config.write_text(config.read_text().replace("seed: 0", "seed: 5"))
    action, why = plan(run)
    assert action == "skip" and "WARNING: react.yaml changed since this run started" in why


def test_the_end_line_shows_final_progress_and_never_counts_an_unknown_price_as_zero(
    tmp_path, capsys
):
    import json

    from speedrunner.sweep.cli import print_outcomes
    from speedrunner.sweep.execute import read_outcome

    path = write(
        tmp_path,
        f"name: p\nconfigs: [{BABYAI}/react-gpt-seq.yaml]\noutput_root: {tmp_path / 'out'}\n",
    )
    run = load_sweep(path).runs[0]
    d = run.run_dir
    (d / "episodes" / "train").mkdir(parents=True)
    (d / "episodes" / "train" / "0000.json").write_text("{}")
    (d / "config.resolved.json").write_text(
        json.dumps({"run": {"rollouts": 200}, "speedrun": {"metric": "success"}})
    )
    final = {
        k: v
        for k, v in eval_row(success_mean=0.5, progress_mean=0.625).items()
        if k != "per_episode"
    }
    (d / "summary.json").write_text(json.dumps(summary_doc(status="finished", final_eval=final)))
    calls = [{"spent_usd": 0.25}, {"spent_usd": 0.0, "cache_hit": True}]
    (d / "llm_calls.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls) + '{"torn')
    outcome = read_outcome(run, "start", 0)
    assert (outcome.progress, outcome.metric_value, outcome.cost_usd) == (0.625, 0.5, 0.25)
    print_outcomes([outcome])
    out = capsys.readouterr().out
    line = [x for x in out.splitlines() if str(d) in x][0]
    assert (
        line.split()[:6] == ["finished", "1/200", "0.625", "eval", "success", "0.500"]
        and "$0.2500" in line
    )
    header = out.split("status ", 1)[1].splitlines()[0]
    assert "eval progress" in header and "eval metric" in header  # the evaluation's, not training's
    assert "the final evaluation once a run finished" in out

    calls.append({"spent_usd": None})  # a call whose price is unknown
    (d / "llm_calls.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls))
    outcome = read_outcome(run, "start", 0)
    assert outcome.cost_usd is None
    print_outcomes([outcome])
    assert " unknown " in [x for x in capsys.readouterr().out.splitlines() if str(d) in x][0]


def test_a_damaged_summary_is_resumed_and_named_never_read_as_a_run_not_started(tmp_path):
    """A summary.json that is not a run summary is no "killed before its first summary": the sweep
    resumes the run (which rewrites it) and its plan and end line name the file."""
    from speedrunner.sweep.execute import read_outcome

    path = write(
        tmp_path,
        f"name: p\nconfigs: [{BABYAI}/react-gpt-seq.yaml]\noutput_root: {tmp_path / 'out'}\n",
    )
    run = load_sweep(path).runs[0]
    run.run_dir.mkdir(parents=True)
    (run.run_dir / "provenance.json").write_text("{}")
    (run.run_dir / "summary.json").write_text(json.dumps({"status": "finished"}))
    action, why = plan(run)
    assert action == "resume" and f"{run.run_dir / 'summary.json'} is not a run summary" in why
    outcome = read_outcome(run, "resume", 1)
    assert outcome.status == "missing" and "summary.json is not a run summary" in outcome.note
