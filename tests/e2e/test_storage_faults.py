"""A full disk, a read-only run directory and a kill during run-directory creation: each
says what happened, where, and how to continue, and loses nothing.

The disk tests mount small tmpfs file systems (root and mount permission needed; skipped
with the reason otherwise).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from .harness import REPO, clean_env, rows

pytestmark = pytest.mark.slow

SCRIPTED = str(REPO / "configs" / "babyai" / "opo-scripted-seq.yaml")
TRAIN = [sys.executable, "-m", "speedrunner.benchmarks.babyai.train"]


@contextmanager
def tmpfs(where: Path, size: str, *, read_only: bool = False) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip() or 'mount failed'})")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def remount(where: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(where)], check=True)


def train(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*TRAIN, *args], capture_output=True, text=True, timeout=300, cwd=REPO, env=clean_env()
    )


def test_a_full_disk_stops_with_where_and_how_then_resume_finishes(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    assert (
        train("--config_file", SCRIPTED, "--quick_test", "--run_dir", str(reference)).returncode
        == 0
    )

    with tmpfs(tmp_path / "small", "96k") as disk:
        run_dir = disk / "run"
        full = train("--config_file", SCRIPTED, "--quick_test", "--run_dir", str(run_dir))
        assert full.returncode == 1, full.stderr[-3000:]
        assert "No space left on device" in full.stderr or "disk is full" in full.stderr
        assert "Free some space" in full.stderr and f"--resume {run_dir}" in full.stderr
        assert "Traceback" not in full.stderr

        remount(disk, "size=64m")
        resumed = train("--resume", str(run_dir))
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        for name in ("metrics.jsonl", "eval.jsonl"):
            assert rows(run_dir / name) == rows(reference / name), name


def test_a_read_only_place_is_refused_before_anything_runs(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "1m", read_only=True) as ro:
        proc = train("--config_file", SCRIPTED, "--quick_test", "--run_dir", str(ro / "run"))
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert (
        "cannot create the run directory" in proc.stderr and "Read-only file system" in proc.stderr
    )
    assert "--run_dir" in proc.stderr and "Traceback" not in proc.stderr


def test_resuming_a_run_on_a_read_only_mount_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    with tmpfs(tmp_path / "disk", "64m") as disk:
        run_dir = disk / "run"
        made = train("--config_file", SCRIPTED, "--quick_test", "--run_dir", str(run_dir))
        assert made.returncode == 0, made.stderr[-2000:]
        remount(disk, "ro")
        proc = train("--resume", str(run_dir))
        remount(disk, "rw")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"cannot write to the run directory {run_dir}" in proc.stderr
    assert "Read-only file system" in proc.stderr


KILL_DURING_CREATION = """
import os, signal, sys
from speedrunner.catalog import config_loader
from speedrunner.core import rundir

real = rundir.atomic_write_json
def write_then_die(path, obj, **kw):
    real(path, obj, **kw)
    if path.name == "config.resolved.json":   # half-way: config copies written, provenance not
        os.kill(os.getpid(), signal.SIGKILL)
rundir.atomic_write_json = write_then_die
loaded = config_loader().load(sys.argv[1])
rundir.create_run_dir(loaded, run_dir=sys.argv[2])
"""


def test_a_kill_during_creation_leaves_no_half_made_run_directory(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    killed = subprocess.run(
        [sys.executable, "-c", KILL_DURING_CREATION, SCRIPTED, str(run_dir)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=clean_env(),
    )
    assert killed.returncode == -9, killed.stderr
    assert not run_dir.exists() or not any(run_dir.iterdir())

    # The same --run_dir starts a new run as if nothing had happened.
    proc = train("--config_file", SCRIPTED, "--quick_test", "--run_dir", str(run_dir))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (run_dir / "summary.json").exists()
