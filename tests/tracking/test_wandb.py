"""Optional W&B logging, checked by reading W&B's offline run files back (no network).

What a user relies on: the same numbers as ``metrics.jsonl``; one W&B run per SpeedRunner
run, resumed under the same id; every episode logged once even across a SIGKILL; nothing
secret; a missing package or login stops the run before anything is written (exit 2); and
nothing at all changes without the section.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e import prewarmed
from tests.e2e.harness import REPO, KillingPolicy, clean_env, run, start_server, train_cmd

from .wandb_files import config, history, offline_files, run_group, run_ids, steps, summary

pytest.importorskip("wandb", reason="the wandb package is in the dev extra: pip install -e .[dev]")

OFFLINE = "logging={wandb: {project: speedrunner-tests, mode: offline}}"
SECRET = "sk-test-do-not-log-0123456789"
DEMO = REPO / "configs" / "babyai" / "opo-scripted-seq.yaml"
SMALL = ["run.rollouts=20", "run.eval_every=10", "run.eval_episodes=2"]


def env(tmp_path: Path) -> dict[str, str]:
    e = clean_env()
    e.update(HOME=str(tmp_path / "home"), WANDB_MODE="offline", OPENAI_API_KEY=SECRET)
    return e


def train(
    run_dir: Path, tmp_path: Path, *sets: str, config: Path = DEMO
) -> subprocess.CompletedProcess:
    args = [a for s in (*SMALL, *sets) for a in ("--set", s)]
    return run(
        [
            sys.executable,
            "-m",
            "speedrunner.benchmarks.babyai.train",
            "--config_file",
            str(config),
            "--run_dir",
            str(run_dir),
            *args,
        ],
        timeout=300,
        env=env(tmp_path),
        cwd=tmp_path,
    )


def train_rows(files: list[Path]) -> list[dict]:
    return [row for f in files for row in history(f) if "train/rollout" in row]


def as_logged(row: dict, prefix: str = "train/") -> dict:
    """A metrics.jsonl row the way the tracker flattens it."""
    out = {}
    for key, value in row.items():
        if isinstance(value, dict):
            out.update({f"{prefix}{key}.{k}": v for k, v in value.items()})
        elif not isinstance(value, list):
            out[f"{prefix}{key}"] = value
    return out


@pytest.mark.slow
def test_a_scripted_run_logs_the_numbers_of_its_own_files(tmp_path):
    run_dir = tmp_path / "run"
    proc = train(run_dir, tmp_path, OFFLINE, "run.max_cost_usd=5")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (file,) = offline_files(run_dir)
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert train_rows([file]) == [
        as_logged(r) for r in metrics
    ]  # every episode, once, same numbers
    assert all(
        r["train/max_cost_usd"] == 5 and "train/run_spent_usd" in r for r in train_rows([file])
    )
    evals = [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()]
    logged_evals = [r for r in history(file) if "eval/rollout" in r]
    assert [r["eval/rollout"] for r in logged_evals] == [e["rollout"] for e in evals]
    assert [r["eval/success_mean"] for r in logged_evals] == [e["success_mean"] for e in evals]
    knowledge = [r for r in history(file) if "knowledge/generation" in r]
    assert [r["knowledge/generation"] for r in knowledge] == [0, 1, 2]
    guides = [len((run_dir / "guide" / f"gen_{g}.md").read_text("utf-8")) for g in (0, 1, 2)]
    assert [
        r["knowledge/guide_chars"] for r in knowledge
    ] == guides  # the sizes, not only the numbers
    totals = [r for r in history(file) if "totals/rollout" in r]
    final = json.loads((run_dir / "summary.json").read_text())
    assert [r["totals/rollout"] for r in totals] == [10, 20]  # after every batch
    assert {k.removeprefix("totals/"): v for k, v in totals[-1].items()} == {
        "rollout": final["training"]["episodes"],
        "cost_usd": final["training"]["cost_usd"],
        "llm_calls": final["training"]["llm_calls"],
        "output_tokens": final["training"]["output_tokens"],
    }
    logged_summary = summary(file)
    speedrun = json.loads((run_dir / "speedrun.json").read_text())
    assert {k: logged_summary[f"speedrun/{k}"] for k in speedrun} == speedrun  # the speedrun record
    assert logged_summary["final_eval.success_mean"] == final["final_eval"]["success_mean"]
    assert logged_summary["training.llm_calls"] == final["training"]["llm_calls"]
    assert (
        logged_summary["spending.max_cost_usd"] == 5 and logged_summary["spending.spent_usd"] == 0.0
    )  # scripted
    assert run_group(file) == "babyai/opo-scripted-seq"  # grouped by experiment
    assert steps(file) == sorted(set(steps(file)))  # one row per step, in order
    assert any(
        k.startswith("report/eval_progress") for r in history(file) for k in r
    )  # plots as media
    resolved = json.loads((run_dir / "config.resolved.json").read_text())
    logged = config(file)
    assert {k: logged[k] for k in resolved} == resolved  # the resolved config
    state = json.loads((run_dir / "tracking.json").read_text())["wandb"]
    assert run_ids(file) == {state["id"]}
    everything = b"".join(p.read_bytes() for p in (run_dir / "wandb").rglob("*") if p.is_file())
    assert SECRET.encode() not in everything  # no key, anywhere W&B wrote


@pytest.mark.slow
def test_a_killed_and_resumed_run_logs_each_episode_exactly_once_under_one_id(tmp_path):
    policy = KillingPolicy(kill_at=30)  # mid-wake, inside an LLM call
    server = start_server(policy)
    run_dir = tmp_path / "run"
    try:
        cmd = train_cmd(
            "crafter",
            "opo-gpt-crafter.yaml",
            run_dir,
            server.base_url,
            "--set",
            "benchmark.max_env_actions=8",
            "--set",
            "run.parallel_episodes=1",
            "--set",
            OFFLINE,
        )
        proc = prewarmed.popen(cmd, cwd=tmp_path, env=env(tmp_path))
        policy.pid = proc.pid
        proc.communicate(timeout=300)
        assert policy.killed and proc.returncode == -9
        first = json.loads((run_dir / "tracking.json").read_text())["wandb"]
        resumed = run(
            [
                sys.executable,
                "-m",
                "speedrunner.benchmarks.crafter.train",
                "--resume",
                str(run_dir),
            ],
            timeout=300,
            env=env(tmp_path),
            cwd=tmp_path,
        )
    finally:
        server.stop()
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    files = offline_files(run_dir)
    assert len(files) == 2  # the killed and the resumed process
    assert set().union(*(run_ids(f) for f in files)) == {first["id"]}  # one W&B run, resumed
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    logged = train_rows(files)
    assert [r["train/index"] for r in logged] == [m["index"] for m in metrics]  # each exactly once
    assert logged == [as_logged(m) for m in metrics]


KILL_AFTER_LOGGING = """
import os, runpy, signal, sys, time
from pathlib import Path

