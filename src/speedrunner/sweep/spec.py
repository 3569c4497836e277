"""A sweep file, and its expansion into runs with stable run directories.

A sweep file names run configs (paths or globs, relative to the sweep file) and a grid of
``--set`` style overrides::

    name: babyai-react-vs-opo
    configs: [../babyai/react-gpt-seq.yaml, ../babyai/opo-gpt-seq.yaml]
    set: {run.rollouts: 200}            # on every run
    grid:
      run.seed: [0, 1, 2]               # a dotted key and its values
      model:                            # named override sets
        gpt: {model.name: gpt-5.4-mini}
        gemini: {model.provider: gemini, model.name: gemini-3-flash-preview}

Every run's directory is derived from the sweep name and what defines the run (the config
file and the overrides), never from a counter: a rerun of the sweep finds the directory an
earlier, killed attempt used and resumes it there. The layout is the ordinary one,
``<output_root>/<benchmark>/<method>-<model>-<taskset>/seed<k>/<sweep>-<hash>/``, so every
tool that reads run directories reads a sweep's runs unchanged.
"""

from __future__ import annotations

import glob
import hashlib
import itertools
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from speedrunner.core.names import suggest
from speedrunner.errors import ConfigError, MissingFileError

Scalar = str | int | float | bool | None
NOT_IDENTITY = frozenset({"run.output_root", "run.max_cost_usd"})
"""Overrides that do not define a run: changing them in the sweep file keeps each run's
directory (a raised spending cap continues the capped runs instead of starting new ones)."""
RESUME_KEYS = frozenset({"run.max_cost_usd"})
"""Overrides a sweep passes again when it resumes a run, so an edit of the sweep file applies."""
OverrideValue = Scalar | list[Any] | dict[str, Any]


class Resources(BaseModel):
    """What one run needs from a Ray node (the local pool and SLURM ignore it)."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

    num_cpus: float = Field(1.0, gt=0)
    """CPUs reserved for one run (Ray ``num_cpus``)."""
    memory_gb: float | None = Field(None, gt=0)
    """Memory reserved for one run in GB (Ray ``memory``); null: what its benchmark declares per
    parallel episode (ScienceWorld: 1.5 GB, one capped JVM each), nothing reserved otherwise."""


class SweepFile(BaseModel):
    """The sweep YAML. Unknown keys are errors, with a suggestion."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

    name: str
    """Names the sweep; part of every run's directory name, so keep it once runs exist."""
    configs: list[str] = Field(min_length=1)
    """Run config files or globs, relative to the sweep file."""
    set: dict[str, OverrideValue] = Field(default_factory=dict)
    """Dotted overrides applied to every run (like ``--set``)."""
    grid: dict[str, Any] = Field(default_factory=dict)
    """Axes of the grid: ``dotted.key: [values]``, or ``axis: {label: {dotted.key: value}}``
    for named override sets. Runs are the product of the configs and every axis."""
    output_root: str | None = None
    """Where the runs go (relative: to the current directory); null: each config's
    run.output_root."""
    resources: Resources = Field(default_factory=Resources)
    """Per-run resources for ``--backend ray``."""
    max_cost_usd: float | None = Field(None, gt=0)
    """Spending cap in USD over all the sweep's runs together (null: none; each run's own
    ``run.max_cost_usd`` still applies). A run whose next call could cross it stops with status
    budget_reached; raise it and rerun the sweep to go on. See docs/spending.md."""

    @field_validator("name")
    @classmethod
    def _name_is_a_directory_name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", v):
            raise ValueError(
                "use letters, digits, '.', '_' and '-' (it becomes part of directory names)"
            )
        return v

    @field_validator("set")
    @classmethod
    def _dotted_keys(cls, v: dict[str, Any]) -> dict[str, Any]:
        for key in v:
            _check_dotted(key)
        return v

    @field_validator("grid")
    @classmethod
    def _axes(cls, v: dict[str, Any]) -> dict[str, Any]:
        for axis, values in v.items():
            if isinstance(values, list):
                _check_dotted(axis)
                if not values:
                    raise ValueError(f"grid axis {axis!r} has no values")
            elif not isinstance(values, dict) or not all(
                isinstance(o, dict) for o in values.values()
            ):
                raise ValueError(
                    f"grid axis {axis!r}: expected a list of values (e.g. run.seed: [0, 1]) "
                    "or named override sets (e.g. model: {gpt: {model.name: gpt-5.4-mini}}), "
                    f"got {values!r}"
                )
            else:
                if not values:
                    raise ValueError(f"grid axis {axis!r} has no named override sets")
                for label, overrides in values.items():
                    if not re.fullmatch(r"[A-Za-z0-9._-]+", label):
                        raise ValueError(
                            f"grid axis {axis!r}: label {label!r} must be letters, digits, "
                            "'.', '_', '-'"
                        )
                    for key in overrides:
                        _check_dotted(key)
        return v


