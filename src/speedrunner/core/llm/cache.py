"""SQLite response cache: a resumed run replays exactly the calls it already paid for.

Rows are keyed by ``(namespace, call_id)`` — the run id and the call's stable position in
the run — and carry the sha256 of the canonical request. A replay needs both to match: the
same call position *and* the same request. A hit on the position with a different request
(the prompt changed, e.g. code edited between runs) is not replayed.

The request hash ignores ``base_url`` (the same request to another replica or a moved
server is the same request) and covers provider, model, messages, sampling and the
thinking switches. The file is in WAL mode with a busy timeout, so threads of one process
and several processes can share it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speedrunner.core.llm.types import Completion, Message, Usage

__all__ = ["CacheEntry", "ResponseCache", "completion_from_dict", "request_hash"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    namespace    TEXT NOT NULL,
    call_id      TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    completion   TEXT NOT NULL,
    created_at   REAL NOT NULL,
    PRIMARY KEY (namespace, call_id)
)
"""


def request_hash(
    *,
    provider: str,
    model: str,
    messages: list[Message],
    sampling: dict[str, Any],
    options: dict[str, Any] | None = None,
) -> str:
    """sha256 of the canonical request (sorted-key compact JSON); base_url is not part of it."""
    canonical = {
        "provider": provider,
        "model": model,
        "messages": [{"role": m.role, "content": m.content} for m in messages],
        "sampling": sampling,
        "options": options or {},
    }
    blob = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def completion_to_dict(c: Completion) -> dict[str, Any]:
    return dataclasses.asdict(c)


def completion_from_dict(d: dict[str, Any]) -> Completion:
    data = dict(d)
    data["usage"] = Usage(**data.get("usage", {}))
    known = {f.name for f in dataclasses.fields(Completion)}
    return Completion(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class CacheEntry:
    request_hash: str
    completion: Completion


class ResponseCache:
    """Thread-safe SQLite store of completed calls (one connection, one lock, WAL)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(
            self.path, check_same_thread=False, timeout=30.0, isolation_level=None
        )
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA busy_timeout=30000")
        self._conn.execute(_SCHEMA)

    def get(self, namespace: str, call_id: str) -> CacheEntry | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT request_hash, completion FROM responses WHERE namespace=? AND call_id=?",
                (namespace, call_id),
            ).fetchone()
        if row is None:
            return None
        return CacheEntry(row[0], completion_from_dict(json.loads(row[1])))

    def put(self, namespace: str, call_id: str, completion: Completion) -> None:
        """Store (or replace) the response for this call position."""
        blob = json.dumps(completion_to_dict(completion), ensure_ascii=False)
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)",
                (namespace, call_id, completion.request_hash, blob, time.time()),
            )

    def count(self, namespace: str | None = None) -> int:
        with self._lock:
            if namespace is None:
                return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
            return int(
                self._conn.execute(
                    "SELECT COUNT(*) FROM responses WHERE namespace=?", (namespace,)
                ).fetchone()[0]
            )

    def close(self) -> None:
        with self._lock:
            self._conn.close()
