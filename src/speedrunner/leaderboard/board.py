"""LEADERBOARD.md: the one parser and the one writer every leaderboard command goes through.

The file is Markdown people read on GitHub, so it stays plain: any text, then one table
whose header is exactly ``COLUMNS``, then any text. Commands change only the table's rows
and write it back sorted (ranked rows first, "not reached" rows below them). A file that
does not parse is reported with its line number and never rewritten: a hand edit is
someone's work, and guessing what it meant could drop rows.
"""

from __future__ import annotations

import fcntl
import math
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speedrunner.core.atomic import atomic_write_text
from speedrunner.core.runtime.speedrun import SpeedrunRecord
from speedrunner.errors import LeaderboardError

COLUMNS = (
    "benchmark",
    "task set",
    "method",
    "model",
    "seed",
    "target",
    "rollouts to target",
    "cost to target",
    "tokens to target",
    "LLM calls to target",
    "wall time to target",
    "final progress",
    "run id",
    "date",
)
NOT_REACHED = "not reached"
MISSING = "-"
SCRIPTED_MARK = " (SCRIPTED)"

PROLOGUE = """\
# Leaderboard

> **Experimental.** The speedrun leaderboard is new; its columns and rules may still change.
> How results get here and what they mean: [SPEEDRUN.md](SPEEDRUN.md).

Edit the table with `speedrunner leaderboard append` / `remove` (it stays sorted and parseable).
"To target" columns count training until the target was first reached: rollouts, cost in USD
(actor calls plus the sleep phase's share), output tokens, LLM calls and real wall time.
Runs that never reached their target are listed last as "not reached". Rows marked (SCRIPTED)
come from the scripted test model, not from an LLM.

"""

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_SEPARATOR_CELL = re.compile(r":?-{3,}:?")


@dataclass(frozen=True)
class Row:
    """One result on the board; ``rollouts`` is None when the target was never reached."""

    benchmark: str
    task_set: str
    method: str
    model: str
    scripted: bool
    seed: int
    target: str
    rollouts: int | None
    cost_usd: float | None
    output_tokens: int | None
    llm_calls: int | None
    wall_time_s: float | None
    final_progress: float | None
    run_id: str
    date: str

    @property
    def reached(self) -> bool:
        return self.rollouts is not None

    @classmethod
    def from_record(cls, record: SpeedrunRecord) -> Row:
        target = f"{record.metric} >= {record.target:g}"
        if record.window is not None:
            target = f"{record.metric}({record.window}) >= {record.target:g}"
        for name in ("benchmark", "task_set", "method", "model", "provider", "result_id"):
            if "|" in (getattr(record, name) or "") or "\n" in (getattr(record, name) or ""):
                raise LeaderboardError(
                    f"result {record.result_id}: its {name} contains '|' or a line break, "
                    "which a Markdown table cannot hold"
                )
        reached = record.reached and record.rollout is not None
        row = cls(
            benchmark=record.benchmark,
            task_set=record.task_set,
            method=record.method,
            model=_model(record),
            scripted=record.scripted,
            seed=record.seed,
            target=target,
            rollouts=record.rollout if reached else None,
            cost_usd=record.train_cost_usd if reached else None,
            output_tokens=record.train_output_tokens if reached else None,
            llm_calls=record.train_llm_calls if reached else None,
            wall_time_s=record.elapsed_s if reached else None,
            final_progress=record.final_progress,
            run_id=record.result_id,
            date=record.written_at[:10],
        )
        return parse_row(
            render_row(row), 0
        )  # the board's own rounding, so equal rows compare equal

    def value(self, column: str) -> Any:
        """The typed value behind ``column`` (for sorting)."""
        return _VALUES[column](self)


def _model(record: SpeedrunRecord) -> str:
    """The model cell: the name, plus "via <provider>" when it is served by another provider than
    its name implies (as in the report), so the same name on vLLM and on its own API are never
    read as one result. Older records, without a provider, show the name alone."""
    from speedrunner.core.rundir import implied_provider

    provider = record.provider
    if (
        provider is None
        or record.scripted
        or provider in ("scripted", implied_provider(record.model))
    ):
        return record.model
    return f"{record.model} via {provider}"


_VALUES: dict[str, Callable[[Row], Any]] = {
    "benchmark": lambda r: r.benchmark,
    "task set": lambda r: r.task_set,
    "method": lambda r: r.method,
    "model": lambda r: r.model,
    "seed": lambda r: r.seed,
    "target": lambda r: r.target,
    "rollouts to target": lambda r: r.rollouts,
    "cost to target": lambda r: r.cost_usd,
    "tokens to target": lambda r: r.output_tokens,
    "LLM calls to target": lambda r: r.llm_calls,
    "wall time to target": lambda r: r.wall_time_s,
    "final progress": lambda r: r.final_progress,
    "run id": lambda r: r.run_id,
    "date": lambda r: r.date,
}


