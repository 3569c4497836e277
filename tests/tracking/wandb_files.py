"""Read W&B's offline run files (``run-<id>.wandb``) back, to check what was logged.

The framing (W&B's transaction log) is read by the tracker's own reader,
:mod:`speedrunner.core.wandb_log`; these helpers turn its records into what a test checks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from speedrunner.core import wandb_log


def records(path: Path) -> list[Any]:
    assert path.read_bytes()[:4] == b":W&B", f"{path} is not a W&B run file"
    return wandb_log.records(path)


def history(path: Path) -> list[dict[str, Any]]:
    """Every ``run.log`` call, as the dict that was logged (W&B's own ``_step``... left out)."""
    rows = []
    for r in records(path):
        if r.WhichOneof("record_type") == "history":
            row = {
                (i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in r.history.item
            }
            rows.append({k: v for k, v in row.items() if not k.startswith("_")})
    return rows


def config(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for r in records(path):
        kind = r.WhichOneof("record_type")
        items = (
            r.config.update if kind == "config" else r.run.config.update if kind == "run" else []
        )
        for i in items:
            out[i.key or "/".join(i.nested_key)] = json.loads(i.value_json)
    return out


def run_ids(path: Path) -> set[str]:
    return {r.run.run_id for r in records(path) if r.WhichOneof("record_type") == "run"}


def offline_files(run_dir: Path) -> list[Path]:
    return sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb"))


def steps(path: Path) -> list[int]:
    """The W&B step of each ``history`` record, in file order."""
    return [
        int(r.history.step.num) for r in records(path) if r.WhichOneof("record_type") == "history"
    ]


def summary(path: Path) -> dict[str, Any]:
    """The run summary as the file leaves it (later updates win; W&B's own ``_`` keys left out)."""
    out: dict[str, Any] = {}
    for r in records(path):
        if r.WhichOneof("record_type") == "summary":
            for i in r.summary.update:
                key = i.key or "/".join(i.nested_key)
                if not key.startswith("_"):
                    out[key] = json.loads(i.value_json)
    return out


def run_group(path: Path) -> str:
    (group,) = {r.run.run_group for r in records(path) if r.WhichOneof("record_type") == "run"}
    return group
