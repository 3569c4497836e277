"""A real training run (the offline recorded SpeedRunner demo, scripted) reaches a rolling
training-success target, and its result goes onto a leaderboard with no path given."""

import json
import shlex
import subprocess
import sys

import pytest

from .harness import REPO, clean_env, run

pytestmark = pytest.mark.slow

CONFIG = REPO / "configs" / "babyai" / "speedrunner-scripted-seq.yaml"
SETTINGS = [
    "run.rollouts=20",
    "run.eval_every=10",
    "run.eval_episodes=2",
    "speedrun.metric=train_success_rolling",
    "speedrun.window=10",
    "speedrun.target=0.5",
]


def test_a_scripted_run_reaches_its_target_and_is_appended_from_the_default_results_folder(
    tmp_path,
):
    env = {
        k: v for k, v in clean_env().items() if k != "SPEEDRUNNER_RESULTS_DIR"
    }  # the real default

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    sets = [a for s in SETTINGS for a in ("--set", s)]
    proc = run("speedrunner.benchmarks.babyai.train", "--config_file", str(CONFIG), *sets)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs" / "babyai").glob("*/seed0/r0001")
    record = json.loads((run_dir / "speedrun.json").read_text())
    successes = [
        json.loads(line)["success"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()
    ]
    rates = {
        end: sum(successes[end - 10 : end]) / 10 for end in (10, 20)
    }  # checked after each batch of 10
    reached = next(end for end, rate in rates.items() if rate >= 0.5)
    assert (record["reached"], record["rollout"], record["value"]) == (
        True,
        reached,
        rates[reached],
    )
    assert (
        record["scripted"] is True
        and "SCRIPTED" in record["note"]
        and record["status"] == "finished"
    )
    assert (record["benchmark"], record["task_set"], record["method"]) == (
        "babyai",
        "seq",
        "speedrunner",
    )
    provenance = json.loads((run_dir / "provenance.json").read_text())
    assert record["config_file_sha256"] == provenance["config_file_sha256"]
    copy = tmp_path / "runs" / "speedrun" / f"{record['result_id']}.json"
    assert json.loads(copy.read_text()) == record
    assert (
        f"reached at rollout {reached}" in proc.stdout
        and str(copy.relative_to(tmp_path)) in proc.stdout
    )

    refused = run("speedrunner.cli", "leaderboard", "append")  # scripted: refused by default
    assert refused.returncode == 2 and "--allow-scripted" in refused.stderr
    assert not (tmp_path / "LEADERBOARD.md").exists()
    # The end-of-run line gives the command that works for this run, word for word.
    hint = next(line for line in proc.stdout.splitlines() if line.startswith("speedrun:"))
    command = (
        hint.split("add it to LEADERBOARD.md: ", 1)[1].removesuffix(" [SCRIPTED MODEL]").rstrip(")")
    )
    assert command.startswith("speedrunner leaderboard append ") and command.endswith(
        " --allow-scripted"
    )
    added = run("speedrunner.cli", *shlex.split(command)[1:])
    assert added.returncode == 0, added.stderr
    board = (tmp_path / "LEADERBOARD.md").read_text()
    (row,) = [line for line in board.splitlines() if record["result_id"] in line]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3] == f"{record['model']} (SCRIPTED)"
    assert cells[5:10] == [
        "train_success_rolling(10) >= 0.5",
        str(reached),
        f"${record['train_cost_usd']:.4f}",
        str(record["train_output_tokens"]),
        str(record["train_llm_calls"]),
    ]
    again = run("speedrunner.cli", "leaderboard", "append", "--allow-scripted", str(run_dir))
    assert again.returncode == 2 and "already on" in again.stderr
    assert (tmp_path / "LEADERBOARD.md").read_text() == board


def test_a_run_placed_with_run_dir_keeps_its_result_beside_it_wherever_the_shell_is(tmp_path):
    """--run_dir /somewhere: the result copy goes to /somewhere's speedrun/, not ./runs/speedrun."""
    env = {k: v for k, v in clean_env().items() if k != "SPEEDRUNNER_RESULTS_DIR"}
    shell_dir, place = tmp_path / "shell", tmp_path / "store" / "exp1"
    shell_dir.mkdir()
    sets = [
        a for s in [*SETTINGS[:3], "run.rollouts=10", "run.eval_every=10"] for a in ("--set", s)
    ]
    proc = run(
        [
            sys.executable,
            "-m",
            "speedrunner.benchmarks.babyai.train",
            "--config_file",
            str(CONFIG),
            "--run_dir",
            str(place),
            *sets,
        ],
        timeout=300,
        env=env,
        cwd=shell_dir,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((place / "speedrun.json").read_text())
    copy = tmp_path / "store" / "speedrun" / f"{record['result_id']}.json"
    assert json.loads(copy.read_text()) == record
    assert str(copy) in proc.stdout
    assert list(shell_dir.iterdir()) == []  # nothing written where the shell is