@dataclass
class Board:
    """The file split into text before the table, its rows, and text after it."""

    path: Path
    before: list[str] = field(default_factory=lambda: PROLOGUE.splitlines())
    rows: list[Row] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    row_lines: dict[str, int] = field(default_factory=dict)
    """Line number of each run id's row as read (for messages)."""


# ---------------------------------------------------------------------------- cells
def _opt(value: Any, fmt: Callable[[Any], str]) -> str:
    return MISSING if value is None else fmt(value)


def render_row(row: Row) -> str:
    cells = [
        row.benchmark,
        row.task_set,
        row.method,
        row.model + (SCRIPTED_MARK if row.scripted else ""),
        str(row.seed),
        row.target,
        NOT_REACHED if row.rollouts is None else str(row.rollouts),
        _opt(row.cost_usd, lambda v: f"${v:.4f}"),
        _opt(row.output_tokens, str),
        _opt(row.llm_calls, str),
        _opt(row.wall_time_s, lambda v: f"{v:.1f} s"),
        _opt(row.final_progress, lambda v: f"{v:.3f}"),
        row.run_id,
        row.date,
    ]
    return "| " + " | ".join(cells) + " |"


def _cells(line: str) -> list[str] | None:
    text = line.strip()
    if not (text.startswith("|") and text.endswith("|") and len(text) > 1):
        return None
    return [c.strip() for c in text[1:-1].split("|")]


def parse_row(line: str, line_no: int, where: str = "LEADERBOARD.md") -> Row:
    """A table line back into a ``Row``; raises naming the line and the column that is wrong."""
    cells = _cells(line)
    if cells is None or len(cells) != len(COLUMNS):
        found = "no table row" if cells is None else f"{len(cells)} cells"
        raise LeaderboardError(
            f"{where} line {line_no}: {found}, expected {len(COLUMNS)} ({' | '.join(COLUMNS)})"
        )
    c = dict(zip(COLUMNS, cells, strict=True))

    def typed(
        column: str, convert: Callable[[str], Any], *, optional: bool = False, what: str
    ) -> Any:
        text = c[column]
        if optional and text == MISSING:
            return None
        try:
            value = convert(text)
        except ValueError:
            raise LeaderboardError(
                f"{where} line {line_no}: column {column!r} holds {text!r}, expected {what}"
            ) from None
        if isinstance(value, float) and not math.isfinite(value):
            raise LeaderboardError(
                f"{where} line {line_no}: column {column!r} holds {text!r}, expected {what}"
            )
        return value

    def strip(suffix: str, prefix: str = "") -> Callable[[str], float]:
        def convert(text: str) -> float:
            if not (text.startswith(prefix) and text.endswith(suffix)):
                raise ValueError(text)
            return float(text[len(prefix) : len(text) - len(suffix)])

        return convert

    for column in ("benchmark", "task set", "method", "model", "target", "run id"):
        if not c[column]:
            raise LeaderboardError(f"{where} line {line_no}: column {column!r} is empty")
    if not _DATE.fullmatch(c["date"]):
        raise LeaderboardError(
            f"{where} line {line_no}: column 'date' holds {c['date']!r}, expected YYYY-MM-DD"
        )
    reached = c["rollouts to target"] != NOT_REACHED
    rollouts = (
        typed("rollouts to target", int, what=f"a whole number or {NOT_REACHED!r}")
        if reached
        else None
    )
    model = c["model"]
    scripted = model.endswith(SCRIPTED_MARK)
    return Row(
        benchmark=c["benchmark"],
        task_set=c["task set"],
        method=c["method"],
        model=model[: -len(SCRIPTED_MARK)] if scripted else model,
        scripted=scripted,
        seed=typed("seed", int, what="a whole number"),
        target=c["target"],
        rollouts=rollouts,
        cost_usd=typed(
            "cost to target", strip("", "$"), optional=True, what=f"$<amount> or {MISSING!r}"
        ),
        output_tokens=typed(
            "tokens to target", int, optional=True, what=f"a whole number or {MISSING!r}"
        ),
        llm_calls=typed(
            "LLM calls to target", int, optional=True, what=f"a whole number or {MISSING!r}"
        ),
        wall_time_s=typed(
            "wall time to target", strip(" s"), optional=True, what=f"<seconds> s or {MISSING!r}"
        ),
        final_progress=typed(
            "final progress", float, optional=True, what=f"a number or {MISSING!r}"
        ),
        run_id=c["run id"],
        date=c["date"],
    )