def _check_dotted(key: str) -> None:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+", key):
        raise ValueError(f"{key!r} is not a dotted config key such as run.seed or model.name")


@dataclass(frozen=True)
class SweepRun:
    """One expanded run: what to start, and where it lives."""

    index: int
    """Position in the expansion (the order the sweep file implies); SLURM shards use it."""
    run_id: str
    """``<sweep name>-<10 hex>``: the run directory's name, stable across reruns."""
    label: str
    """Short human description, e.g. ``react-gpt-seq run.seed=1 model=gemini``."""
    config_file: Path
    overrides: tuple[str, ...]
    """``KEY=VALUE`` strings passed as ``--set`` (the output root included)."""
    run_dir: Path
    benchmark: str
    method: str
    parallel_episodes: int
    num_cpus: float
    memory_bytes: int | None
    log_file: Path
    """The run's stdout and stderr, every attempt appended:
    ``<output_root>/sweeps/<sweep>/logs/``."""
    rollouts: int | None = None
    """Training episodes the run plans (``run.rollouts``), for progress lines before it writes
    any file."""
    benchmark_section: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    """The run's resolved ``benchmark`` section: what its benchmark's sweep service reads
    (``BenchmarkSpec.sweep_service``, e.g. the server a run would start)."""


@dataclass(frozen=True)
class Sweep:
    path: Path
    spec: SweepFile
    runs: list[SweepRun]

    def shard(self, index: int, count: int) -> list[SweepRun]:
        return shard(self.runs, index, count)


def shard(runs: list[SweepRun], index: int, count: int) -> list[SweepRun]:
    """The runs of SLURM array task ``index`` of ``count``: every ``count``-th run from ``index``.

    Round robin over the expansion order: shards differ in size by at most one run, and
    every run is in exactly one shard.
    """
    if count < 1 or not 0 <= index < count:
        raise ConfigError(
            f"--shard {index}/{count}: expected I/N with 0 <= I < N "
            "(e.g. --shard $SLURM_ARRAY_TASK_ID/8 with sbatch --array=0-7)"
        )
    return [r for r in runs if r.index % count == index]


