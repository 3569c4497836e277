"""summary.json's ``format`` counts kept up to date cheaply: each stored record is read once.

``answer_counts.format_counts`` sums every episode and sleep record of a run. summary.json is
rewritten after every checkpoint, and rereading a long run's records each time (hundreds of MB
for Crafter) would make each checkpoint cost more than the last. Records are written once,
atomically, so a file already counted (same size and modification time) is not read again;
the sum is the one ``format_counts`` makes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from speedrunner.core.answer_counts import COUNT_KEYS, EFFECT_KEYS, actor_turn_counts

__all__ = ["Counts", "FormatCounter"]

Counts = dict[str, dict[str, int]]
"""Role -> ``COUNT_KEYS`` counts."""


class FormatCounter:
    """Role -> answer counts over a run's stored episodes and sleep (and Voyager iteration)
    records, as ``answer_counts.format_counts`` gives them, reading only new or changed files."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._seen: dict[Path, tuple[tuple[int, int], Counts]] = {}

    def counts(self) -> Counts:
        files = [(p, "actor") for p in sorted((self.run_dir / "episodes").rglob("*.json"))]
        files += [(p, "records") for p in (*sorted((self.run_dir / "sleep").rglob("*.json")),
                                           *sorted((self.run_dir / "voyager" / "iterations").rglob("*.json")))]
        seen: dict[Path, tuple[tuple[int, int], Counts]] = {}
        for path, kind in files:
            try:
                st = path.stat()
            except OSError:
                continue
            stamp = (st.st_size, st.st_mtime_ns)
            known = self._seen.get(path)
            seen[path] = known if known is not None and known[0] == stamp else (stamp, _file_counts(path, kind))
        self._seen = seen  # files that went away (a quarantined episode) no longer count
        totals: Counts = {}
        for _, counts in seen.values():
            for role, row in counts.items():
                total = totals.setdefault(role, dict.fromkeys(COUNT_KEYS, 0))
                for key in COUNT_KEYS:
                    total[key] += row.get(key, 0)
        for role, row in totals.items():
            if role != "actor":  # sleep records count no "ok" and no effect: derive the one, drop the other
                row["ok"] = max(0, row["turns"] - row["repaired"] - row["lost"])
                for key in EFFECT_KEYS:
                    row.pop(key, None)
        return dict(sorted(totals.items()))


def _file_counts(path: Path, kind: str) -> Counts:
    data = _read(path)
    if kind == "actor":
        row = actor_turn_counts(data.get("steps") or [])
        return {"actor": row} if row["turns"] else {}
    record = data.get("format")
    if not isinstance(record, dict):
        return {}
    return {str(role): {key: value for key in COUNT_KEYS
                        if isinstance(value := counts.get(key, 0), int) and not isinstance(value, bool)}
            for role, counts in record.items() if isinstance(counts, dict)}


def _read(path: Path) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return {}  # written atomically; a damaged file is another module's report to make
    return data if isinstance(data, dict) else {}

