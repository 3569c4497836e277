"""Damage in ``llm_calls.jsonl`` found on resume: moved aside, never a traceback, never lost.

A line that is not a JSON object (a flipped byte, a torn tail) is cut from the log and
appended, as it was, to ``llm_calls.jsonl.damaged`` beside it; the log is rewritten without
it (through a temporary file and a rename, so a crash leaves the old log or the new one).
A paid answer whose row was damaged is still in the response cache (the row is written
first, so a row whose answer reached the cache was whole once): :func:`restore_rows` writes
its row back from there, spend included, so "spent" loses nothing and the call is replayed.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speedrunner.core.atomic import append_jsonl, iter_jsonl
from speedrunner.core.llm.accounting import records_answer
from speedrunner.core.llm.cache import ResponseCache
from speedrunner.core.llm.types import Completion

__all__ = ["LogDamage", "move_damaged_lines", "restore_rows"]

DAMAGED_SUFFIX = ".damaged"


@dataclass
class LogDamage:
    """What :func:`move_damaged_lines` cut from the log."""

    lines: list[int] = field(default_factory=list)
    """1-based numbers of the damaged lines (a torn last line included)."""
    side_file: Path | None = None

    def message(self, log: Path, restored: int) -> str | None:
        """One line: what was moved aside, and how many answers came back from the cache."""
        if not self.lines:
            return None
        shown = ", ".join(map(str, self.lines[:5])) + (" ..." if len(self.lines) > 5 else "")
        return (
            f"{log.name}: {len(self.lines)} damaged line(s) (line {shown}) moved to "
            f"{self.side_file}; {restored} answer row(s) restored from the response cache, "
            "with their spend"
        )


def move_damaged_lines(log: Path) -> LogDamage:
    """Cut every line that is not a JSON object from ``log``; keep them in the side file."""
    damage = LogDamage()
    if not log.is_file():
        return damage
    with open(log, "rb") as f:  # a first pass finds damage: a clean log is never rewritten
        bad = [n for n, raw in enumerate(f, 1) if not _is_row(raw)]
    if not bad:
        return damage
    side = log.with_name(log.name + DAMAGED_SUFFIX)
    tmp = log.with_name(f".{log.name}.{uuid.uuid4().hex}.tmp")
    bad_set = set(bad)
    with open(log, "rb") as src, open(tmp, "wb") as good, open(side, "ab") as aside:
        for n, raw in enumerate(src, 1):
            if n in bad_set:
                aside.write(raw if raw.endswith(b"\n") else raw + b"\n")
            else:
                good.write(raw)
        for out in (good, aside):
            out.flush()
            os.fsync(out.fileno())
    os.replace(tmp, log)
    damage.lines, damage.side_file = bad, side
    return damage


def _is_row(raw: bytes) -> bool:
    if not raw.strip():
        return True  # a blank line is harmless
    if not raw.endswith(b"\n"):
        return False  # torn by a kill, or cut
    try:
        return isinstance(json.loads(raw), dict)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError
        return False


def restore_rows(log: Path, cache: ResponseCache, namespace: str) -> int:
    """Append a row for every answer of ``namespace`` the cache holds and the log lacks (its
    row was damaged); returns how many. Each restored row bills the answer's cost, as the
    lost row did, and says where it came from (``restored``)."""
    logged = {
        str(r.get("call_id")): r.get("request_hash")
        for r in iter_jsonl(log)
        if r.get("namespace") == namespace and records_answer(r)
    }
    restored = 0
    for call_id, completion in cache.iter_responses(namespace):
        if logged.get(call_id) != completion.request_hash:
            append_jsonl(log, _row(namespace, call_id, completion))
            restored += 1
    return restored


def _row(namespace: str, call_id: str, c: Completion) -> dict[str, Any]:
    """A log row for an answer known only from the cache (the fields of ``CallRecord``)."""
    usage = c.usage
    return {
        "ts": time.time(),
        "namespace": namespace,
        "purpose": _purpose(call_id),
        "call_id": call_id,
        "provider": c.provider,
        "model": c.model,
        "endpoint": None,
        "request_hash": c.request_hash,
        "messages_sha256": None,
        "n_messages": None,
        "last_message": None,
        "response": c.text,
        "reasoning": c.reasoning,
        "usage": {
            "input_uncached": usage.input_uncached,
            "input_cached": usage.input_cached,
            "output": usage.output,
            "reasoning": usage.reasoning,
        },
        "cost_usd": c.cost_usd,
        "spent_usd": 0.0 if c.scripted else c.cost_usd,
        "latency_s": c.latency_s,
        "cache_hit": False,
        "scripted": c.scripted,
        "finish_reason": c.finish_reason,
        "empty": not c.text.strip() and not c.tool_calls,
        "truncated": c.finish_reason in ("length", "max_tokens"),
        "sampling": dict(c.sampling),
        "attempts": 1,
        "error": None,
        "log_id": uuid.uuid4().hex,
        **(
            {
                "tool_calls": [
                    {
                        "id": t.id,
                        "name": t.name,
                        "arguments": t.arguments,
                        **({"signature": t.signature} if t.signature else {}),
                    }
                    for t in c.tool_calls
                ]
            }
            if c.tool_calls
            else {}
        ),
        "restored": "from llm_cache.sqlite: the row in llm_calls.jsonl was damaged",
    }


_PURPOSES = ("actor", "inducer", "guide", "curriculum", "critic", "description")


def _purpose(call_id: str) -> str:
    """The purpose a call id names (e.g. ``train/000012/actor/0003``); ``actor`` otherwise."""
    return next((p for p in call_id.split("/") if p in _PURPOSES), "actor")
