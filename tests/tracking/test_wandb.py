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

from tests.e2e.harness import REPO, KillingPolicy, clean_env, start_server, train_cmd

from .wandb_files import config, history, offline_files, run_ids

pytest.importorskip("wandb", reason="the wandb package is in the dev extra: pip install -e .[dev]")

OFFLINE = "logging={wandb: {project: speedrunner-tests, mode: offline}}"
SECRET = "sk-test-do-not-log-0123456789"
DEMO = REPO / "configs" / "babyai" / "opo-scripted-seq.yaml"
SMALL = ["run.rollouts=20", "run.eval_every=10", "run.eval_episodes=2"]


def env(tmp_path: Path) -> dict[str, str]:
    e = clean_env()
    e.update(HOME=str(tmp_path / "home"), WANDB_MODE="offline", OPENAI_API_KEY=SECRET)
    return e


def train(run_dir: Path, tmp_path: Path, *sets: str, config: Path = DEMO) -> subprocess.CompletedProcess:
    args = [a for s in (*SMALL, *sets) for a in ("--set", s)]
    return subprocess.run([sys.executable, "-m", "speedrunner.benchmarks.babyai.train", "--config_file",
                           str(config), "--run_dir", str(run_dir), *args], cwd=tmp_path, env=env(tmp_path),
                          capture_output=True, text=True, timeout=300)


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
    proc = train(run_dir, tmp_path, OFFLINE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (file,) = offline_files(run_dir)
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert train_rows([file]) == [as_logged(r) for r in metrics]     # every episode, once, same numbers
    evals = [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()]
    logged_evals = [r for r in history(file) if "eval/rollout" in r]
    assert [r["eval/rollout"] for r in logged_evals] == [e["rollout"] for e in evals]
    assert [r["eval/success_mean"] for r in logged_evals] == [e["success_mean"] for e in evals]
    knowledge = [r for r in history(file) if "knowledge/generation" in r]
    assert [r["knowledge/generation"] for r in knowledge] == [0, 1, 2]
    assert any(k.startswith("report/eval_progress") for r in history(file) for k in r)   # plots as media
    resolved = json.loads((run_dir / "config.resolved.json").read_text())
    logged = config(file)
    assert {k: logged[k] for k in resolved} == resolved                # the resolved config
    state = json.loads((run_dir / "tracking.json").read_text())["wandb"]
    assert run_ids(file) == {state["id"]}
    everything = b"".join(p.read_bytes() for p in (run_dir / "wandb").rglob("*") if p.is_file())
    assert SECRET.encode() not in everything                           # no key, anywhere W&B wrote


@pytest.mark.slow
def test_a_killed_and_resumed_run_logs_each_episode_exactly_once_under_one_id(tmp_path):
    policy = KillingPolicy(kill_at=30)                                 # mid-wake, inside an LLM call
    server = start_server(policy)
    run_dir = tmp_path / "run"
    try:
        cmd = train_cmd("crafter", "opo-gpt-crafter.yaml", run_dir, server.base_url,
                        "--set", "benchmark.max_env_actions=8", "--set", "run.parallel_episodes=1",
                        "--set", OFFLINE)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env(tmp_path), cwd=tmp_path)
        policy.pid = proc.pid
        proc.communicate(timeout=300)
        assert policy.killed and proc.returncode == -9
        first = json.loads((run_dir / "tracking.json").read_text())["wandb"]
        resumed = subprocess.run([sys.executable, "-m", "speedrunner.benchmarks.crafter.train", "--resume",
                                  str(run_dir)], env=env(tmp_path), cwd=tmp_path, capture_output=True,
                                 text=True, timeout=300)
    finally:
        server.stop()
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    files = offline_files(run_dir)
    assert len(files) == 2                                              # the killed and the resumed process
    assert set().union(*(run_ids(f) for f in files)) == {first["id"]}   # one W&B run, resumed
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    logged = train_rows(files)
    assert [r["train/index"] for r in logged] == [m["index"] for m in metrics]   # each exactly once
    assert logged == [as_logged(m) for m in metrics]


def test_without_the_section_nothing_is_tracked(tmp_path):
    from speedrunner.catalog import config_loader
    from speedrunner.core.tracking import NoTracker, open_tracker

    config = config_loader().load(DEMO).config
    assert config.logging is None
    assert isinstance(open_tracker(config, tmp_path, run_id="r0001", scripted=True), NoTracker)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_wandb_package_stops_the_run_before_anything_is_written(tmp_path, monkeypatch, capsys):
    from speedrunner.train_cli import main

    monkeypatch.setitem(sys.modules, "wandb", None)                    # `import wandb` fails
    monkeypatch.chdir(tmp_path)
    code = main("babyai", "speedrunner.benchmarks.babyai.train",
                ["--config_file", str(DEMO), "--run_dir", str(tmp_path / "run"), "--set", OFFLINE])
    err = capsys.readouterr().err
    assert code == 2 and 'pip install -e ".[wandb]"' in err
    assert not (tmp_path / "run").exists()


def test_online_logging_without_a_login_stops_before_anything_is_written(tmp_path, monkeypatch, capsys):
    from speedrunner.train_cli import main

    for name in ("WANDB_API_KEY", "WANDB_MODE", "NETRC"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))                          # no ~/.netrc
    monkeypatch.chdir(tmp_path)
    code = main("babyai", "speedrunner.benchmarks.babyai.train",
                ["--config_file", str(DEMO), "--run_dir", str(tmp_path / "run"),
                 "--set", "logging.wandb.project=p"])
    err = capsys.readouterr().err
    assert code == 2 and "wandb login" in err and "mode: offline" in err
    assert not (tmp_path / "run").exists()


def test_validate_config_notes_a_missing_login_and_accepts_the_file(tmp_path, monkeypatch, capsys):
    """Checking a file needs no secret: the missing login is a note and the exit code 0, while
    the train command (above) refuses the same file with exit 2."""
    from speedrunner.cli import main

    for name in ("WANDB_API_KEY", "WANDB_MODE", "NETRC"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))                          # no ~/.netrc
    monkeypatch.chdir(tmp_path)
    code = main(["validate-config", str(DEMO), "--set", "logging.wandb.project=p"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["logging"]["wandb"]["project"] == "p"
    assert "note: the file is valid, but running it needs this first" in err and "wandb login" in err
    assert list(tmp_path.iterdir()) == []                              # nothing written
