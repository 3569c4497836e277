"""A researcher's own package (tests/plugins/toy_corridor: a corridor benchmark with a skill API
and a method whose sleep appends a line to what the actor sees), installed as a user would
(``pip install -e``, offline) into an environment of its own, goes through every shipped command,
and the shipped SpeedRunner method's skills call its skill API in the sandbox."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from speedrunner.core.sandbox import available_tiers

TOY = Path(__file__).parent / "toy_corridor"

pytestmark = pytest.mark.slow


def toy_environment(root: Path) -> Path:
    """A venv that sees this suite's packages (a .pth file) with the toy package installed
    editable, without network or build isolation. Returns its python."""
    venv.EnvBuilder(with_pip=False).create(root / "venv")
    python = root / "venv" / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    # addsitedir, not a bare path: the suite's own .pth files (speedrunner's editable install) must
    # run too.
    Path(purelib, "suite_env.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in ours)
    )
    package = shutil.copytree(TOY, root / "toy_corridor")
    installed = subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--no-cache-dir",  # parallel tests' pip runs share no cache
            "-e",
            str(package),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PIP_NO_INDEX": "1"},
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    return python


def speedrunner(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "speedrunner.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def test_a_plug_in_package_runs_through_every_command(tmp_path: Path) -> None:
    python = toy_environment(tmp_path)
    configs = shutil.copytree(TOY / "configs", tmp_path / "configs")
    tally, react = configs / "tally-scripted.yaml", configs / "react-scripted.yaml"

    done = speedrunner(python, "validate-config", str(tally), cwd=tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout)["benchmark"]["name"] == "corridor", (
        done.stderr
    )

    for config, run in ((react, "react"), (tally, "tally")):
        done = speedrunner(
            python,
            "train",
            "--config_file",
            str(config),
            "--run_dir",
            str(tmp_path / run),
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads((tmp_path / run / "summary.json").read_text())["status"] == "finished"
    # The shipped SpeedRunner method: the scripted inducer's skill imports the package's skill API
    # (installed editable) in the bwrap sandbox, and the actor's calls to it open the door.
    speedrunner_config = configs / "speedrunner-scripted.yaml"
    tier = "bwrap" if "bwrap" in available_tiers() else "rlimits"
    done = speedrunner(
        python,
        "validate-config",
        str(speedrunner_config),
        "--set",
        f"run.sandbox={tier}",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    done = speedrunner(
        python,
        "train",
        "--config_file",
        str(speedrunner_config),
        "--run_dir",
        str(tmp_path / "skills"),
        "--set",
        f"run.sandbox={tier}",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "skills" / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["sandbox_tier"] == tier
    rows = [json.loads(x) for x in (tmp_path / "skills" / "metrics.jsonl").read_text().splitlines()]
    called = [r for r in rows if r["skill_calls"] > 0]
    assert len(called) == 2 and all(r["success"] for r in called), rows

    # The tally's sleep wrote a line a batch, and the actor saw the first before the second batch.
    line = "batch 0: 0 of 2 episodes opened the door"
    assert (tmp_path / "tally" / "tally" / "gen_2.md").read_text().splitlines()[0] == line
    assert line in (tmp_path / "tally" / "llm_calls.jsonl").read_text()

    done = speedrunner(python, "estimate", str(tally), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (
        "2,000 bytes and one observation <= 200 bytes on corridor" in done.stdout
    )  # declared sizes
    assert "tally: at most 80 bytes of notes a batch" in done.stdout  # the method's declared bounds
    assert "codebook" not in done.stdout

    done = speedrunner(
        python,
        "report",
        str(tmp_path / "react"),
        str(tmp_path / "tally"),
        "--out",
        str(tmp_path / "report"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "report" / "report.html").read_text()
    assert "Tally generations" in html and line in html  # the knowledge, under its declared title

    sweep = configs / "sweep.yaml"
    sweep.write_text(sweep.read_text() + f"output_root: {tmp_path / 'sweep'}\n")
    done = speedrunner(python, "sweep", str(sweep), "--workers", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    summaries = sorted((tmp_path / "sweep" / "corridor").glob("*/seed*/corridor-*/summary.json"))
    assert len(summaries) == 4 and {json.loads(p.read_text())["status"] for p in summaries} == {
        "finished"
    }


def test_the_toy_package_is_not_installed_in_the_suite_environment() -> None:
    """The plug-in test proves discovery only if the suite itself cannot see the toy package."""
    from speedrunner.core.specs import BENCHMARKS

    assert "corridor" not in BENCHMARKS and "toy_corridor" not in sys.modules
