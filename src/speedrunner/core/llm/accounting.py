"""Usage and cost accounting: one ``llm_calls.jsonl`` row per call, and running totals.

The log is what ``reporting`` reads, so its fields are a stable interface (documented in
``CallRecord``). Money is split in two on purpose: ``cost_usd`` is what the response cost
when it was generated (kept on replay, so an episode's cost is the same whether or not it
was resumed), ``spent_usd`` is what *this* call newly cost (0 for a replay). Summing
``spent_usd`` over the file gives the money actually spent; summing ``cost_usd`` over
non-replayed rows gives the same number.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speedrunner.core.llm.conversation import as_conversation
from speedrunner.core.llm.types import Completion, Message, ToolUse, Usage
from speedrunner.core.redact import scrub_json

__all__ = [
    "CallLog",
    "CallRecord",
    "LLMTotals",
    "Tally",
    "answer_from_row",
    "messages_digest",
    "records_answer",
]


def messages_digest(messages: Sequence[Message]) -> str:
    """sha256 of the conversation (roles and contents), to match log rows without storing
    prompts: sha256 over ``role NUL content SOH`` for each message in order."""
    return as_conversation(messages).digest()


@dataclass
class CallRecord:
    """One row of ``llm_calls.jsonl``."""

    ts: float
    """Unix time the call finished."""
    namespace: str
    """Run id the call belongs to (the cache namespace)."""
    purpose: str
    call_id: str
    provider: str
    model: str
    endpoint: str | None
    """Where the final attempt went (None for a replay)."""
    request_hash: str
    """sha256 of the canonical request (provider, model, messages, sampling, thinking)."""
    messages_sha256: str
    n_messages: int
    last_message: str | None
    """Content of the newest message (the new observation / question); the full prompt only
    when the model was built with ``log_full_messages=True`` (field ``messages``)."""
    response: str | None
    reasoning: str | None
    usage: dict[str, int]
    """input_uncached, input_cached, output (reasoning included), reasoning."""
    cost_usd: float | None
    """What this response cost when generated (None: price unknown; 0.0: scripted)."""
    spent_usd: float | None
    """What this call newly cost: 0.0 for a replay, else ``cost_usd``."""
    latency_s: float
    cache_hit: bool
    scripted: bool
    finish_reason: str | None
    empty: bool
    """The response text is empty (e.g. a thinking model ran out of tokens)."""
    truncated: bool
    """finish_reason was "length": the answer may be cut off."""
    sampling: dict[str, Any]
    attempts: int
    """Provider attempts made (0 for a replay)."""
    error: str | None = None
    """Set when the call failed for good (then response is None and LLMError was raised)."""
    log_id: str | None = None
    """Unique id of an answer's row (None for a replay or a failure)."""
    messages: list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, str]] | None = None
    """Native tool calls of the answer (id, name, arguments as the model wrote them, and
    Gemini's ``signature`` when it sent one); None under the text protocol, where the call
    is in ``response``."""
    tools_offered: list[str] | None = None
    """Names of the tools sent with the request (native protocol only; their definitions
    count as input tokens)."""
    unknown_usd: float | None = 0.0
    """Worst case of this call's attempts that got no answer (timed out, lost the connection,
    garbled) and may have been billed: counted against the cap, shown apart from ``spent_usd``
    (None: the price is unknown). Written only when not 0."""
    over_reservation_usd: float | None = None
    """By how much the answer cost more than its worst case (every input byte a token and all
    of ``max_tokens``): the provider billed past the limit. Written only when it happened."""


