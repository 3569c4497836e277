"""The checkpoint: the one file a resumed run continues from.

It records what is *final*: batches whose sleep phase finished and whose metrics rows
were written, evaluation points whose row was written, and the knowledge version. Any
work after it (episode files of an unfinished batch, a half-done sleep) is redone on
resume, cheaply: finished episodes are loaded from disk and LLM calls replay from the
cache, so the result is the same and nothing is paid twice.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from speedrunner.core.atomic import atomic_write_json, atomic_write_text, read_jsonl, repair_jsonl
from speedrunner.errors import CheckpointError

CHECKPOINT_FILE = "checkpoint.json"
FORMAT = "speedrunner-checkpoint/2"
MAX_CHECKPOINT_BYTES = 1024 * 1024
"""A checkpoint is a few hundred bytes (it grows by one number per evaluation point); a larger
file is not one, and is refused before it is read."""


class Totals(BaseModel):
    """Cumulative training cost so far (for the speedrun record and progress)."""

    model_config = ConfigDict(extra="forbid")

    episodes: int = 0
    successes: int = 0
    llm_calls: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    episode_and_sleep_time_s: float = 0.0
    """Sum of every training episode's and sleep phase's duration. Episodes of a batch run
    at once, so this exceeds the real elapsed time (``Checkpoint.elapsed_s``)."""


class SpeedrunPoint(BaseModel):
    """Where the speedrun target was first reached, with the training totals at that moment.

    Kept in the checkpoint (not only in speedrun.json) so a resumed run rewrites the same
    record: the totals of an earlier process cannot be recomputed from metrics.jsonl.
    """

    model_config = ConfigDict(extra="forbid")

    rollout: int
    value: float
    totals: Totals
    elapsed_s: float


class Checkpoint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: str = FORMAT
    run_id: str
    results_config_sha256: str
    """sha256 of the resolved settings that decide results (``config_fingerprint``): endpoints,
    timeouts and parallelism are left out, so a resume may change them. Not the hash of
    config.yaml's bytes, which provenance.json keeps as ``config_file_sha256``."""
    completed_batches: int = 0
    knowledge_version: int = 0
    metrics_rows: int = 0
    eval_rows: int = 0
    eval_points_done: list[int] = []
    totals: Totals = Totals()
    speedrun_reached_at: int | None = None
    speedrun_reached: SpeedrunPoint | None = None
    """Owned by ``SpeedrunTracker``; ``speedrun_reached_at`` is its rollout (summary.json shows
    it)."""
    started_at: str | None = None
    """When the first process started the run (ISO 8601, UTC)."""
    elapsed_s: float = 0.0
    """Real time spent on the run by every process that worked on it, up to its last
    checkpoint (time between a kill and the last checkpoint before it is not counted)."""


def save_checkpoint(run_dir: Path, checkpoint: Checkpoint) -> None:
    atomic_write_json(run_dir / CHECKPOINT_FILE, checkpoint.model_dump(mode="json"))


def load_checkpoint(run_dir: Path, *, run_id: str, results_config_sha256: str) -> Checkpoint | None:
    """The run's checkpoint, ``None`` if it never wrote one; raises if corrupt or foreign."""
    path = run_dir / CHECKPOINT_FILE
    if not path.exists():
        return None
    try:
        if path.stat().st_size > MAX_CHECKPOINT_BYTES:
            raise ValueError(
                f"{path.stat().st_size} bytes, more than a checkpoint ever has "
                f"({MAX_CHECKPOINT_BYTES})"
            )
        data = json.loads(path.read_text("utf-8"))
        if isinstance(data, dict) and data.get("format") != FORMAT:
            raise CheckpointError(
                f"{path} has format {data.get('format')!r}; this SpeedRunner reads "
                f"{FORMAT!r} only. Start a new run with the same config"
            )
        checkpoint = Checkpoint.model_validate(data)
    except (
        ValueError,
        ValidationError,
        AttributeError,
        TypeError,
        RecursionError,
        MemoryError,
    ) as e:
        # ValueError: JSONDecodeError, UnicodeDecodeError; RecursionError: JSON nested thousands
        # deep
        reason = (str(e).splitlines() or [""])[0][:300] or "nested too deep to read"
        raise CheckpointError(
            f"{path} is corrupt ({type(e).__name__}: {reason}); it cannot be resumed. "
            "Start a new run, or restore the file from a backup"
        ) from None
    if checkpoint.run_id != run_id or checkpoint.results_config_sha256 != results_config_sha256:
        raise CheckpointError(
            f"{path} belongs to another run (run {checkpoint.run_id}, results config "
            f"{checkpoint.results_config_sha256[:12]}; this directory holds run {run_id}, results "
            f"config {results_config_sha256[:12]}): it was copied or edited. Resume the run "
            "directory it came from"
        )
    return checkpoint


def trim_jsonl(path: Path, rows: int) -> None:
    """Keep the first ``rows`` rows: drop rows written after the last checkpoint."""
    repair_jsonl(path)
    existing = read_jsonl(path)
    if len(existing) < rows:
        raise CheckpointError(
            f"{path} has {len(existing)} rows but the checkpoint counts {rows}: rows were lost"
        )
    if len(existing) > rows:
        atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in existing[:rows]))
