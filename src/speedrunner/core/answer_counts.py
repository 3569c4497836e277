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

__all__ = ["COUNT_KEYS", "EFFECT_KEYS", "acted_share", "actor_turn_counts", "format_counts", "not_acting_warning",
           "step_effect"]

EFFECT_KEYS = ("acted", "refused", "skill_calls")
"""The actor's turns by what they did to the env (``ActorStep.effect``): a primitive action
ran, nothing ran, a skill was called. Only the actor has them."""
COUNT_KEYS = ("turns", "ok", "repaired", "lost", "truncated", "dropped_calls", *EFFECT_KEYS)
"""``ok``: read in the exact format; ``repaired``: read only thanks to tolerance; ``lost``: no
meaning could be read from the answer's form; ``truncated``: cut at ``max_tokens``
(``finish_reason`` ``length``); ``dropped_calls``: tool calls written after a turn's first
one, which never ran (the turn itself counts as ``repaired``); then :data:`EFFECT_KEYS`."""
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
    row = {"turns": 0, "ok": 0, "repaired": 0, "lost": 0, "truncated": 0, "acted": 0, "refused": 0, "skill_calls": 0}
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
    return (f"only {c.get('acted', 0) + c.get('skill_calls', 0)} of {c.get('turns', 0)} actor turns made the env act "
            f"({c.get('refused', 0)} refused: {c.get('lost', 0)} answers unreadable, the rest not valid actions); "
            "the results say little about the method: read a few answers in episodes/ (raw_text, error) and fix "
            "the prompt, the parser or the model before spending more")


def format_counts(run_dir: Path) -> dict[str, dict[str, int]]:
    """Role -> counts (``COUNT_KEYS``) over every stored episode and sleep record of the run."""
    totals: dict[str, dict[str, int]] = {}

    def add(role: str, counts: dict[str, Any]) -> None:
        row = totals.setdefault(role, dict.fromkeys(COUNT_KEYS, 0))
        for key in COUNT_KEYS:
            value = counts.get(key, 0)
            row[key] += value if isinstance(value, int) and not isinstance(value, bool) else 0

    for path in sorted((run_dir / "episodes").rglob("*.json")):
        row = actor_turn_counts(_read(path).get("steps") or [])
        if row["turns"]:
            add("actor", row)
    records = [*sorted((run_dir / "sleep").rglob("*.json")), *sorted((run_dir / "voyager" / "iterations").rglob("*.json"))]
    for path in records:
        record = _read(path).get("format")
        if isinstance(record, dict):
            for role, counts in record.items():
                if isinstance(counts, dict):
                    add(str(role), counts)
    for role, row in totals.items():
        if role != "actor":  # sleep records count no "ok" and no effect: derive the one, drop the other
            row["ok"] = max(0, row["turns"] - row["repaired"] - row["lost"])
            for key in EFFECT_KEYS:
                row.pop(key, None)
    return dict(sorted(totals.items()))


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}  # written atomically; a damaged file is another module's report to make
    return data if isinstance(data, dict) else {}