sys.path.insert(0, {repo!r})
from tests.tracking.wandb_files import history, offline_files
from speedrunner.core import tracking

run_dir = Path(sys.argv[sys.argv.index("--run_dir") + 1])
n = int(os.environ["KILL_AFTER_TRAIN_ROWS"])
real_init = tracking.WandbTracker.__init__


def init(self, *args, **kwargs):
    real_init(self, *args, **kwargs)
    real_log, sent = self.run.log, []

    def log(row, *a, **k):
        real_log(row, *a, **k)
        sent.append("train/rollout" in row)
        if sum(sent) == n:
            # Once W&B has written the row, die before the tracker moves its cursor.
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and sum(
                    "train/rollout" in r for f in offline_files(run_dir) for r in history(f)) < n:
                time.sleep(0.1)
            os.kill(os.getpid(), signal.SIGKILL)

    self.run.log = log


tracking.WandbTracker.__init__ = init
sys.argv = ["train", *sys.argv[1:]]
runpy.run_module("speedrunner.benchmarks.babyai.train", run_name="__main__")
"""


@pytest.mark.slow
def test_a_kill_between_logging_rows_and_moving_the_cursor_logs_no_row_twice(tmp_path):
    """The narrow window: rows 11-13 of the second batch are in W&B's file, the cursor still
    says 10. The resumed run must send rows 14-20 and the rest of that batch, and not 11-13
    again, so each episode, evaluation, total and knowledge generation is in W&B once."""
    run_dir = tmp_path / "run"
    args = [
        "--config_file",
        str(DEMO),
        "--run_dir",
        str(run_dir),
        *[a for s in (*SMALL, OFFLINE) for a in ("--set", s)],
    ]
    killed = subprocess.run(
        [sys.executable, "-c", KILL_AFTER_LOGGING.format(repo=str(REPO)), *args],
        cwd=tmp_path,
        env={**env(tmp_path), "KILL_AFTER_TRAIN_ROWS": "13"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == -9, killed.stderr[-3000:]
    (first_file,) = offline_files(run_dir)
    assert len(train_rows([first_file])) == 13  # in W&B before the kill ...
    cursor = json.loads((run_dir / "tracking.json").read_text())["wandb"]
    resumed = run(
        [sys.executable, "-m", "speedrunner.benchmarks.babyai.train", "--resume", str(run_dir)],
        timeout=300,
        env=env(tmp_path),
        cwd=tmp_path,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    files = offline_files(run_dir)
    assert len(files) == 2 and set().union(*(run_ids(f) for f in files)) == {cursor["id"]}
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["train/index"] for r in train_rows(files)] == [
        m["index"] for m in metrics
    ]  # each once
    assert train_rows(files) == [as_logged(m) for m in metrics]
    logged = [r for f in files for r in history(f)]
    evals = [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()]
    assert [r["eval/rollout"] for r in logged if "eval/rollout" in r] == [
        e["rollout"] for e in evals
    ]
    assert [r["totals/rollout"] for r in logged if "totals/rollout" in r] == [10, 20]
    assert [r["knowledge/generation"] for r in logged if "knowledge/generation" in r] == [0, 1, 2]
    all_steps = [s for f in files for s in steps(f)]
    assert all_steps == sorted(set(all_steps))  # the resumed file continues the steps
    assert (
        cursor["metrics_rows"] == 10 and cursor["pending"]["cursor"]["metrics_rows"] == 20
    )  # ... not yet in the cursor

    # A file torn by a kill mid-write is read up to its last whole record, never an error.
    from speedrunner.core.wandb_log import last_offline_step

    torn = tmp_path / "torn" / "wandb" / f"offline-run-x-{cursor['id']}"
    torn.mkdir(parents=True)
    data = first_file.read_bytes()
    (torn / f"run-{cursor['id']}.wandb").write_bytes(data[: len(data) * 2 // 3])
    assert -1 < last_offline_step(tmp_path / "torn", cursor["id"]) <= max(steps(first_file))


def test_without_the_section_nothing_is_tracked(tmp_path):
    from speedrunner.catalog import config_loader
    from speedrunner.core.tracking import NoTracker, open_tracker

    config = config_loader().load(DEMO).config
    assert config.logging is None
    assert isinstance(open_tracker(config, tmp_path, run_id="r0001", scripted=True), NoTracker)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_wandb_package_stops_the_run_before_anything_is_written(
    tmp_path, monkeypatch, capsys
):
    from speedrunner.train_cli import main

    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` fails
    monkeypatch.chdir(tmp_path)
    code = main(
        "babyai",
        "speedrunner.benchmarks.babyai.train",
        ["--config_file", str(DEMO), "--run_dir", str(tmp_path / "run"), "--set", OFFLINE],
    )
    err = capsys.readouterr().err
    assert code == 2 and 'pip install -e ".[wandb]"' in err
    assert not (tmp_path / "run").exists()


def test_online_logging_without_a_login_stops_before_anything_is_written(
    tmp_path, monkeypatch, capsys
):
    from speedrunner.train_cli import main

    for name in ("WANDB_API_KEY", "WANDB_MODE", "NETRC"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    monkeypatch.chdir(tmp_path)
    code = main(
        "babyai",
        "speedrunner.benchmarks.babyai.train",
        [
            "--config_file",
            str(DEMO),
            "--run_dir",
            str(tmp_path / "run"),
            "--set",
            "logging.wandb.project=p",
        ],
    )
    err = capsys.readouterr().err
    assert code == 2 and "wandb login" in err and "mode: offline" in err
    assert not (tmp_path / "run").exists()


def test_validate_config_notes_a_missing_login_and_accepts_the_file(tmp_path, monkeypatch, capsys):
    """Checking a file needs no secret: the missing login is a note and the exit code 0, while
    the train command (above) refuses the same file with exit 2."""
    from speedrunner.cli import main

    for name in ("WANDB_API_KEY", "WANDB_MODE", "NETRC"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    monkeypatch.chdir(tmp_path)
    code = main(["validate-config", str(DEMO), "--set", "logging.wandb.project=p"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["logging"]["wandb"]["project"] == "p"
    assert (
        "note: the file is valid, but running it needs this first" in err and "wandb login" in err
    )
    assert list(tmp_path.iterdir()) == []  # nothing written