class CallLog:
    """Appends rows to ``llm_calls.jsonl``, the run's one durable log of calls (whole lines;
    one writer lock per file).

    A paid answer's row is written here *before* the answer is stored in the response cache
    (``ManagedModel._call``): the row holds the whole answer, so a kill between the two is
    repaired on resume from this file (``journal.reconcile``) and the call is replayed, not
    paid twice. A row that records money (or an unknown price) or a failure is fsynced: one
    fsync per paid call, and nothing else durable per call. A row that spent nothing (a
    replay, a scripted answer, a free model) is only written: a resume that replays 100,000
    calls must not wait for 100,000 fsyncs. A kill, SIGKILL included, loses no written line
    either way (it is in the OS's page cache).
    """

    _locks: dict[Path, threading.Lock] = {}
    _locks_guard = threading.Lock()

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)  # once, not once per call
        with CallLog._locks_guard:
            self._lock = CallLog._locks.setdefault(self.path.resolve(), threading.Lock())

    @staticmethod
    def row(record: CallRecord) -> dict[str, Any]:
        """The JSON row for ``record`` (no ``messages`` key unless full prompts are logged)."""
        row = {
            f.name: getattr(record, f.name) for f in dataclasses.fields(record)
        }  # scrub_json copies
        for key in ("messages", "tool_calls", "tools_offered", "over_reservation_usd"):
            if row[key] is None:  # rows stay as before when unused
                del row[key]
        if row["unknown_usd"] == 0.0:
            del row["unknown_usd"]
        return scrub_json(row)

    def append(self, record: CallRecord | dict[str, Any]) -> None:
        row = record if isinstance(record, dict) else self.row(record)
        line = (json.dumps(row, default=str) + "\n").encode("utf-8")
        spent = row.get("spent_usd")
        with self._lock, open(self.path, "ab") as f:
            f.write(line)  # one write of the whole line
            if row.get("error") or spent is None or spent > 0 or row.get("unknown_usd", 0.0) != 0.0:
                f.flush()
                os.fsync(f.fileno())


def records_answer(row: dict[str, Any]) -> bool:
    """The row is of a call made for real that got an answer (not a replay, a failure or an
    embedding request)."""
    return not row.get("cache_hit") and row.get("error") is None and row.get("response") is not None


def answer_from_row(row: dict[str, Any]) -> Completion | None:
    """The answer a row of a call made for real records (None for a replay or a failure):
    what a resume stores back in the response cache when a kill came between the row and
    the cache's commit. Secrets were scrubbed from the row (``core.redact``), so an answer
    that quoted one comes back with the placeholder instead."""
    if not records_answer(row):
        return None
    return Completion(
        text=row["response"],
        reasoning=row.get("reasoning"),
        usage=Usage(**row.get("usage") or {}),
        latency_s=float(row.get("latency_s") or 0.0),
        finish_reason=row.get("finish_reason"),
        provider=row.get("provider") or "",
        model=row.get("model") or "",
        scripted=bool(row.get("scripted")),
        cost_usd=row.get("cost_usd"),
        request_hash=row["request_hash"],
        sampling=dict(row.get("sampling") or {}),
        tool_calls=tuple(ToolUse(**t) for t in row.get("tool_calls") or ()),
    )


@dataclass(frozen=True)
class LLMTotals:
    """Snapshot of a model's running totals, for progress display."""

    calls: int = 0
    """Completed calls, replays included."""
    replayed: int = 0
    failed: int = 0
    scripted: int = 0
    usage: Usage = field(default_factory=Usage)
    """Tokens of all completed calls, replays included (what the run consumed)."""
    usage_new: Usage = field(default_factory=Usage)
    """Tokens of calls made in this process (replays excluded)."""
    spent_usd: float = 0.0
    """Money newly spent in this process, over calls with a known price."""
    replayed_usd: float = 0.0
    """Original cost of the replayed responses (paid before)."""
    unknown_cost_calls: int = 0
    """Calls whose price is unknown; when > 0, ``spent_usd`` is a lower bound."""


class Tally:
    """Thread-safe accumulator behind ``ManagedModel.totals()``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._t = LLMTotals()

    def add(self, c: Completion) -> None:
        with self._lock:
            t = self._t
            unknown = c.cost_usd is None and not c.cached
            self._t = dataclasses.replace(
                t,
                calls=t.calls + 1,
                replayed=t.replayed + int(c.cached),
                scripted=t.scripted + int(c.scripted),
                usage=t.usage + c.usage,
                usage_new=t.usage_new if c.cached else t.usage_new + c.usage,
                spent_usd=t.spent_usd + (0.0 if c.cached or c.cost_usd is None else c.cost_usd),
                replayed_usd=t.replayed_usd + ((c.cost_usd or 0.0) if c.cached else 0.0),
                unknown_cost_calls=t.unknown_cost_calls + int(unknown),
            )

    def add_failure(self) -> None:
        with self._lock:
            self._t = dataclasses.replace(self._t, failed=self._t.failed + 1)

    def snapshot(self) -> LLMTotals:
        with self._lock:
            return self._t
