"""The speedrun record: when a run first reached its target, and what getting there cost.

``SpeedrunTracker`` owns ``speedrun.json``; the loop only calls it (after each batch's
rows are written, after each evaluation, and when the run finishes) and keeps no
speedrun state of its own. The tracker's state is the checkpoint's ``speedrun_reached``
plus the last ``window`` rows of metrics.jsonl, both of which a resume restores exactly,
so a run killed and resumed writes the same record apart from ``WALL_CLOCK_FIELDS``.

Every write also lands in the results folder as ``<result_id>.json``: ``run_id`` (r0001)
is unique only within one experiment directory, so ``result_id`` adds the benchmark,
experiment name, seed and a hash of the run directory and start time, and repeated runs
never overwrite each other's results. ``speedrunner leaderboard append`` reads that folder.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from speedrunner.core.atomic import atomic_write_json, read_jsonl
from speedrunner.core.config.schema import RunConfig, RunSection
from speedrunner.core.runtime.checkpoint import Checkpoint, SpeedrunPoint

SPEEDRUN_FILE = "speedrun.json"
FORMAT = "speedrunner-speedrun/2"
DEFAULT_RESULTS_SUBDIR = "speedrun"
RESULTS_DIR_ENV = "SPEEDRUNNER_RESULTS_DIR"
WALL_CLOCK_FIELDS = frozenset({"elapsed_s", "train_episode_and_sleep_time_s", "written_at"})
"""Fields that measure real time; everything else is identical for a killed-and-resumed run."""


class SpeedrunRecord(BaseModel):
    """What speedrun.json holds (docs/run-directory.md lists the fields)."""

    model_config = ConfigDict(extra="ignore")  # a newer writer may add fields; readers keep working

    format: str
    run_format: int | None = None
    """The run-directory format version of the run (``core.rundir.RUN_FORMAT``); None: a draft."""
    result_id: str
    run_id: str
    status: Literal["running", "finished"]
    benchmark: str
    task_set: str
    method: str
    model: str
    provider: str | None = None
    """The actor's provider (``model.provider``); None in records written before it was kept."""
    inducer_model: str
    seed: int
    scripted: bool
    note: str | None = None
    metric: str
    target: float
    window: int | None = None
    reached: bool
    rollout: int | None = None
    value: float | None = None
    train_cost_usd: float | None = None
    train_output_tokens: int | None = None
    train_llm_calls: int | None = None
    elapsed_s: float | None = None
    train_episode_and_sleep_time_s: float | None = None
    final_eval_rollout: int | None = None
    final_success: float | None = None
    final_progress: float | None = None
    results_config_sha256: str
    config_file_sha256: str | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None
    started_at: str | None = None
    written_at: str


def default_results_dir(config: RunConfig | None = None, run_dir: Path | None = None) -> Path:
    """Where result copies go and where ``leaderboard append`` looks without arguments.

    ``speedrun.results_dir`` when the config sets it; else ``$SPEEDRUNNER_RESULTS_DIR``
    when set (the test suite points it at a temporary folder); else ``speedrun/`` in the
    run's own output root: for a run in the standard layout
    (``<root>/<benchmark>/<experiment>/seed<k>/<run_id>``) that is ``<root>/speedrun``, for
    one placed with ``--run_dir`` it is ``speedrun/`` beside the run directory — never a
    folder that depends on where the shell happens to be. Without a run directory (the
    leaderboard's default) it is ``<run.output_root>/speedrun``.
    """
    if config is not None and config.speedrun.results_dir is not None:
        return Path(config.speedrun.results_dir).expanduser()
    if os.environ.get(RESULTS_DIR_ENV):
        return Path(os.environ[RESULTS_DIR_ENV]).expanduser()
    if run_dir is not None and config is not None:
        return _output_root_of(Path(run_dir).resolve(), config) / DEFAULT_RESULTS_SUBDIR
    root = (
        config.run.output_root
        if config is not None
        else RunSection.model_fields["output_root"].default
    )
    return Path(root).expanduser() / DEFAULT_RESULTS_SUBDIR


def _output_root_of(run_dir: Path, config: RunConfig) -> Path:
    from speedrunner.core.rundir import experiment_dir

    if len(run_dir.parents) > 3 and run_dir.parent == experiment_dir(config, run_dir.parents[3]):
        return run_dir.parents[3]
    return run_dir.parent


