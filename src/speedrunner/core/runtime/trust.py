"""How often a run's sandboxes broke the protocol, from the run's own stable files.

A violation (``core/sandbox/schema.py``) ends one skill call or one analysis turn and
restarts that sandbox; the run goes on. Each one is recorded where it happened — the call
tree (``sandbox_violation``) and the trajectory's ``sandbox_violations`` (wake), the sleep
record's ``sandbox_violations`` (analysis code) — and summed here for ``summary.json`` and
the report. Counting from the files (not from a counter in memory) keeps the figure exact
across ``--resume``: rows past the checkpoint are trimmed, replayed episodes are not
counted twice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from speedrunner.core.atomic import read_jsonl

__all__ = ["count_violations"]


def count_violations(run_dir: Path) -> dict[str, int]:
    """``{"total", "train", "eval", "sleep"}``: protocol violations by where they happened."""
    train = sum(
        _count(row.get("sandbox_violations")) for row in read_jsonl(run_dir / "metrics.jsonl")
    )
    evals = sum(
        _count(e.get("sandbox_violations"))
        for row in read_jsonl(run_dir / "eval.jsonl")
        for e in row.get("per_episode") or []
        if isinstance(e, dict)
    )
    sleep = 0
    for path in sorted((run_dir / "sleep").glob("batch_*/sleep.json")):
        try:
            record: Any = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError, RecursionError):
            continue  # a torn record is the sleep phase's to replay; it holds no count to trust
        if isinstance(record, dict):
            sleep += _count(record.get("sandbox_violations"))
    return {"total": train + evals + sleep, "train": train, "eval": evals, "sleep": sleep}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
