"""SQLite response cache: a resumed run replays exactly the calls it already paid for.

Rows are keyed by ``(namespace, call_id)`` — the run id and the call's stable position in
the run — and carry the sha256 of the canonical request. A replay needs both to match: the
same call position *and* the same request. A hit on the position with a different request
(the prompt changed, e.g. code edited between runs) is not replayed.

The request hash ignores ``base_url`` (the same request to another replica or a moved
server is the same request) and covers provider, model, messages, sampling and the
thinking switches. The file is in WAL mode with a busy timeout, so threads of one process
and several processes can share it.

The same file keeps the money honest across kills (SIGKILL included):

- ``pending``: every paid request is recorded *before* it is sent, with an upper bound of
  what it can cost. A row still there after a kill is a call that was in flight: it may
  have been billed, and nobody can know.
- ``responses``: a paid answer is stored here *after* its ``llm_calls.jsonl`` row (the run's
  one durable log of calls, one fsync per paid row) and in the same transaction as the end
  of its ``pending`` row. A kill between the two leaves the answer only in the log:
  ``journal.reconcile`` puts it back here on resume, so it is replayed, never paid twice.

What a commit costs must not grow with the run (a Crafter run at the paper's scale makes
hundreds of thousands of calls): a commit touches its own ``responses`` and ``pending`` rows
by primary key, and nothing else.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speedrunner.core.llm.conversation import as_conversation
from speedrunner.core.llm.types import Completion, Message, ToolSpec, ToolUse, Usage

__all__ = ["CacheEntry", "InFlight", "ResponseCache", "completion_from_dict", "request_hash"]

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS responses (
        namespace    TEXT NOT NULL,
        call_id      TEXT NOT NULL,
        request_hash TEXT NOT NULL,
        completion   TEXT NOT NULL,
        created_at   REAL NOT NULL,
        PRIMARY KEY (namespace, call_id)
    )""",
    """CREATE TABLE IF NOT EXISTS pending (
        namespace    TEXT NOT NULL,
        call_id      TEXT NOT NULL,
        purpose      TEXT NOT NULL,
        sent_at      REAL NOT NULL,
        max_cost_usd REAL,
        PRIMARY KEY (namespace, call_id)
    )""",
    """CREATE TABLE IF NOT EXISTS lost_in_flight (
        namespace    TEXT NOT NULL,
        call_id      TEXT NOT NULL,
        purpose      TEXT NOT NULL,
        sent_at      REAL NOT NULL,
        max_cost_usd REAL,
        found_at     REAL NOT NULL
    )""",
)


def request_hash(
    *,
    provider: str,
    model: str,
    messages: Sequence[Message],
    sampling: dict[str, Any],
    options: dict[str, Any] | None = None,
    tools: Sequence[ToolSpec] = (),
) -> str:
    """sha256 of the canonical request (sorted-key compact JSON of messages, model, options,
    provider, sampling and — only when native tools are offered — their definitions);
    base_url is not part of it. For a :class:`Conversation` the messages' part is already
    folded in, so this costs O(1) in the history's length."""
    tail: dict[str, Any] = {
        "model": model,
        "options": options or {},
        "provider": provider,
        "sampling": sampling,
    }
    if tools:
        tail["tools"] = [dataclasses.asdict(t) for t in tools]
    return as_conversation(messages).request_hash(tail)


def completion_to_dict(c: Completion) -> dict[str, Any]:
    return dataclasses.asdict(c)


