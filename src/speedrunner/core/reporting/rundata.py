"""One run directory, read back from its stable files only (docs/run-directory.md).

Reporting never imports a method or a benchmark: everything it shows comes from
``config.resolved.json``, ``summary.json``, ``metrics.jsonl``, ``eval.jsonl``,
``speedrun.json``, the trajectories and the knowledge files. A run still in progress (or
killed) has fewer rows and a ``summary.json`` whose status is not ``finished``; it is read
the same way and marked, never refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from speedrunner.core.atomic import read_jsonl
from speedrunner.core.llm.spent import usd
from speedrunner.core.records import (
    EvalRow,
    MetricsRow,
    RecordError,
    RunSummary,
    stored_summary,
    validate_rows,
)
from speedrunner.core.reporting.experiments import Settings, settings_of
from speedrunner.core.rundir import check_run_format, implied_provider
from speedrunner.errors import ReportInputError

RUN_MARKER = "config.resolved.json"


@dataclass(frozen=True)
class GroupKey:
    """What a curve or a table row aggregates over seeds: one experiment."""

    benchmark: str
    task_set: str
    method: str
    model: str
    variant: str = ""
    """What sets this experiment apart from others of the same name ("quick test"); empty when
    no other experiment shares its name."""

    @property
    def name(self) -> str:
        return f"{self.benchmark}/{self.task_set} {self.method} ({self.model})"

    @property
    def label(self) -> str:
        return f"{self.name} — {self.variant}" if self.variant else self.name

    @property
    def model_kind(self) -> str:
        """``scripted`` (no LLM), ``fake`` (the fake LLM server) or ``llm``."""
        if self.model.startswith("fake-"):
            return "fake"
        return "llm"


R = TypeVar("R", MetricsRow, EvalRow)


@dataclass
class RunData:
    """The files of one run, parsed; missing files read as empty (a run that just started).
    ``metrics``/``evals`` are the raw rows; ``train_rows``/``eval_rows`` the same rows as the
    schema's models (``speedrunner.core.records``), validated when the run is loaded."""

    path: Path
    config: dict[str, Any]
    summary: RunSummary | None
    """summary.json; ``None`` before the run wrote its first (killed at its start)."""
    metrics: list[dict[str, Any]]
    evals: list[dict[str, Any]]
    speedrun: dict[str, Any] | None
    extra: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def train_rows(self) -> list[MetricsRow]:
        """metrics.jsonl as :class:`MetricsRow` (a row that does not fit is a
        ``ReportInputError``)."""
        return _typed(MetricsRow, self.metrics, self.path / "metrics.jsonl")

    @cached_property
    def eval_rows(self) -> list[EvalRow]:
        """eval.jsonl as :class:`EvalRow` (a row that does not fit is a ``ReportInputError``)."""
        return _typed(EvalRow, self.evals, self.path / "eval.jsonl")

    @property
    def run_id(self) -> str:
        return self.path.name if self.summary is None else self.summary.run_id

    @property
    def seed(self) -> int:
        return int(self.config["run"]["seed"])

    @property
    def key(self) -> GroupKey:
        c = self.config
        name = str(c["model"]["name"]) if self.summary is None else self.summary.model
        provider = str(c["model"].get("provider") or implied_provider(name))
        model = (
            name if provider in ("scripted", implied_provider(name)) else f"{name} via {provider}"
        )
        return GroupKey(
            c["benchmark"]["name"], str(c["benchmark"]["task_set"]), c["method"]["name"], model
        )

    @property
    def status(self) -> str:
        """``finished``, ``running``, ``interrupted``, ``budget_reached`` or ``failed``; ``not
        started`` without a summary.json (the run stopped, or is starting, before its loop
        began)."""
        return "not started" if self.summary is None else self.summary.status

    @property
    def in_progress(self) -> bool:
        return self.status != "finished"

    @property
    def scripted(self) -> bool:
        """True when no LLM played: the summary, the config's provider or any row says so."""
        return bool(
            (self.summary is not None and self.summary.scripted)
            or self.config["model"].get("provider") == "scripted"
            or any(r.scripted for r in self.train_rows)
            or any(e.scripted for e in self.eval_rows)
        )

    @property
    def sleep_every(self) -> int:
        return int(self.config["run"]["sleep_every"])

    @property
    def rollouts_planned(self) -> int:
        return int(self.config["run"]["rollouts"])

    @property
    def sandbox_violations(self) -> int | None:
        """Protocol violations of the run's sandboxes (``summary.json``); ``None`` before its
        first summary."""
        return None if self.summary is None else self.summary.sandbox_violations.total

    @property
    def spending(self) -> str | None:
        """Money spent against the spending cap (``summary.json``), e.g.
        ``spent $0.4100 of cap $5.0000``; None when the run had no cap."""
        s = None if self.summary is None else self.summary.spending
        if s is None or (s.max_cost_usd is None and s.sweep_max_cost_usd is None):
            return None
        text = "spent " + usd(self.total_cost_usd)
        if s.max_cost_usd is not None:
            text += f" of cap {usd(float(s.max_cost_usd))}"
        if s.sweep_max_cost_usd is not None:
            text += f" (sweep cap {usd(float(s.sweep_max_cost_usd))})"
        return text

    @cached_property
    def settings(self) -> Settings:
        """The results-deciding settings, seed aside (runs alike in these are one experiment)."""
        return settings_of(self.config, self.extra.get("provenance", {}))

    @property
    def total_cost_usd(self) -> float | None:
        """Dollars of every LLM call of the run (``summary.json`` ``spent_usd``; None when a
        price is unknown, or before the run's first summary)."""
        spent = None if self.summary is None else self.summary.spent_usd
        return None if spent is None else float(spent)

    @property
    def unknown_spend_usd(self) -> float | None:
        """Worst case of the run's attempts that went unanswered (timed out, connection lost):
        they may have been billed (``summary.json`` ``unknown_spend_usd``; never part of
        ``total_cost_usd``). ``None``: such an attempt's model has no price."""
        if self.summary is None:
            return 0.0
        unknown = self.summary.unknown_spend_usd
        return None if unknown is None else float(unknown)

    @property
    def recorded_fingerprint(self) -> str | None:
        """``results_config_sha256`` as the run recorded it (seed included)."""
        value = self.extra.get("checkpoint", {}).get("results_config_sha256")
        return value if isinstance(value, str) and value else None

    @property
    def resumes(self) -> int:
        return len(self.extra.get("provenance", {}).get("resumes") or [])

    @cached_property
    def trajectories(self) -> dict[str, list[dict[str, Any]]]:
        """Raw trajectory JSON by split: ``train`` in index order, ``eval`` by (point, index).

        All of them in memory (a Crafter run at the paper's scale holds hundreds of MB):
        the report itself reads them one at a time (``trajectory_files``, ``read_trajectory``)."""
        return {
            split: [
                t for p in self.trajectory_files(split) if (t := read_trajectory(p)) is not None
            ]
            for split in ("train", "eval")
        }

    def trajectory_files(self, split: str) -> list[Path]:
        """The stored trajectories of ``split`` in the order of ``trajectories``."""
        return sorted((self.path / "episodes" / split).rglob("*.json"))

    def iter_trajectories(self, split: str) -> Iterator[dict[str, Any]]:
        """``trajectories[split]`` one file at a time."""
        for p in self.trajectory_files(split):
            t = read_trajectory(p)
            if t is not None:
                yield t