# ----------------------------------------------------------------------- the file
def header_lines() -> list[str]:
    return ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]


def read_board(path: Path) -> Board:
    """Parse ``path`` (a missing file is an empty board with the standard opening)."""
    if not path.exists():
        return Board(path)
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise LeaderboardError(f"cannot read {path}: {e}") from None
    return parse_board(text, path)


def parse_board(text: str, path: Path) -> Board:
    lines = text.splitlines()
    where = str(path)
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("|")), None)
    if start is None:  # no table yet (or it was deleted): the text is kept and a table added
        return Board(path, before=lines, rows=[], after=[])
    if _cells(lines[start]) != list(COLUMNS):
        raise LeaderboardError(
            f"{where} line {start + 1}: the table header is not the leaderboard's; expected "
            f"{header_lines()[0]!r}. Restore it by hand (the file was not changed)"
        )
    separator = _cells(lines[start + 1]) if start + 1 < len(lines) else None
    if (
        separator is None
        or len(separator) != len(COLUMNS)
        or not all(_SEPARATOR_CELL.fullmatch(s) for s in separator)
    ):
        raise LeaderboardError(
            f"{where} line {start + 2}: expected the table's |---|---| separator line "
            "under the header. Restore it by hand (the file was not changed)"
        )
    board = Board(path, before=lines[:start], rows=[], after=[])
    i = start + 2
    while i < len(lines) and lines[i].lstrip().startswith("|"):
        row = parse_row(lines[i], i + 1, where)
        if row.run_id in board.row_lines:
            raise LeaderboardError(
                f"{where} line {i + 1}: run id {row.run_id} is already on line "
                f"{board.row_lines[row.run_id]}; delete one of them by hand"
            )
        board.rows.append(row)
        board.row_lines[row.run_id] = i + 1
        i += 1
    board.after = lines[i:]
    for j, line in enumerate(board.after, start=i):
        if line.lstrip().startswith("|"):
            raise LeaderboardError(
                f"{where} line {j + 1}: a table row after the table ended at line {i}; a blank "
                "or other line splits the table. Join it again by hand (the file was not changed)"
            )
    return board


def rank_key(row: Row) -> tuple:
    """Ranked rows by (benchmark, task set, target) then fewest rollouts, then cheapest."""
    inf = math.inf
    return (
        row.benchmark,
        row.task_set,
        row.target,
        row.rollouts,
        inf if row.cost_usd is None else row.cost_usd,
        inf if row.wall_time_s is None else row.wall_time_s,
        row.run_id,
    )


def not_reached_key(row: Row) -> tuple:
    """Unranked rows by (benchmark, task set, target) then highest final progress."""
    progress = -1.0 if row.final_progress is None else row.final_progress
    return (row.benchmark, row.task_set, row.target, -progress, row.run_id)


def ordered(rows: list[Row], column: str | None = None) -> list[Row]:
    """Ranked rows first, "not reached" rows below them; ``column`` re-sorts both groups by it."""
    ranked = [r for r in rows if r.reached]
    unranked = [r for r in rows if not r.reached]
    if column is None:
        return sorted(ranked, key=rank_key) + sorted(unranked, key=not_reached_key)

    def by(row: Row) -> tuple:
        value = row.value(column)
        return (
            value is None,
            value if value is not None else 0,
            rank_key(row) if row.reached else not_reached_key(row),
        )

    return sorted(ranked, key=by) + sorted(unranked, key=by)


def render_table(rows: list[Row]) -> list[str]:
    return header_lines() + [render_row(r) for r in rows]


def render_board(board: Board) -> str:
    before = list(board.before)
    if before and before[-1].strip():
        before.append("")  # Markdown needs a blank line before a table
    return "\n".join([*before, *render_table(ordered(board.rows)), *board.after]) + "\n"


@contextmanager
def editing(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the board's directory while a command reads and rewrites it.

    Two appends at once would otherwise each write the board without the other's row. The
    directory is locked, not the file, because every write replaces the file by rename.
    """
    directory = path.parent
    if not directory.is_dir():
        raise LeaderboardError(
            f"{directory} is not a directory; create it, or point --board elsewhere"
        )
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


def write_board(board: Board) -> None:
    """Write atomically, then re-read: a board this module cannot parse is never left behind."""
    text = render_board(board)
    parse_board(text, board.path)
    atomic_write_text(board.path, text)
