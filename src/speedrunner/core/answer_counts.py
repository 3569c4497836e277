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

__all__ = [
    "COUNT_KEYS",
    "EFFECT_KEYS",
    "FormatCounter",
    "acted_share",
    "actor_turn_counts",
    "not_acting_warning",
    "step_effect",
]

EFFECT_KEYS = ("acted", "refused", "skill_calls")
"""The actor's turns by what they did to the env (``ActorStep.effect``): a primitive action
ran, nothing ran, a skill was called. Only the actor has them."""
COUNT_KEYS = ("turns", "ok", "repaired", "lost", "truncated", "dropped_calls", *EFFECT_KEYS)
"""``ok``: read in the exact format; ``repaired``: read only thanks to tolerance; ``lost``: no
meaning could be read from the answer's form; ``truncated``: cut at ``max_tokens``
(``finish_reason`` ``length``); ``dropped_calls``: tool calls written after a turn's first
one, which never ran (the turn itself counts as ``repaired``); then :data:`EFFECT_KEYS`."""
Counts = dict[str, dict[str, int]]
"""Role -> ``COUNT_KEYS`` counts."""
NOT_ACTING = 0.5
"""Below this share of actor turns that made the env act (or called a skill), a run says so."""


def step_effect(step: dict[str, Any]) -> str:
    """A stored step's ``effect``; derived for steps stored before the field existed."""
    effect = step.get("effect")
    if effect in ("acted", "refused", "skill_call"):
        return str(effect)
    if step.get("skill_call") is not None:
        return "skill_call"
    return "acted" if step.get("executed") else "refused"


def actor_turn_counts(steps: list[dict[str, Any]]) -> dict[str, int]:
    """One episode's actor turns by format and by effect (``COUNT_KEYS`` but ``dropped_calls``)."""
    row = {
        "turns": 0,
        "ok": 0,
        "repaired": 0,
        "lost": 0,
        "truncated": 0,
        "acted": 0,
        "refused": 0,
        "skill_calls": 0,
    }
    for step in steps:
        if not isinstance(step, dict) or "/actor/" not in str(step.get("call_id", "")):
            continue  # Voyager's action agent: counted from its iteration records
        form = step.get("answer_format", "ok")
        row["turns"] += 1
        row[form if form in ("ok", "repaired", "lost") else "ok"] += 1
        row["truncated"] += int(step.get("finish_reason") == "length")
        effect = step_effect(step)
        row["skill_calls" if effect == "skill_call" else effect] += 1
    return row


def acted_share(counts: dict[str, int]) -> float | None:
    """Share of actor turns that made the env act (a skill call counts: it runs in the env)."""
    turns = counts.get("turns", 0)
    return None if not turns else (counts.get("acted", 0) + counts.get("skill_calls", 0)) / turns


def not_acting_warning(counts: dict[str, int] | None) -> str | None:
    """The loud line for a run in which most actor turns did nothing, else ``None``."""
    share = acted_share(counts or {})
    if share is None or share >= NOT_ACTING:
        return None
    c = counts or {}
    return (
        f"only {c.get('acted', 0) + c.get('skill_calls', 0)} of {c.get('turns', 0)} actor turns "
        f"made the env act ({c.get('refused', 0)} refused: {c.get('lost', 0)} answers unreadable, "
        "the rest not valid actions); the results say little about the method: read a few "
        "answers in episodes/ (raw_text, error) and fix the prompt, the parser or the model "
        "before spending more"
    )


class FormatCounter:
    """Role -> ``COUNT_KEYS`` counts over a run's stored episodes and sleep (and Voyager
    iteration) records. summary.json is rewritten after every checkpoint, so a record already
    counted (same size and modification time: records are written once, atomically) is not
    read again."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._seen: dict[Path, tuple[tuple[int, int], Counts]] = {}

    def counts(self) -> Counts:
        files = [(p, "actor") for p in sorted((self.run_dir / "episodes").rglob("*.json"))]
        files += [
            (p, "records")
            for p in (
                *sorted((self.run_dir / "sleep").rglob("*.json")),
                *sorted((self.run_dir / "voyager" / "iterations").rglob("*.json")),
            )
        ]
        seen: dict[Path, tuple[tuple[int, int], Counts]] = {}
        for path, kind in files:
            try:
                st = path.stat()
            except OSError:
                continue
            stamp = (st.st_size, st.st_mtime_ns)
            known = self._seen.get(path)
            seen[path] = (
                known
                if known is not None and known[0] == stamp
                else (stamp, _file_counts(path, kind))
            )
        self._seen = seen  # files that went away (a quarantined episode) no longer count
        totals: Counts = {}
        for _, counts in seen.values():
            for role, row in counts.items():
                total = totals.setdefault(role, dict.fromkeys(COUNT_KEYS, 0))
                for key in COUNT_KEYS:
                    total[key] += row.get(key, 0)
        for role, row in totals.items():
            if (
                role != "actor"
            ):  # sleep records count no "ok" and no effect: derive the one, drop the other
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
    return {
        str(role): {
            key: value
            for key in COUNT_KEYS
            if isinstance(value := counts.get(key, 0), int) and not isinstance(value, bool)
        }
        for role, counts in record.items()
        if isinstance(counts, dict)
    }


def _read(path: Path) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return {}  # written atomically; a damaged file is another module's report to make
    return data if isinstance(data, dict) else {}
