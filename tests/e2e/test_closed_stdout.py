"""A training run piped into a reader that stops early (``| head``) stops as on Ctrl-C: no
traceback, summary.json says so, and ``--resume`` finishes the run with nothing lost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .harness import REPO, clean_env

CONFIG = REPO / "configs" / "babyai" / "opo-scripted-seq.yaml"


def _train(*args: str) -> list[str]:
    return [sys.executable, "-m", "speedrunner.benchmarks.babyai.train", *args]


def test_a_closed_stdout_stops_the_run_resumably(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        _train("--config_file", str(CONFIG), "--quick_test", "--run_dir", str(run_dir)),
        cwd=REPO,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    for line in proc.stdout:  # what `| head` reads before it exits: here, into the first batch
        if b"episodes done" in line:
            break
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 141, err  # 128 + SIGPIPE, as a shell reports a closed pipe
    assert "Traceback" not in err
    assert "interrupted (stdout closed)" in err and f"--resume {run_dir}" in err

    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["status"], summary["status_reason"]) == ("interrupted", "stdout closed")

    resumed = subprocess.run(
        _train("--resume", str(run_dir)),
        cwd=REPO,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "finished"
    episodes = [
        json.loads(line)["index"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()
    ]
    assert sorted(episodes) == list(range(summary["training"]["episodes"])) and episodes