def completion_from_dict(d: dict[str, Any]) -> Completion:
    data = dict(d)
    data["usage"] = Usage(**data.get("usage", {}))
    data["tool_calls"] = tuple(ToolUse(**t) for t in data.get("tool_calls") or ())
    known = {f.name for f in dataclasses.fields(Completion)}
    return Completion(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class InFlight:
    """A request that was sent when its process was killed: it may have been billed."""

    call_id: str
    purpose: str
    sent_at: float
    max_cost_usd: float | None
    """Upper bound of its price: every input byte a token, and max_tokens of output (None: price
    unknown)."""


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
        for statement in _SCHEMA:
            self._conn.execute(statement)

    def get(self, namespace: str, call_id: str) -> CacheEntry | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT request_hash, completion FROM responses WHERE namespace=? AND call_id=?",
                (namespace, call_id),
            ).fetchone()
        if row is None:
            return None
        return CacheEntry(row[0], completion_from_dict(json.loads(row[1])))

    def check(self) -> str | None:
        """What is wrong with the file (SQLite's ``quick_check``), or None when it reads fine."""
        with self._lock:
            rows = [r[0] for r in self._conn.execute("PRAGMA quick_check")]
        return None if rows == ["ok"] else "; ".join(str(r) for r in rows[:3])

    def iter_responses(self, namespace: str, batch: int = 500) -> Iterator[tuple[str, Completion]]:
        """(call_id, answer) of every stored answer of ``namespace``, a page at a time."""
        after = ""
        while True:
            with self._lock:
                page = list(
                    self._conn.execute(
                        "SELECT call_id, completion FROM responses "
                        "WHERE namespace=? AND call_id > ? "
                        "ORDER BY call_id LIMIT ?",
                        (namespace, after, batch),
                    )
                )
            if not page:
                return
            after = page[-1][0]
            for call_id, blob in page:
                yield call_id, completion_from_dict(json.loads(blob))

    def add_lost_in_flight(self, namespace: str, calls: Sequence[InFlight]) -> None:
        """Enter calls found in flight at earlier kills (a cache rebuilt from the call log)."""
        with self._lock:
            self._conn.executemany(
                "INSERT INTO lost_in_flight VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (namespace, c.call_id, c.purpose, c.sent_at, c.max_cost_usd, time.time())
                    for c in calls
                ],
            )

    def put(self, namespace: str, call_id: str, completion: Completion) -> None:
        """Store (or replace) the response for this call position."""
        blob = json.dumps(completion_to_dict(completion), ensure_ascii=False)
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)",
                (namespace, call_id, completion.request_hash, blob, time.time()),
            )

    # -- the money journal -----------------------------------------------------------------
    def mark_sent(
        self, namespace: str, call_id: str, purpose: str, max_cost_usd: float | None
    ) -> None:
        """Record a paid request before it goes out (write-ahead)."""
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO pending VALUES (?, ?, ?, ?, ?)",
                (namespace, call_id, purpose, time.time(), max_cost_usd),
            )

    def mark_failed(self, namespace: str, call_id: str) -> None:
        """The call failed for good: its attempts are logged as an error row, not pending."""
        with self._lock:
            self._conn.execute(
                "DELETE FROM pending WHERE namespace=? AND call_id=?", (namespace, call_id)
            )

    def commit_answer(self, namespace: str, call_id: str, completion: Completion) -> None:
        """Store the answer and end its pending entry in one transaction (its log row is
        already in ``llm_calls.jsonl``: see the module docstring)."""
        self.commit_answers(namespace, [(call_id, completion)])

    def commit_answers(self, namespace: str, answers: Sequence[tuple[str, Completion]]) -> None:
        """``commit_answer`` for several answers in one transaction (a resume restoring them)."""
        now = time.time()
        rows = [
            (
                namespace,
                call_id,
                c.request_hash,
                json.dumps(completion_to_dict(c), ensure_ascii=False),
                now,
            )
            for call_id, c in answers
        ]
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(
                    "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)", rows
                )
                self._conn.executemany(
                    "DELETE FROM pending WHERE namespace=? AND call_id=?",
                    [(namespace, call_id) for call_id, _ in answers],
                )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def stored_hash(self, namespace: str, call_id: str) -> str | None:
        """The request hash of the stored answer for this call (None: none stored)."""
        return self.stored_hashes(namespace, [call_id]).get(call_id)

    def stored_hashes(self, namespace: str, call_ids: Sequence[str]) -> dict[str, str]:
        """call_id -> request hash of the stored answer, for those of ``call_ids`` that have one
        (primary-key seeks, a few hundred ids a query)."""
        ids = list(dict.fromkeys(call_ids))
        out: dict[str, str] = {}
        with self._lock:
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                out.update(
                    self._conn.execute(
                        "SELECT call_id, request_hash FROM responses "
                        "WHERE namespace=? AND call_id IN "
                        f"({','.join('?' * len(chunk))})",
                        (namespace, *chunk),
                    ).fetchall()
                )
        return out

    def pending_sent_at(self, namespace: str) -> dict[str, float]:
        """call_id -> when it was sent, for every request of ``namespace`` still pending."""
        with self._lock:
            return {
                r[0]: float(r[1])
                for r in self._conn.execute(
                    "SELECT call_id, sent_at FROM pending WHERE namespace=?", (namespace,)
                )
            }

    def forget_pending(self, namespace: str, call_ids: Sequence[str]) -> None:
        """End pending entries whose answers are known (logged) after all."""
        with self._lock:
            self._conn.executemany(
                "DELETE FROM pending WHERE namespace=? AND call_id=?",
                [(namespace, c) for c in call_ids],
            )

    def take_in_flight(self, namespace: str) -> list[InFlight]:
        """Requests sent but never answered by an earlier process; moved to ``lost_in_flight``.

        Called once when a run resumes: those processes are gone, so these answers (if any
        were produced) will never arrive, but the provider may have billed them.
        """
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                rows = list(
                    self._conn.execute(
                        "SELECT call_id, purpose, sent_at, max_cost_usd FROM pending "
                        "WHERE namespace=?",
                        (namespace,),
                    )
                )
                self._conn.executemany(
                    "INSERT INTO lost_in_flight VALUES (?, ?, ?, ?, ?, ?)",
                    [(namespace, *r, time.time()) for r in rows],
                )
                self._conn.execute("DELETE FROM pending WHERE namespace=?", (namespace,))
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return [InFlight(*r) for r in rows]

    def lost_in_flight(self, namespace: str) -> list[InFlight]:
        """Every request found in flight at a kill, over all resumes of the run."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT call_id, purpose, sent_at, max_cost_usd FROM lost_in_flight "
                "WHERE namespace=?",
                (namespace,),
            )
            return [InFlight(*r) for r in rows]

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
