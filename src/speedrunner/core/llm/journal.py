"""On resume: make the response cache agree with ``llm_calls.jsonl`` again, repair what a
kill or a damaged disk left, and log what may have been billed unseen.

``llm_calls.jsonl`` is the run's one durable log of calls, and the source of truth. A paid
answer's row is written (and fsynced) there first, then the answer is stored in the response
cache in the same transaction as the end of its ``pending`` row (``ManagedModel._call``). A
SIGKILL between the two leaves the answer only in the log: ``reconcile`` stores it back in the
cache, so the resumed run replays it instead of paying for it again. Requests that were on
the wire at the kill (``pending`` rows with no logged answer) cannot be known to be unpaid:
each gets a row in the log (``in_flight_at_kill``, ``unknown_usd`` its worst case), so every
later process counts it against the cap.

Damage is repaired, never a traceback: a missing or unreadable cache is moved aside and
rebuilt from the log; damaged log lines are moved to a side file (``core.llm.log_repair``)
and answers whose rows they were are written back from the cache with their spend.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speedrunner.core.atomic import append_jsonl, iter_jsonl
from speedrunner.core.llm.accounting import answer_from_row, records_answer
from speedrunner.core.llm.cache import InFlight, ResponseCache
from speedrunner.core.llm.log_repair import move_damaged_lines, restore_rows
from speedrunner.core.llm.types import Completion

__all__ = ["Reconciled", "reconcile", "unaccounted"]

KILL_ERROR = "in flight when a process of the run was killed: the provider may have billed it"


@dataclass(frozen=True)
class Reconciled:
    in_flight: list[InFlight]
    """Requests the killed process had sent and never saw answered."""
    restored_answers: int = 0
    """Answers logged in llm_calls.jsonl that a kill kept out of the cache (now stored)."""
    repairs: list[str] = field(default_factory=list)
    """One line per repair of damage (a rebuilt cache, damaged log lines moved aside)."""

    def message(self) -> str | None:
        """What to tell the user, or None when nothing needed saying."""
        lines = list(self.repairs)
        if self.in_flight:
            bounds = [c.max_cost_usd for c in self.in_flight]
            bound = (
                "unknown (no price)" if any(b is None for b in bounds) else f"${sum(bounds):.4f}"
            )
            lines.append(
                f"{len(self.in_flight)} call(s) were in flight when the run was killed; the "
                f"provider may have billed them (at most {bound}). They are listed under "
                "'unaccounted' in summary.json and counted in unknown_spend_usd; their answers "
                "are asked again."
            )
        return "\n".join(lines) or None


def reconcile(cache_path: Path, calls_path: Path, namespace: str) -> Reconciled:
    """Repair damage, store back the answers a kill kept out of the cache, and log the calls
    left in flight.

    One pass over the log, a row at a time (memory bounded by a batch of rows, not by the
    run): the answer rows are checked against the cache by primary key, 500 a query, and
    missing answers are stored a batch at a time. A damaged log costs one more pass.
    """
    repairs: list[str] = []
    damage = move_damaged_lines(calls_path)
    if not cache_path.exists() and not _has_rows(calls_path):
        return Reconciled([], repairs=[m for m in [damage.message(calls_path, 0)] if m])
    cache, rebuild = _open_cache(cache_path)
    rebuilt = rebuild is not None
    try:
        pending = cache.pending_sent_at(namespace)
        answered: list[str] = []
        kills: list[InFlight] = []
        stored_back = 0

        def check(batch: list[dict[str, Any]]) -> None:
            nonlocal stored_back
            stored = cache.stored_hashes(namespace, [str(r["call_id"]) for r in batch])
            missing: dict[str, Completion] = {}
            for row in batch:  # in log order: the last logged answer of a call wins
                call_id = str(row["call_id"])
                if call_id in pending and float(row.get("ts") or 0.0) >= pending[call_id]:
                    answered.append(call_id)  # its answer was logged: it is not in flight
                if stored.get(call_id) != row["request_hash"]:
                    missing[call_id] = answer_from_row(row)  # type: ignore[assignment]
                else:
                    missing.pop(call_id, None)
            if missing:
                cache.commit_answers(namespace, list(missing.items()))
                stored_back += len(missing)

        batch: list[dict[str, Any]] = []
        for row in iter_jsonl(calls_path):
            if row.get("namespace") != namespace:
                continue
            if row.get("in_flight_at_kill") is not None:
                kills.append(_kill_from_row(row))
            elif records_answer(row):
                batch.append(row)
                if len(batch) == 500:
                    check(batch)
                    batch = []
        check(batch)
        cache.forget_pending(namespace, answered)
        if damage.lines:
            restored_rows = restore_rows(calls_path, cache, namespace)
            repairs.append(damage.message(calls_path, restored_rows) or "")
        in_flight = cache.take_in_flight(namespace)
        _sync_kills(cache, calls_path, namespace, kills, rebuilt)
        if rebuilt:
            repairs.append(
                f"{rebuild}: rebuilt from {calls_path.name} ({stored_back} logged answer(s) "
                "stored for replay; none is paid again)"
            )
        return Reconciled(
            in_flight, restored_answers=0 if rebuilt else stored_back, repairs=repairs
        )
    finally:
        cache.close()


def _has_rows(calls_path: Path) -> bool:
    return calls_path.is_file() and calls_path.stat().st_size > 0


def _open_cache(cache_path: Path) -> tuple[ResponseCache, str | None]:
    """The cache, and why it is a new one to rebuild from the log (None: it reads fine). An
    unreadable cache is moved aside, never deleted."""
    if not cache_path.exists():
        return ResponseCache(cache_path), f"{cache_path.name} was missing"
    problem: str | None
    try:
        cache = ResponseCache(cache_path)
        problem = cache.check()
    except sqlite3.DatabaseError as e:
        problem = str(e)
    else:
        if problem is None:
            return cache, None
        cache.close()
    aside = cache_path.with_name(f"{cache_path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
    for suffix in ("", "-wal", "-shm"):
        part = cache_path.with_name(cache_path.name + suffix)
        if part.exists():
            part.rename(aside.with_name(aside.name + suffix))
    problem = " ".join(problem.split())[:200]
    return ResponseCache(
        cache_path
    ), f"{cache_path.name} was unreadable ({problem}; moved to {aside.name})"


def _kill_from_row(row: dict[str, Any]) -> InFlight:
    sent_at = row.get("in_flight_at_kill")
    bound = row.get("unknown_usd")
    return InFlight(
        str(row.get("call_id")),
        str(row.get("purpose")),
        float(sent_at) if isinstance(sent_at, int | float) else 0.0,
        float(bound) if isinstance(bound, int | float) else None,
    )


def _sync_kills(
    cache: ResponseCache, calls_path: Path, namespace: str, logged: list[InFlight], rebuilt: bool
) -> None:
    """Calls found in flight at kills are in both the log (what the cap counts) and the
    cache's ``lost_in_flight`` (summary.json's ``unaccounted``): each gets what it lacks."""
    in_log = {(c.call_id, c.sent_at) for c in logged}
    for c in cache.lost_in_flight(namespace):
        if (c.call_id, c.sent_at) not in in_log:
            append_jsonl(calls_path, _kill_row(namespace, c))
            in_log.add((c.call_id, c.sent_at))
    if rebuilt and logged:
        cache.add_lost_in_flight(namespace, logged)


def _kill_row(namespace: str, c: InFlight) -> dict[str, Any]:
    """The log's record of a call in flight at a kill: nothing spent, ``unknown_usd`` its worst
    case."""
    return {
        "ts": time.time(),
        "namespace": namespace,
        "purpose": c.purpose,
        "call_id": c.call_id,
        "response": None,
        "usage": {"input_uncached": 0, "input_cached": 0, "output": 0, "reasoning": 0},
        "cost_usd": None,
        "spent_usd": 0.0,
        "unknown_usd": c.max_cost_usd,
        "cache_hit": False,
        "scripted": False,
        "attempts": 0,
        "error": KILL_ERROR,
        "log_id": None,
        "in_flight_at_kill": c.sent_at,
    }


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
