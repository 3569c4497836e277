"""A long run's calls cost what its first calls cost: the cache's per-call work does not grow
with the calls already logged (issue #33).

Work is counted in SQLite virtual-machine steps (``set_progress_handler``), not in seconds, so
the test says the same thing on a slow or a loaded machine: a commit that scans a table runs
one step per stored row or more; one that touches only its own rows runs a handful.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from speedrunner.core.llm.cache import ResponseCache
from speedrunner.core.llm.types import Completion, Usage


def _fill(path: Path, rows: int) -> None:
    """A cache that already holds ``rows`` paid answers (written in bulk, as a long run would
    have left them)."""
    ResponseCache(path).close()  # the schema, as the code under test lays it out
    with sqlite3.connect(path) as conn:
        conn.executemany(
            "INSERT INTO responses VALUES (?, ?, ?, ?, ?)",
            (
                ("run", f"old{i}", f"h{i}", json.dumps({"text": "x" * 900}), 0.0)
                for i in range(1, rows + 1)
            ),
        )


def _answer(i: int) -> Completion:
    return Completion(
        text=f"answer {i}", usage=Usage(input_uncached=10, output=5), request_hash=f"h{i}"
    )


def _commit_steps(cache: ResponseCache, i: int) -> int:
    """VM steps of one ``commit_answer`` (a write-ahead ``pending`` row first, as a paid call
    has)."""
    cache.mark_sent("run", f"new{i}", "actor", 0.01)
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    cache._conn.set_progress_handler(count, 1)
    try:
        cache.commit_answer("run", f"new{i}", _answer(i))
    finally:
        cache._conn.set_progress_handler(None, 1)
    return steps[0]


def test_commit_work_does_not_grow_with_the_log(tmp_path: Path) -> None:
    steps = {}
    for rows in (1_000, 50_000):
        path = tmp_path / f"c{rows}.sqlite"
        _fill(path, rows)
        cache = ResponseCache(path)
        try:
            steps[rows] = max(_commit_steps(cache, i) for i in range(3))
            assert [cache.stored_hash("run", f"new{i}") for i in range(3)] == ["h0", "h1", "h2"]
            assert cache.pending_sent_at("run") == {}
        finally:
            cache.close()
    # a scan takes >= 50,000 steps at 50,000 rows; a primary-key seek grows like log2(rows)
    assert steps[50_000] <= steps[1_000] * 1.2 + 20, steps