def read_trajectory(path: Path) -> dict[str, Any] | None:
    """One trajectory file, or None when unreadable: written atomically, so a reader racing a
    live run (or a corrupt file) skips it."""
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None


def load_run(path: Path) -> RunData:
    """Read one run directory (the one holding ``config.resolved.json``)."""
    config_path = path / RUN_MARKER
    try:
        config = json.loads(config_path.read_text("utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ReportInputError(
            f"{path} is not a readable run directory: {config_path.name} could not be "
            f"read ({e}); pass a directory made by a train entry point"
        ) from e
    provenance = check_run_format(path, action="reported")
    try:
        for section, key in (
            ("run", "seed"),
            ("run", "rollouts"),
            ("run", "sleep_every"),
            ("benchmark", "name"),
            ("benchmark", "task_set"),
            ("method", "name"),
            ("model", "name"),
        ):
            config[section][key]  # noqa: B018  (every key the report groups and scales by)
    except (KeyError, TypeError) as e:
        raise ReportInputError(
            f"{config_path} lacks {section}.{key}: it was not written by a train entry point "
            "of this version, or was edited; restore it from config.yaml with "
            "`speedrunner validate-config`"
        ) from e
    try:
        summary = stored_summary(path)
    except RecordError as e:
        raise ReportInputError(str(e)) from None
    run = RunData(
        path=path,
        config=config,
        summary=summary,
        metrics=read_jsonl(path / "metrics.jsonl"),
        evals=read_jsonl(path / "eval.jsonl"),
        speedrun=_json(path / "speedrun.json"),
        extra={"provenance": provenance, "checkpoint": _json(path / "checkpoint.json") or {}},
    )
    run.train_rows, run.eval_rows  # noqa: B018  (a damaged row is an error here, not deep in a table)
    return run


def _typed(model: type[R], rows: list[dict[str, Any]], source: Path) -> list[R]:
    """``rows`` as ``model``; a row that does not fit is a ``ReportInputError`` naming it."""
    try:
        return validate_rows(model, rows, source)
    except RecordError as e:
        raise ReportInputError(str(e)) from None


def find_runs(paths: list[Path]) -> list[RunData]:
    """Every run directory at or below the given paths (a run dir, or e.g. ``runs/``), once each."""
    found: dict[Path, RunData] = {}
    for given in paths:
        if not given.exists():
            raise ReportInputError(
                f"{given} does not exist; pass a run directory (the one with {RUN_MARKER}) "
                "or a folder that contains run directories, such as runs/"
            )
        candidates = (
            [given]
            if (given / RUN_MARKER).is_file()
            else sorted(p.parent for p in given.rglob(RUN_MARKER))
        )
        if not candidates:
            raise ReportInputError(
                f"{given} holds no run directory (no {RUN_MARKER} at or below it); pass the "
                "directory a train entry point wrote, e.g. runs/babyai/<name>/seed0/r0001"
            )
        for run_dir in candidates:
            resolved = run_dir.resolve()
            if resolved not in found:
                found[resolved] = load_run(run_dir)
    return sorted(found.values(), key=lambda r: (r.key.label, r.seed, r.run_id, str(r.path)))


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None
