"""Run directories: where one run's every artifact lives, and what it was made from.

Layout (stable; documented in the README)::

    <output_root>/<benchmark>/<method>-<model>-<taskset>/seed<k>/<run_id>/
      config.yaml  config.resolved.json  provenance.json
      episodes/{train,eval}/<index>.json
      llm_calls.jsonl  metrics.jsonl  eval.jsonl  checkpoint.json ...

Run ids are ``r0001``, ``r0002``, ... claimed with an exclusive ``mkdir``, so two runs
started at once never share (or overwrite) a directory.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from speedrunner.core.atomic import atomic_write_bytes, atomic_write_json
from speedrunner.core.config.loader import LoadedConfig
from speedrunner.core.config.schema import RunConfig
from speedrunner.core.redact import scrub
from speedrunner.errors import CheckpointError, ConfigError

CONFIG_FILE = "config.yaml"
RESOLVED_FILE = "config.resolved.json"
PROVENANCE_FILE = "provenance.json"
LOCK_FILE = ".lock"

_PACKAGES = (
    "speedrunner", "openai", "google-genai", "pydantic", "pyyaml", "gymnasium", "minigrid",
    "crafter", "scienceworld", "tenacity", "numpy", "matplotlib", "rich",
)


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``run_dir`` while a run (or resume) works in it.

    Two processes appending to one run directory would duplicate rows and pay twice for
    the same calls; the second one is refused instead. The lock dies with its process.
    """
    path = Path(run_dir) / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise CheckpointError(
            f"{run_dir} is in use by another process (pid {holder}); wait for it to finish, "
            "or stop it before resuming") from None
    try:
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def experiment_name(config: RunConfig) -> str:
    """``<method>-<model>-<taskset>``; the model part says ``scripted`` for scripted runs."""
    model = config.model
    label = "scripted" if model.provider == "scripted" else model.name
    label = re.sub(r"[^A-Za-z0-9._-]+", "_", label.rsplit("/", 1)[-1])
    return f"{config.method.name}-{label}-{config.benchmark.task_set}"


def experiment_dir(config: RunConfig, output_root: str | Path | None = None) -> Path:
    root = Path(output_root if output_root is not None else config.run.output_root).expanduser()
    return root / config.benchmark.name / experiment_name(config) / f"seed{config.run.seed}"


def claim_run_dir(parent: Path) -> Path:
    """Create and return the next free ``r<NNNN>`` directory under ``parent``."""
    parent.mkdir(parents=True, exist_ok=True)
    taken = [int(m.group(1)) for p in parent.iterdir() if (m := re.fullmatch(r"r(\d{4,})", p.name))]
    n = max(taken, default=0) + 1
    while True:
        candidate = parent / f"r{n:04d}"
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            n += 1


def create_run_dir(loaded: LoadedConfig, *, run_dir: str | Path | None = None) -> Path:
    """Make a fresh run directory and write the config copies and provenance into it.

    ``run_dir`` pins the location; it must not hold a run already (never overwrite).
    """
    if run_dir is not None:
        path = Path(run_dir)
        if path.exists() and not path.is_dir():
            raise ConfigError(f"--run_dir {path} is a file, not a directory; pick a new directory")
        if path.exists() and any(path.iterdir()):
            raise ConfigError(
                f"--run_dir {path} is not empty; runs are never overwritten. "
                f"Continue it with --resume {path}, or pick a new directory"
            )
        path.mkdir(parents=True, exist_ok=True)
    else:
        path = claim_run_dir(experiment_dir(loaded.config))
    write_provenance(path, loaded)
    return path


def write_provenance(path: Path, loaded: LoadedConfig) -> None:
    atomic_write_bytes(path / CONFIG_FILE, loaded.source.raw)
    atomic_write_json(path / RESOLVED_FILE, loaded.resolved_json())
    atomic_write_json(path / PROVENANCE_FILE, provenance(loaded, run_dir=path))


def provenance(loaded: LoadedConfig, *, run_dir: Path) -> dict[str, Any]:
    commit, dirty = git_state(Path(__file__).resolve().parent)
    return {
        "run_id": run_dir.name,
        "config_source": str(loaded.source.path),
        "config_sha256": hashlib.sha256(loaded.source.raw).hexdigest(),
        "overrides": [scrub(o) for o in loaded.overrides],
        "quick_test": loaded.quick_test,
        "command": [scrub(a) for a in [sys.executable, *sys.argv]],
        "cwd": os.getcwd(),
        "git_commit": commit,
        "git_dirty": dirty,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": package_versions(),
        "scripted_model": loaded.config.model.provider == "scripted"
        or loaded.config.inducer_model.provider == "scripted",
    }


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_state(where: Path) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout holding the code, or (None, None) outside git."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10
        )
        if commit.returncode != 0:
            return None, None
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=where, capture_output=True, text=True, timeout=10,
        )
        return commit.stdout.strip(), bool(status.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, None
