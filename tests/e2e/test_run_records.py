"""What a run directory records: file modes that follow the umask, real elapsed time and a
run status, resumes in provenance, names that say what a hash covers, and no real model's
name on a scripted run."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from .harness import REPO, clean_env

pytestmark = pytest.mark.slow

SCRIPTED = str(REPO / "configs" / "babyai" / "opo-scripted-seq.yaml")
TRAIN = [sys.executable, "-m", "speedrunner.benchmarks.babyai.train"]


def train(*args: str, umask: int = 0o022) -> subprocess.CompletedProcess:
    return subprocess.run([*TRAIN, *args], capture_output=True, text=True, timeout=300, cwd=REPO,
                          env=clean_env(), preexec_fn=lambda: os.umask(umask))


@pytest.mark.parametrize("umask", [0o022, 0o027], ids=["umask022", "umask027"])
def test_every_file_and_directory_follows_the_umask(tmp_path: Path, umask: int) -> None:
    run_dir = tmp_path / "run"
    proc = train("--config_file", SCRIPTED, "--quick_test", "--run_dir", str(run_dir), umask=umask)
    assert proc.returncode == 0, proc.stderr[-3000:]
    paths = [run_dir, *run_dir.rglob("*")]
    assert any(p.name == "llm_cache.sqlite" for p in paths) and any(p.suffix == ".jsonl" for p in paths)
    for path in paths:
        mode = stat.S_IMODE(path.stat().st_mode)
        if path.is_dir():
            assert mode == 0o777 & ~umask, f"{path}: {oct(mode)}"
        else:
            # read bits exactly as the umask allows (collaborators can read), nothing beyond it
            assert mode & 0o444 == 0o444 & ~umask, f"{path}: {oct(mode)}"
            assert mode & ~(0o666 & ~umask) == 0, f"{path}: {oct(mode)}"
