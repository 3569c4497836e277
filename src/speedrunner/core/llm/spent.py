"""What a run has spent: one definition, one reader of it, one way to print it.

"Spent" is the billed cost of the run's completed calls, over every process that worked on
it: the sum of ``spent_usd`` in ``llm_calls.jsonl`` (a replay and a failed call cost 0). It
is unknown (``None``) when a paid call's price is unknown. Attempts that got no answer (a
timeout, a lost connection, a garbled body) and calls a kill left in flight may have been
billed too: the log keeps their worst case (``unknown_usd``), reported beside the spend as
``unknown_spend_usd`` and counted against the cap, never added in. The progress line, the
run-summary line, ``summary.json`` ``spent_usd``, the budget message and the report all show
this figure, printed by :func:`usd`.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CallLogTotals", "LogTotals", "usd"]


def usd(amount: float | None) -> str:
    """Dollars as every SpeedRunner line prints them: ``$0.0123``, or ``unknown``."""
    return "unknown" if amount is None else f"${amount:.4f}"


@dataclass(frozen=True)
class LogTotals:
    """Totals of the completed calls in ``llm_calls.jsonl`` (failed calls left out)."""

    calls: int = 0
    replays: int = 0
    scripted: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    priced_usd: float = 0.0
    """Sum of the known ``spent_usd``; the spend itself only when ``unpriced`` is empty."""
    unpriced: tuple[str, ...] = ()
    """Models of paid calls whose price is unknown, in order of first appearance."""
    unknown_priced_usd: float = 0.0
    """Sum of the known ``unknown_usd``: worst case of what may have been billed unanswered."""
    unknown_unpriced: bool = False
    """Some attempt that may have been billed has no price (its worst case is unknown)."""
    over_reservation: int = 0
    """Answers that cost more than their worst case (a provider billing past ``max_tokens``)."""

    @property
    def spent_usd(self) -> float | None:
        """The run's spend (rounded to a millionth of a dollar), ``None`` if a price is unknown."""
        return None if self.unpriced else round(self.priced_usd, 6)

    @property
    def unknown_usd(self) -> float | None:
        """Worst case of what may have been billed with no answer seen (``None``: unpriced)."""
        return None if self.unknown_unpriced else round(self.unknown_priced_usd, 6)

    def add(self, row: dict[str, Any]) -> LogTotals:
        """These totals with one more row of the log."""
        totals = self._add_unknown(row)
        if row.get("error") is not None:
            return totals
        return totals._add_answer(row)

    def _add_unknown(self, row: dict[str, Any]) -> LogTotals:
        unknown = row.get("unknown_usd", 0.0)
        over = int(row.get("over_reservation_usd") is not None)
        if unknown == 0.0 and not over:
            return self
        return dataclasses.replace(
            self,
            unknown_priced_usd=self.unknown_priced_usd
            + (float(unknown) if isinstance(unknown, int | float) else 0.0),
            unknown_unpriced=self.unknown_unpriced or not isinstance(unknown, int | float),
            over_reservation=self.over_reservation + over,
        )

    def _add_answer(self, row: dict[str, Any]) -> LogTotals:
        usage = row.get("usage") if isinstance(row.get("usage"), dict) else {}
        spent = row.get("spent_usd")
        scripted = bool(row.get("scripted"))
        unpriced = self.unpriced
        if not isinstance(spent, int | float) and not scripted:
            model = str(row.get("model"))
            unpriced = unpriced if model in unpriced else (*unpriced, model)
        return dataclasses.replace(
            self,
            calls=self.calls + 1,
            replays=self.replays + int(bool(row.get("cache_hit"))),
            scripted=self.scripted + int(scripted),
            tokens_in=self.tokens_in
            + _int(usage.get("input_uncached"))
            + _int(usage.get("input_cached")),
            tokens_out=self.tokens_out + _int(usage.get("output")),
            priced_usd=self.priced_usd + (float(spent) if isinstance(spent, int | float) else 0.0),
            unpriced=unpriced,
        )


class CallLogTotals:
    """Running :class:`LogTotals` of one ``llm_calls.jsonl``, read incrementally.

    Each :meth:`read` parses only the whole lines appended since the last one, so a run can ask
    after every episode and every checkpoint without rereading a log of millions of calls.
    Thread-safe (episode threads ask as they finish).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._offset = 0
        self._totals = LogTotals()
        self._lock = threading.Lock()

    def read(self) -> LogTotals:
        with self._lock:
            if not self.path.is_file():  # no call logged yet
                return self._totals
            with open(self.path, "rb") as f:
                if f.seek(0, 2) < self._offset:  # rewritten shorter (a repair): count it afresh
                    self._offset, self._totals = 0, LogTotals()
                f.seek(self._offset)
                for raw in f:
                    if not raw.endswith(b"\n"):
                        break  # a line still being written, or torn by a kill: not yet a row
                    self._offset += len(raw)
                    try:
                        row = json.loads(raw)
                    except ValueError:
                        continue
                    if isinstance(row, dict):
                        self._totals = self._totals.add(row)
            return self._totals


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
