"""Read W&B's offline run files (``run-<id>.wandb``) back, to check what was logged.

The file is W&B's transaction log: a 7-byte header, then LevelDB-log-style records in
32 KiB blocks (4-byte CRC, 2-byte length, 1-byte type: full, first, middle, last), each
a serialized ``wandb_internal_pb2.Record``. W&B ships no Python reader any more, so the
tests carry this small one.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

BLOCK = 32 * 1024
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list[Any]:
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    out, pos, pending = [], HEADER, b""
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            continue
        if kind == FULL:
            pending = chunk
        elif kind == FIRST:
            pending = chunk
            continue
        elif kind == MIDDLE:
            pending += chunk
            continue
        elif kind == LAST:
            pending += chunk
        record = pb.Record()
        record.ParseFromString(pending)
        out.append(record)
    return out


def history(path: Path) -> list[dict[str, Any]]:
    """Every ``run.log`` call, as the dict that was logged (W&B's own ``_step``... left out)."""
    rows = []
    for r in records(path):
        if r.WhichOneof("record_type") == "history":
            row = {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in r.history.item}
            rows.append({k: v for k, v in row.items() if not k.startswith("_")})
    return rows


def config(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for r in records(path):
        kind = r.WhichOneof("record_type")
        items = r.config.update if kind == "config" else r.run.config.update if kind == "run" else []
        for i in items:
            out[i.key or "/".join(i.nested_key)] = json.loads(i.value_json)
    return out


def run_ids(path: Path) -> set[str]:
    return {r.run.run_id for r in records(path) if r.WhichOneof("record_type") == "run"}


def offline_files(run_dir: Path) -> list[Path]:
    return sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb"))


def steps(path: Path) -> list[int]:
    """The W&B step of each ``history`` record, in file order."""
    return [int(r.history.step.num) for r in records(path) if r.WhichOneof("record_type") == "history"]


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
