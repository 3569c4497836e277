"""Run directories: where one run's every artifact lives, and what it was made from.

Layout (stable; documented in docs/run-directory.md)::

    <output_root>/<benchmark>/<method>-<model>-<taskset>/seed<k>/<run_id>/
      config.yaml  config.resolved.json  provenance.json
      episodes/{train,eval}/<index>.json
      llm_calls.jsonl  metrics.jsonl  eval.jsonl  checkpoint.json ...

Run ids are ``r0001``, ``r0002``, ... claimed with an exclusive ``mkdir``, so two runs
started at once never share (or overwrite) a directory.

``RUN_FORMAT`` versions the whole layout: a run directory resumes and reports in every later
SpeedRunner of its format version, and one of another version is refused, never upgraded.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from speedrunner.core.atomic import atomic_write_bytes, atomic_write_json
from speedrunner.core.config.loader import LoadedConfig
from speedrunner.core.config.schema import RunConfig
from speedrunner.core.redact import scrub, scrub_json
from speedrunner.errors import ConfigError, RunDirError, RunFormatError, SpeedRunnerError

CONFIG_FILE = "config.yaml"
RESOLVED_FILE = "config.resolved.json"
PROVENANCE_FILE = "provenance.json"
LOCK_FILE = ".lock"
RUN_FORMAT = 1
"""The run-directory format version, written into provenance.json as ``run_format``. Raise it
with any change after which a run directory of the current version would no longer resume
or report as it did (tests/fixtures/run_format_<n> holds one of each version)."""

_PACKAGES = (
    "speedrunner",
    "openai",
    "google-genai",
    "pydantic",
    "pyyaml",
    "gymnasium",
    "minigrid",
    "crafter",
    "scienceworld",
    "tenacity",
    "numpy",
    "matplotlib",
    "rich",
)


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``run_dir`` while a run (or resume) works in it.

    Two processes appending to one run directory would duplicate rows and pay twice for
    the same calls; the second one is refused instead. The lock dies with its process, and
    the ``.lock`` file is removed when the run leaves it, so a finished run keeps none.
    """
    path = Path(run_dir) / LOCK_FILE
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise RunDirError(
                f"{run_dir} is in use by PID {holder}; wait for it to finish, or "
                f"stop it (kill -TERM {holder}) before resuming"
            ) from None
        # The previous holder may have unlinked the file between our open and our lock:
        # then we locked an orphan and must lock the file that is there now.
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        yield
    finally:
        path.unlink(missing_ok=True)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def lock_holder(run_dir: Path) -> str | None:
    """The PID holding ``run_dir``'s lock, or None when no live process holds it."""
    path = Path(run_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return os.read(fd, 64).decode(errors="replace").strip() or "unknown"
    finally:
        os.close(fd)
    return None


def ensure_writable(run_dir: Path) -> None:
    """Fail before anything runs when ``run_dir`` cannot be written (read-only mount, full disk)."""
    probe = Path(run_dir) / f".write-test-{os.getpid()}"
    try:
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as e:
        raise RunDirError(
            f"cannot write to the run directory {run_dir}: {e.strerror or e}. " + _fix_for(e)
        ) from None


def _fix_for(e: OSError) -> str:
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return "Free some space, then run the same command again."
    return "Pick a writable place with --run_dir or run.output_root (or remount it read-write)."


def implied_provider(model_name: str) -> str:
    """The provider a model's name points at: OpenAI's and Google's own names, else a server."""
    name = model_name.rsplit("/", 1)[-1].lower()
    if name.startswith(("gpt-", "o1", "o3", "o4")):
        return "openai"
    if name.startswith("gemini"):
        return "gemini"
    return "vllm"


def model_label(provider: str, model_name: str) -> str:
    """What names the model in an experiment's identity (its directory, the report's groups).

    The name alone when the provider is the one the name implies (``gpt-5.4-mini`` on OpenAI,
    a Qwen model on vLLM), so those layouts never change; otherwise the provider is part of
    it (``gpt-5.4-mini_vllm``): the same name served elsewhere is another experiment, and two
    such runs must never be averaged as one.
    """
    if provider == "scripted":
        return "scripted"
    label = re.sub(r"[^A-Za-z0-9._-]+", "_", model_name.rsplit("/", 1)[-1])
    return label if provider == implied_provider(model_name) else f"{label}_{provider}"


def experiment_name(config: RunConfig) -> str:
    """``<method>-<model>-<taskset>``, the model part from ``model_label`` (``scripted`` for
    scripted runs; the provider added when it is not the one the name implies)."""
    model = model_label(config.model.provider, config.model.name)
    return f"{config.method.name}-{model}-{config.benchmark.task_set}"


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


def _remove_dead_staging(path: Path) -> None:
    """Remove staging directories for ``path`` left by processes killed while creating it."""
    for stale in path.parent.glob(f".{path.name}.creating-*"):
        pid = stale.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not _process_alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def create_run_dir(loaded: LoadedConfig, *, run_dir: str | Path | None = None) -> Path:
    """Make a fresh run directory and write the config copies and provenance into it.

    ``run_dir`` pins the location; it must be new or empty (runs are never overwritten).
    The directory is built under a temporary name and renamed into place, so a kill during
    creation leaves either nothing or a complete run directory that ``--resume`` accepts.
    """
    try:
        if run_dir is not None:
            path = Path(run_dir)
            if path.exists() and not path.is_dir():
                raise ConfigError(
                    f"--run_dir {path} is a file, not a directory; pick a new directory"
                )
            if path.exists() and any(path.iterdir()):
                raise _not_empty(path)
            path.parent.mkdir(parents=True, exist_ok=True)
        else:
            path = claim_run_dir(experiment_dir(loaded.config))
        _remove_dead_staging(path)
        staging = path.parent / f".{path.name}.creating-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        try:
            write_provenance(staging, loaded, run_id=path.name)
            os.rename(staging, path)  # replaces an empty directory atomically; never a full one
        except OSError as e:
            shutil.rmtree(staging, ignore_errors=True)
            if e.errno in (errno.ENOTEMPTY, errno.EEXIST):
                raise _not_empty(path) from None
            raise
    except OSError as e:
        where = Path(e.filename) if e.filename else Path(run_dir or experiment_dir(loaded.config))
        raise RunDirError(
            f"cannot create the run directory at {where}: {e.strerror or e}. " + _fix_for(e)
        ) from None
    return path


def _not_empty(path: Path) -> SpeedRunnerError:
    holder = lock_holder(path)
    if holder is not None:
        return RunDirError(
            f"--run_dir {path} is in use by PID {holder} (a run is working in it); "
            "pick a new directory, or wait for that run to finish"
        )
    return ConfigError(
        f"--run_dir {path} is not empty; runs are never overwritten. "
        f"Continue it with --resume {path}, or pick a new directory"
    )


def write_provenance(path: Path, loaded: LoadedConfig, *, run_id: str | None = None) -> None:
    """config.yaml (byte-exact unless it holds a secret), config.resolved.json, provenance.json.

    Secrets never reach these files: a key in a base_url is redacted, and a resume asks
    for that URL again (``--set model.base_url=...``).
    """
    raw = loaded.source.raw
    redacted = scrub(raw.decode("utf-8", "replace"))
    copy = raw if redacted == raw.decode("utf-8", "replace") else redacted.encode("utf-8")
    atomic_write_bytes(path / CONFIG_FILE, copy)
    atomic_write_json(path / RESOLVED_FILE, scrub_json(loaded.resolved_json()))
    record = provenance(loaded, run_id=run_id or path.name)
    record["config_file_redacted"] = copy != raw
    atomic_write_json(path / PROVENANCE_FILE, record)


def provenance(loaded: LoadedConfig, *, run_id: str) -> dict[str, Any]:
    commit, dirty = git_state(Path(__file__).resolve().parent)
    return {
        "run_format": RUN_FORMAT,
        "run_id": run_id,
        "config_source": str(loaded.source.path),
        "config_file_sha256": hashlib.sha256(loaded.source.raw).hexdigest(),
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


def check_run_format(run_dir: Path, *, action: str = "resumed") -> dict[str, Any]:
    """provenance.json of ``run_dir`` once its ``run_format`` is this SpeedRunner's; else a
    ``RunFormatError`` naming the version that wrote it and what to do instead."""
    path = Path(run_dir) / PROVENANCE_FILE
    try:
        record = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise RunFormatError(
            f"{run_dir} is not a SpeedRunner run directory (no {PROVENANCE_FILE}); "
            "pass a directory a train entry point wrote"
        ) from None
    except (OSError, ValueError, RecursionError) as e:
        raise RunFormatError(
            f"{path} cannot be read ({type(e).__name__}: {str(e)[:200]}); restore it "
            "from a backup, or start a new run"
        ) from None
    if not isinstance(record, dict):
        raise RunFormatError(
            f"{path} is not a provenance record; restore it from a backup, or start a new run"
        )
    found = record.get("run_format")
    if found == RUN_FORMAT and type(found) is int:
        return record
    version = (
        "no run-directory format version (an unreleased draft)"
        if found is None
        else f"run format {found!r}"
    )
    raise RunFormatError(
        f"{run_dir} cannot be {action}: it was written by {_writer(record)} in {version}"
        f", and this SpeedRunner ({_own_version()}) reads run format {RUN_FORMAT} only. "
        "Start a new run with the same config (its config.yaml is in that directory); "
        "see docs/run-directory.md#format-version"
    )


def _writer(provenance: dict[str, Any]) -> str:
    """The SpeedRunner that wrote a run directory, as its provenance names it."""
    packages = provenance.get("packages")
    version = packages.get("speedrunner") if isinstance(packages, dict) else None
    commit = provenance.get("git_commit")
    where = f" (commit {commit[:12]})" if isinstance(commit, str) and commit else ""
    return f"speedrunner {version or 'of an unknown version'}{where}"


def _own_version() -> str:
    try:
        return importlib.metadata.version("speedrunner")
    except importlib.metadata.PackageNotFoundError:
        return "unknown version"


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
            cwd=where,
            capture_output=True,
            text=True,
            timeout=10,
        )
        return commit.stdout.strip(), bool(status.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, None
