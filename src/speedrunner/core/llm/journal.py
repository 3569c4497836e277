"""After a kill: make the response cache agree with ``llm_calls.jsonl`` again, and say what may
have been billed unseen.

``llm_calls.jsonl`` is the run's one durable log of calls. A paid answer's row is written
(and fsynced) there first, then the answer is stored in the response cache in the same
transaction as the end of its ``pending`` row (``ManagedModel._call``). A SIGKILL between
the two leaves the answer only in the log: ``reconcile`` stores it back in the cache, so the
resumed run replays it instead of paying for it again. Requests that were on the wire at the
kill (``pending`` rows with no logged answer) cannot be known to be unpaid: they are
reported, with an upper bound of their price, and kept for ``summary.json``.

A cache written by the old layout (before issue #33) committed each paid row to its
``call_log`` table before the JSONL append; such rows missing from the file are appended.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speedrunner.core.atomic import append_jsonl, iter_jsonl, repair_jsonl
from speedrunner.core.llm.accounting import answer_from_row, records_answer
from speedrunner.core.llm.cache import InFlight, ResponseCache
from speedrunner.core.llm.types import Completion

__all__ = ["Reconciled", "reconcile", "unaccounted"]


@dataclass(frozen=True)
class Reconciled:
    restored_rows: int
    """Rows of paid answers that were in the cache but not in llm_calls.jsonl (old layout)."""
    in_flight: list[InFlight]
    """Requests the killed process had sent and never saw answered."""
    restored_answers: int = 0
    """Answers logged in llm_calls.jsonl that a kill kept out of the cache (now stored)."""

    def message(self) -> str | None:
        """What to tell the user, or None when the kill cost nothing unseen."""
        if not self.in_flight:
            return None
        bounds = [c.max_cost_usd for c in self.in_flight]
        bound = "unknown (no price)" if any(b is None for b in bounds) else f"${sum(bounds):.4f}"
        return (f"{len(self.in_flight)} call(s) were in flight when the run was killed; the provider "
                f"may have billed them (at most {bound}). They are listed under 'unaccounted' in "
                "summary.json; their answers are asked again.")


def reconcile(cache_path: Path, calls_path: Path, namespace: str) -> Reconciled:
    """Store back the answers a kill kept out of the cache, append the rows an old-layout
    cache kept out of ``calls_path``, and collect calls left in flight.

    One pass over the log, a row at a time (memory bounded by a batch of rows and the
    answers missing, not by the run): the answer rows are checked against the cache by
    primary key, 500 a query.
    """
    if not cache_path.exists():
        return Reconciled(0, [])
    repair_jsonl(calls_path)  # a kill may have torn the last line
    cache = ResponseCache(cache_path)
    try:
        restored = _append_legacy_rows(cache, calls_path) if cache.logged_count() else 0
        pending = cache.pending_sent_at(namespace)
        answered: list[str] = []
        missing: dict[str, Completion] = {}

        def check(batch: list[dict[str, Any]]) -> None:
            stored = cache.stored_hashes(namespace, [str(r["call_id"]) for r in batch])
            for row in batch:  # in log order: the last logged answer of a call wins
                call_id = str(row["call_id"])
                if call_id in pending and float(row.get("ts") or 0.0) >= pending[call_id]:
                    answered.append(call_id)  # its answer was logged: it is not in flight
                if stored.get(call_id) != row["request_hash"]:
                    missing[call_id] = answer_from_row(row)  # type: ignore[assignment]
                else:
                    missing.pop(call_id, None)

        batch: list[dict[str, Any]] = []
        for row in iter_jsonl(calls_path):
            if row.get("namespace") == namespace and records_answer(row):
                batch.append(row)
                if len(batch) == 500:
                    check(batch)
                    batch = []
        check(batch)
        if missing:
            cache.commit_answers(namespace, list(missing.items()))
        cache.forget_pending(namespace, answered)
        return Reconciled(restored, cache.take_in_flight(namespace), restored_answers=len(missing))
    finally:
        cache.close()


def _append_legacy_rows(cache: ResponseCache, calls_path: Path) -> int:
    """Old layout: rows committed to ``call_log`` but not appended to the file."""
    logged = {row.get("log_id") for row in iter_jsonl(calls_path)}  # ids only: ~100 bytes a call
    restored = 0
    for log_id, row in cache.iter_logged_rows():  # streamed in pages, in commit order
        if log_id not in logged:
            append_jsonl(calls_path, json.loads(row))
            restored += 1
    return restored


def unaccounted(cache_path: Path, namespace: str) -> dict[str, object]:
    """For summary.json: calls found in flight at kills over the run's life, and their bound."""
    if not cache_path.exists():
        return {"calls_in_flight_at_kills": 0, "max_usd": 0.0}
    cache = ResponseCache(cache_path)
    try:
        lost = cache.lost_in_flight(namespace)
    finally:
        cache.close()
    bounds = [c.max_cost_usd for c in lost]
    return {
        "calls_in_flight_at_kills": len(lost),
        "max_usd": None if any(b is None for b in bounds) else round(sum(bounds), 6),
        "note": "requests on the wire when a process was killed: they may have been billed; "
                "max_usd counts every input byte as a token and all of max_tokens as output",
    }
