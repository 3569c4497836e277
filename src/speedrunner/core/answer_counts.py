"""How a run's answers were read, per role, summed from what the run stored.

Each actor step records ``answer_format`` (``ok`` / ``repaired`` / ``lost``) and
``finish_reason``; each sleep record (``sleep/**/*.json``) that read answers, and each
Voyager iteration record (``voyager/iterations/<world>/<k>.json``: its curriculum, action
agent and critic turns), holds a ``format`` object, role -> counts, written by
``core.answers.FormatTally``. Summing the files,
not counters kept in memory, makes the figure the same after a resume, and a run stored
before these fields existed simply counts nothing for them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["COUNT_KEYS", "format_counts"]

COUNT_KEYS = ("turns", "repaired", "lost", "truncated", "dropped_calls")
"""``repaired``: read only thanks to tolerance; ``lost``: no meaning could be read from the
answer's form; ``truncated``: cut at ``max_tokens`` (``finish_reason`` ``length``);
``dropped_calls``: tool calls written after a turn's first one, which never ran (the turn
itself counts as ``repaired``)."""


def format_counts(run_dir: Path) -> dict[str, dict[str, int]]:
    """Role -> counts (``COUNT_KEYS``) over every stored episode and sleep record of the run."""
    totals: dict[str, dict[str, int]] = {}

    def add(role: str, counts: dict[str, Any]) -> None:
        row = totals.setdefault(role, dict.fromkeys(COUNT_KEYS, 0))
        for key in COUNT_KEYS:
            value = counts.get(key, 0)
            row[key] += value if isinstance(value, int) and not isinstance(value, bool) else 0

    for path in sorted((run_dir / "episodes").rglob("*.json")):
        data = _read(path)
        for step in data.get("steps") or []:
            if not isinstance(step, dict) or "/actor/" not in str(step.get("call_id", "")):
                continue  # Voyager's action agent: counted from its iteration records
            form = step.get("answer_format", "ok")
            add("actor", {"turns": 1, "repaired": int(form == "repaired"), "lost": int(form == "lost"),
                          "truncated": int(step.get("finish_reason") == "length")})
    records = [*sorted((run_dir / "sleep").rglob("*.json")), *sorted((run_dir / "voyager" / "iterations").rglob("*.json"))]
    for path in records:
        record = _read(path).get("format")
        if isinstance(record, dict):
            for role, counts in record.items():
                if isinstance(counts, dict):
                    add(str(role), counts)
    return dict(sorted(totals.items()))


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}  # written atomically; a damaged file is another module's report to make
    return data if isinstance(data, dict) else {}
