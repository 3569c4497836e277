"""Crash-safe file writes: write a temp file in the same directory, fsync, rename.

A reader (or a resumed run) sees either the old file or the new one, never half of one.
Appends to ``*.jsonl`` go through ``append_jsonl``, which writes whole lines with one
``write`` call and fsyncs; ``read_jsonl`` drops a torn last line left by a kill.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def current_umask() -> int:
    """The process umask, read without changing it (``os.umask`` can only set it, racily)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file 0600; a run's files are for collaborators too, as the
        # umask says (0644 under 022, 0640 under 027), like every other file we create.
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, indent: int | None = 2) -> None:
    atomic_write_text(path, json.dumps(obj, indent=indent, sort_keys=False, default=str) + "\n")


def append_jsonl(path: str | os.PathLike[str], row: Any) -> None:
    """Append one JSON line durably (single write + fsync)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(row, sort_keys=False, default=str) + "\n").encode("utf-8")
    with open(path, "ab") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Yield rows of a JSONL file, skipping a torn final line (a kill mid-append)."""
    path = Path(path)
    if not path.exists():
        return
    with open(path, "rb") as f:  # line by line: a long run's log is never all in memory
        for raw in f:
            if not raw.strip():
                continue
            try:
                yield json.loads(raw)
            except json.JSONDecodeError:
                if not raw.endswith(b"\n"):  # torn tail: the kill happened during the append
                    return
                raise


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    return list(iter_jsonl(path))


def repair_jsonl(path: str | os.PathLike[str]) -> int:
    """Cut a torn final line (no trailing newline) so later appends start clean.

    Returns the number of bytes removed. Called on resume before appending.
    """
    path = Path(path)
    if not path.exists():
        return 0
    with open(
        path, "r+b"
    ) as f:  # reads from the end only: a resume costs the torn line, not the log
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return 0
        keep, end = 0, size
        while end > 0:
            start = max(0, end - 65536)
            f.seek(start)
            newline = f.read(end - start).rfind(b"\n")
            if newline >= 0:
                keep = start + newline + 1
                break
            end = start
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())
    return size - keep
