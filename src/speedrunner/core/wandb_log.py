"""What W&B already holds of a run, read from its offline transaction logs.

An offline W&B run cannot ask a server which steps it has: after a kill, the only record of
what the killed process sent is its ``run-<id>.wandb`` file under ``<run_dir>/wandb/``.
The tracker reads the highest history step written there, so a resumed run sends only what
W&B does not hold yet (exactly once, even when the kill fell between a log call and the
tracker's cursor write).

The file is W&B's transaction log: a 7-byte header (``:W&B`` ...), then LevelDB-log-style
records in 32 KiB blocks (4-byte CRC, 2-byte length, 1-byte type: full, first, middle,
last), each a serialized ``wandb_internal_pb2.Record``. W&B ships no Python reader, so this
small one reads only what it needs. A killed writer can leave a torn last record: reading
stops there (that record was never durable, so it is sent again).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BLOCK = 32 * 1024
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def _payloads(data: bytes) -> Iterator[bytes]:
    pos, pending = HEADER, b""
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:  # a block's tail too short for a record header
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if pos + 7 + length > len(data):  # torn by a kill: never durable
            return
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == FULL:
            yield chunk
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            yield pending + chunk
        elif kind == 0 and length == 0:  # zero padding
            continue
        else:
            return  # not a record header: stop at what is known good


def records(path: Path) -> list[Any]:
    """The records of one transaction log, up to the first one that does not parse."""
    from google.protobuf.message import DecodeError
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    if data[:4] != b":W&B":
        return []
    out = []
    for payload in _payloads(data):
        record = pb.Record()
        try:
            record.ParseFromString(payload)
        except DecodeError:
            break
        out.append(record)
    return out


def last_offline_step(run_dir: Path, run_id: str) -> int:
    """The highest history step any offline segment of W&B run ``run_id`` holds (-1: none)."""
    last = -1
    for path in sorted((run_dir / "wandb").glob(f"offline-run-*/run-{run_id}.wandb")):
        try:
            found = records(path)
        except OSError:
            continue
        for r in found:
            if r.WhichOneof("record_type") == "history":
                last = max(last, int(r.history.step.num))
    return last
