"""After a kill: make ``llm_calls.jsonl`` whole again and say what may have been billed unseen.

A paid answer and its log row are committed together in the response cache
(``ResponseCache.commit_answer``); the JSONL append comes after, so a SIGKILL between the
two leaves the row only in the cache. ``reconcile`` appends such rows on resume, so summing
``spent_usd`` over the file again gives the money spent on answers. Requests that were on
the wire at the kill (``pending`` rows) cannot be known to be unpaid: they are reported,
with an upper bound of their price, and kept for ``summary.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from speedrunner.core.atomic import append_jsonl, iter_jsonl, repair_jsonl
from speedrunner.core.llm.cache import InFlight, ResponseCache

__all__ = ["Reconciled", "reconcile", "unaccounted"]


@dataclass(frozen=True)
class Reconciled:
    restored_rows: int
    """Rows of paid answers that were in the cache but not in llm_calls.jsonl."""
    in_flight: list[InFlight]
    """Requests the killed process had sent and never saw answered."""

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
    """Append the log rows a kill kept out of ``calls_path`` and collect calls left in flight."""
    if not cache_path.exists():
        return Reconciled(0, [])
    repair_jsonl(calls_path)  # a kill may have torn the last line
    logged = {row.get("log_id") for row in iter_jsonl(calls_path)}  # ids only: ~100 bytes a call
    cache = ResponseCache(cache_path)
    try:
        restored = 0
        for log_id, row in cache.iter_logged_rows():  # streamed in pages, in commit order
            if log_id not in logged:
                append_jsonl(calls_path, json.loads(row))
                restored += 1
        return Reconciled(restored, cache.take_in_flight(namespace))
    finally:
        cache.close()


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