def parse_shard(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m:
        raise ConfigError(f"--shard {text!r}: expected I/N, e.g. --shard 0/4")
    index, count = int(m.group(1)), int(m.group(2))
    shard([], index, count)  # range check
    return index, count


def load_sweep(path: str | Path) -> Sweep:
    """Read, validate and expand a sweep file. Every problem is a ``ConfigError`` naming the fix."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"sweep file {path} does not exist", source=str(path))
    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ConfigError(f"not valid YAML: {e}", source=str(path)) from e
    if not isinstance(data, dict):
        raise ConfigError(
            "the top level must be a mapping (name, configs, set, grid, ...)", source=str(path)
        )
    try:
        spec = SweepFile.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_problems(e), source=str(path)) from None
    return Sweep(path, spec, expand(spec, path.parent))


def _problems(error: ValidationError) -> list[str]:
    lines = []
    fields = list(SweepFile.model_fields)
    for err in error.errors():
        loc = [str(p) for p in err["loc"]]
        dotted = ".".join(loc) or "(top level)"
        if err["type"] == "extra_forbidden":
            where = Resources.model_fields if loc[0] == "resources" else SweepFile.model_fields
            lines.append(
                f"unknown key '{dotted}'{suggest(loc[-1], where)}; "
                f"valid keys here: {', '.join(where)}"
            )
            continue
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            message = "required key is missing"
        doc = SweepFile.model_fields[loc[0]].description if loc and loc[0] in fields else None
        doc = " ".join(doc.split()) if doc else None
        lines.append(f"{dotted}: {message}" + (f"\n      {loc[0]}: {doc}" if doc else ""))
    return lines


def _as_override(key: str, value: Any) -> str:
    # JSON is YAML: `--set` reads the value back as exactly this value (a string stays a string).
    return f"{key}={json.dumps(value, sort_keys=True)}"


def _config_files(spec: SweepFile, base: Path) -> list[Path]:
    files: list[Path] = []
    for pattern in spec.configs:
        full = base / pattern
        matches = (
            sorted(Path(p) for p in glob.glob(str(full))) if glob.has_magic(pattern) else [full]
        )
        if not matches or not all(m.is_file() for m in matches):
            missing = [str(m) for m in matches if not m.is_file()] or [str(full)]
            raise MissingFileError(
                f"configs: {pattern!r} matches no config file ({', '.join(missing)}); "
                f"paths are relative to the sweep file's directory {base}"
            )
        files.extend(m for m in matches if m.resolve() not in {f.resolve() for f in files})
    return files


def _grid_points(spec: SweepFile) -> list[list[tuple[str, dict[str, Any]]]]:
    """Each point: a list of (label part, overrides) per axis, in the file's order."""
    axes = []
    for axis, values in spec.grid.items():
        if isinstance(values, list):
            axes.append(
                [
                    (f"{axis}={json.dumps(v) if not isinstance(v, str) else v}", {axis: v})
                    for v in values
                ]
            )
        else:
            axes.append(
                [(f"{axis}={label}", dict(overrides)) for label, overrides in values.items()]
            )
    return [list(p) for p in itertools.product(*axes)]


def expand(spec: SweepFile, base: Path) -> list[SweepRun]:
    """Configs x grid, in that order; each run validated like ``train`` would validate it."""
    from speedrunner.catalog import config_loader
    from speedrunner.core.rundir import experiment_dir
    from speedrunner.core.specs import BENCHMARKS

    loader = config_loader()
    runs: list[SweepRun] = []
    seen: dict[Path, str] = {}
    problems: list[str] = []
    for config_file in _config_files(spec, base):
        for point in _grid_points(spec):
            merged: dict[str, Any] = dict(spec.set)
            for _, overrides in point:
                merged.update(overrides)
            identity = sorted(
                _as_override(k, v) for k, v in merged.items() if k not in NOT_IDENTITY
            )
            rel = Path(os.path.relpath(config_file.resolve(), base.resolve())).as_posix()
            digest = hashlib.sha256(
                json.dumps({"config": rel, "overrides": identity}).encode()
            ).hexdigest()
            label = " ".join([config_file.stem, *(part for part, _ in point)])
            try:
                config = loader.load(
                    config_file, overrides=[_as_override(k, v) for k, v in merged.items()]
                ).config
            except ConfigError as e:
                problems.append(f"{label}: " + "; ".join(e.problems))
                continue
            root = Path(spec.output_root or config.run.output_root).expanduser().resolve()
            merged["run.output_root"] = str(root)
            run_id = f"{spec.name}-{digest[:10]}"
            run_dir = experiment_dir(config, root) / run_id
            if run_dir in seen:
                problems.append(
                    f"{label}: the same run as {seen[run_dir]} (same config and overrides)"
                )
                continue
            seen[run_dir] = label
            bench = config.benchmark
            memory = spec.resources.memory_gb
            per_episode = BENCHMARKS.get(bench.name).memory_gb_per_episode
            if memory is None and per_episode is not None:
                memory = per_episode * config.run.peak_parallel_episodes
            runs.append(
                SweepRun(
                    index=len(runs),
                    run_id=run_id,
                    label=label,
                    config_file=config_file.resolve(),
                    overrides=tuple(_as_override(k, v) for k, v in merged.items()),
                    run_dir=run_dir,
                    benchmark=bench.name,
                    method=config.method.name,
                    parallel_episodes=config.run.peak_parallel_episodes,
                    num_cpus=spec.resources.num_cpus,
                    memory_bytes=None if memory is None else int(memory * 2**30),
                    log_file=root / "sweeps" / spec.name / "logs" / f"{run_id}.log",
                    rollouts=config.run.rollouts,
                    benchmark_section=bench.model_dump(mode="json"),
                )
            )
    if problems:
        raise ConfigError(problems, source="sweep expansion")
    return runs
