"""The README's main job (and the getting-started page's quick looks) run offline end to end
and label their numbers as scripted."""

import json
import re
import subprocess
import sys

import pytest

from .harness import REPO, clean_env


def readme_main_job() -> list[str]:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## The main job", 1)[1]
    command = re.search(r"```bash\n(python -m [^\n]+)\n```", section).group(1)
    return command.split()


@pytest.mark.slow
def test_readme_main_job_runs_offline_and_says_it_is_scripted(tmp_path):
    command = readme_main_job()
    assert command[:3] == ["python", "-m", "speedrunner.benchmarks.babyai.train"]
    config = REPO / command[command.index("--config_file") + 1]
    env = {k: v for k, v in clean_env().items() if "API_KEY" not in k}
    proc = subprocess.run(
        [sys.executable, *command[1:3], "--config_file", str(config)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "SCRIPTED" in proc.stdout and "say nothing about any LLM" in proc.stdout.replace(
        "\n", " "
    )
    assert proc.stderr == ""  # normal output goes to stdout; stderr is for warnings and errors
    progress = [line for line in proc.stdout.splitlines() if "episode " in line]
    assert len(progress) == 200 and all(line.startswith("[scripted] ") for line in progress)
    assert all("(#" not in line for line in progress)
    assert "ETA" not in "".join(progress[:10]) and "ETA" in progress[10]  # only after a whole batch
    (run_dir,) = (tmp_path / "runs" / "babyai").glob("*/seed0/r0001")
    assert "scripted" in run_dir.parts[-3]  # the directory name says so too
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["scripted"] is True and "SCRIPTED" in summary["note"]
    assert summary["training"]["episodes"] == 200
    last_ready = [line for line in proc.stdout.splitlines() if line.endswith(" ready")][-1]
    assert f"knowledge v{summary['knowledge_version']} ready" in last_ready
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 200 and all(m["scripted"] for m in metrics)
    evals = [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()]
    assert [e["rollout"] for e in evals] == [0, 50, 100, 150, 200] and all(
        e["scripted"] for e in evals
    )
    assert (
        (run_dir / "guide" / "gen_20.md")
        .read_text()
        .startswith("<!-- written by the SCRIPTED model")
    )
    calls = [json.loads(line) for line in (run_dir / "llm_calls.jsonl").read_text().splitlines()]
    assert calls and all(c["scripted"] for c in calls)
    last = proc.stdout.strip().splitlines()[-1]
    assert (
        last.startswith("run summary: 200 training episodes, training success ")
        and "final eval success" in last
    )
    assert (
        f"| {len(calls)} LLM calls" in last and "spent $0 (the scripted model, not an LLM)" in last
    )


def readme_quick_looks() -> list[list[str]]:
    """The quick looks of the getting-started page, which the README points to."""
    assert "](docs/getting-started.md)" in (REPO / "README.md").read_text()
    page = (REPO / "docs" / "getting-started.md").read_text()
    return [
        line.split()
        for line in page.splitlines()
        if line.startswith("python -m ") and "--set model.provider=scripted" in line
    ]


@pytest.mark.slow
def test_readme_quick_looks_at_crafter_and_scienceworld_run_without_a_key(tmp_path):
    commands = readme_quick_looks()
    # Voyager's offline look is its recorded demo instead (tests/e2e/test_voyager_demo.py).
    assert {c[2] for c in commands} == {
        "speedrunner.benchmarks.crafter.train",
        "speedrunner.benchmarks.scienceworld.train",
    }
    env = {k: v for k, v in clean_env().items() if "API_KEY" not in k}
    for i, command in enumerate(commands):
        config = REPO / command[command.index("--config_file") + 1]
        args = [
            a if a != command[command.index("--config_file") + 1] else str(config)
            for a in command[1:]
        ]
        proc = subprocess.run(
            [sys.executable, *args, "--run_dir", str(tmp_path / f"run{i}")],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        summary = json.loads((tmp_path / f"run{i}" / "summary.json").read_text())
        assert summary["scripted"] is True and summary["training"]["episodes"] == 4