class SpeedrunTracker:
    """Decides when the target is reached and writes speedrun.json and its results copy."""

    def __init__(self, config: RunConfig, run_dir: Path, *, run_id: str, scripted: bool) -> None:
        self.config = config
        self.run_dir = run_dir
        self.run_id = run_id
        self.scripted = scripted
        self.results_dir = default_results_dir(config, run_dir)
        self._git: tuple[str | None, bool | None] | None = None

    # ------------------------------------------------------------ the loop's calls
    def record_batch(self, checkpoint: Checkpoint, *, elapsed_s: float) -> None:
        """After a batch's metrics rows are written (before its checkpoint is saved)."""
        target = self.config.speedrun
        if target.metric != "train_success_rolling" or checkpoint.metrics_rows < target.window:
            return
        rows = read_jsonl(self.run_dir / "metrics.jsonl")[: checkpoint.metrics_rows][
            -target.window :
        ]
        value = sum(bool(r["success"]) for r in rows) / target.window
        self._maybe_reach(checkpoint, checkpoint.metrics_rows, value, elapsed_s)

    def record_eval(self, checkpoint: Checkpoint, row: dict[str, Any], *, elapsed_s: float) -> None:
        """After an evaluation row is written (before its checkpoint is saved)."""
        metric = self.config.speedrun.metric
        if metric == "train_success_rolling":
            return
        self._maybe_reach(checkpoint, row["rollout"], row[f"{metric}_mean"], elapsed_s)

    def finish(self, checkpoint: Checkpoint, evals: list[dict[str, Any]]) -> SpeedrunRecord:
        """When the run finished: the final record, reached or not, with the last evaluation."""
        return self._write(checkpoint, status="finished", final=evals[-1] if evals else None)

    # ------------------------------------------------------------------ internals
    def _maybe_reach(
        self, checkpoint: Checkpoint, rollout: int, value: float, elapsed_s: float
    ) -> None:
        reached_before = (
            checkpoint.speedrun_reached is not None or checkpoint.speedrun_reached_at is not None
        )
        if reached_before or value < self.config.speedrun.target:
            return
        checkpoint.speedrun_reached = SpeedrunPoint(
            rollout=rollout,
            value=value,
            totals=checkpoint.totals.model_copy(deep=True),
            elapsed_s=round(elapsed_s, 3),
        )
        checkpoint.speedrun_reached_at = rollout
        self._write(checkpoint, status="running", final=None)

    def result_id(self, checkpoint: Checkpoint) -> str:
        """Unique across runs: what the run is, then a hash of where and when it started."""
        from speedrunner.core.rundir import experiment_name

        c = self.config
        where = f"{self.run_dir.resolve()}\n{checkpoint.started_at}"
        digest = hashlib.sha256(where.encode()).hexdigest()[:8]
        return f"{c.benchmark.name}-{experiment_name(c)}-seed{c.run.seed}-{self.run_id}-{digest}"

    def _write(
        self,
        checkpoint: Checkpoint,
        *,
        status: Literal["running", "finished"],
        final: dict[str, Any] | None,
    ) -> SpeedrunRecord:
        from speedrunner.core.rundir import RUN_FORMAT

        c = self.config
        point = checkpoint.speedrun_reached
        reached = point is not None or checkpoint.speedrun_reached_at is not None
        totals = point.totals if point is not None else None
        commit, dirty = self._git_state()
        record = SpeedrunRecord(
            format=FORMAT,
            run_format=RUN_FORMAT,
            result_id=self.result_id(checkpoint),
            run_id=self.run_id,
            status=status,
            benchmark=c.benchmark.name,
            task_set=c.benchmark.task_set,
            method=c.method.name,
            model=c.model.name,
            provider=c.model.provider,
            inducer_model=c.inducer_model.name,
            seed=c.run.seed,
            scripted=self.scripted,
            note="SCRIPTED MODEL: these numbers come from no LLM" if self.scripted else None,
            metric=c.speedrun.metric,
            target=c.speedrun.target,
            window=c.speedrun.window if c.speedrun.metric == "train_success_rolling" else None,
            reached=reached,
            rollout=point.rollout if point is not None else checkpoint.speedrun_reached_at,
            value=point.value if point is not None else None,
            train_cost_usd=totals.cost_usd if totals else None,
            train_output_tokens=totals.output_tokens if totals else None,
            train_llm_calls=totals.llm_calls if totals else None,
            elapsed_s=point.elapsed_s if point is not None else None,
            train_episode_and_sleep_time_s=round(totals.episode_and_sleep_time_s, 3)
            if totals
            else None,
            final_eval_rollout=final["rollout"] if final else None,
            final_success=final["success_mean"] if final else None,
            final_progress=final["progress_mean"] if final else None,
            results_config_sha256=checkpoint.results_config_sha256,
            config_file_sha256=self._config_file_sha256(),
            git_commit=commit,
            git_dirty=dirty,
            started_at=checkpoint.started_at,
            written_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        data = record.model_dump(mode="json")
        atomic_write_json(self.run_dir / SPEEDRUN_FILE, data)
        self.results_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.results_dir / f"{record.result_id}.json", data)
        return record

    def _git_state(self) -> tuple[str | None, bool | None]:
        """The commit of the code writing the record (the one that finished the run)."""
        if self._git is None:
            from speedrunner.core.rundir import git_state

            self._git = git_state(Path(__file__).resolve().parent)
        return self._git

    def _config_file_sha256(self) -> str | None:
        """provenance.json's hash of config.yaml's bytes (absent when no provenance was written)."""
        try:
            return json.loads((self.run_dir / "provenance.json").read_text("utf-8")).get(
                "config_file_sha256"
            )
        except (OSError, ValueError, AttributeError):
            return None


def describe(run_dir: Path, config: RunConfig) -> str:
    """One line for the end of a run: the speedrun outcome and where its result copy is."""
    record = SpeedrunRecord.model_validate_json((run_dir / SPEEDRUN_FILE).read_text("utf-8"))
    window = f"({record.window})" if record.window is not None else ""
    what = f"{record.metric}{window} >= {record.target:g}"
    if record.reached:
        cost = "" if record.train_cost_usd is None else f", ${record.train_cost_usd:.4f}"
        outcome = f"{what} reached at rollout {record.rollout}{cost}"
    else:
        outcome = f"{what} not reached"
    copy = default_results_dir(config, run_dir) / f"{record.result_id}.json"
    command = f"speedrunner leaderboard append {copy}"
    if (
        record.scripted
    ):  # the board refuses scripted results unless asked: give the command that works
        command += " --allow-scripted"
    return f"speedrun: {outcome}; result {copy} (add it to LEADERBOARD.md: {command})"
