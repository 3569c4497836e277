"""The run's spend read from llm_calls.jsonl: whole rows once, failures left out, unknown prices
unknown."""

from __future__ import annotations

import json
from pathlib import Path

from speedrunner.core.llm.spent import CallLogTotals, usd


def _row(
    spent: float | None, *, error: str | None = None, cache_hit: bool = False, model: str = "m"
) -> str:
    return (
        json.dumps(
            {
                "model": model,
                "spent_usd": spent,
                "error": error,
                "cache_hit": cache_hit,
                "scripted": False,
                "usage": {"input_uncached": 90, "input_cached": 10, "output": 5},
            }
        )
        + "\n"
    )


def test_rows_count_once_as_they_are_appended_and_a_half_written_row_waits(tmp_path: Path) -> None:
    log = tmp_path / "llm_calls.jsonl"
    totals = CallLogTotals(log)
    assert totals.read().spent_usd == 0.0  # no log yet: nothing spent
    whole, half = _row(0.25), _row(0.5)
    log.write_text(whole + _row(None, error="HTTP 401") + _row(0.0, cache_hit=True) + half[:20])
    first = totals.read()
    assert (first.spent_usd, first.calls, first.replays) == (
        0.25,
        2,
        1,
    )  # the failed call is no call
    with open(log, "a") as f:
        f.write(half[20:])
    second = totals.read()
    assert (second.spent_usd, second.calls, second.tokens_in, second.tokens_out) == (
        0.75,
        3,
        300,
        15,
    )
    assert CallLogTotals(log).read() == second  # read at once or bit by bit: the same totals


def test_an_unknown_price_makes_the_spend_unknown_never_a_smaller_number(tmp_path: Path) -> None:
    log = tmp_path / "llm_calls.jsonl"
    log.write_text(_row(0.25) + _row(None, model="unpriced") + _row(None, model="unpriced"))
    totals = CallLogTotals(log).read()
    assert totals.spent_usd is None and totals.unpriced == ("unpriced",)
    assert usd(totals.spent_usd) == "unknown" and usd(0.123456) == "$0.1235"
