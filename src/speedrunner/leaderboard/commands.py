"""``speedrunner leaderboard append | remove | show``: each reads the board, changes rows,
writes it.

All three go through ``board.read_board`` / ``board.write_board``, and every check runs
before anything is written: a refused append or remove leaves the file as it was.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from speedrunner.core.names import suggest, unknown
from speedrunner.core.rundir import RUN_FORMAT
from speedrunner.core.runtime.speedrun import (
    FORMAT,
    SPEEDRUN_FILE,
    SpeedrunRecord,
    default_results_dir,
)
from speedrunner.errors import LeaderboardError
from speedrunner.leaderboard.board import (
    COLUMNS,
    Row,
    editing,
    ordered,
    read_board,
    render_row,
    render_table,
    write_board,
)

DEFAULT_BOARD = "LEADERBOARD.md"
FAKE_MODEL_PREFIX = "fake-"
"""Model names of the project's fakes (``speedrunner fake-llm`` serves ``fake-realistic``)."""


def is_fake_model(model: str) -> bool:
    """A result of a fake LLM: its answers are written by code that reads the prompt, not a
    model."""
    return model.startswith(FAKE_MODEL_PREFIX)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``leaderboard`` subcommand and its three actions (called by ``speedrunner.cli``)."""
    board = sub.add_parser(
        "leaderboard",
        help="append, remove or show speedrun results in LEADERBOARD.md",
        description="Experimental: see SPEEDRUN.md.",
    )
    actions = board.add_subparsers(dest="leaderboard_command", required=True)
    append = actions.add_parser(
        "append", help="add results (default: the newest in the results folder)"
    )
    append.add_argument(
        "sources",
        nargs="*",
        metavar="SPEEDRUN_JSON_OR_RUN_DIR",
        help="speedrun.json files, result copies or run directories; none: the most recent "
        "result in the results folder",
    )
    append.add_argument(
        "--allow-scripted",
        action="store_true",
        help="also list results of the scripted test model (marked SCRIPTED)",
    )
    append.add_argument(
        "--allow-fake",
        action="store_true",
        help="also list results of the fake LLM "
        f"(`speedrunner fake-llm`, model {FAKE_MODEL_PREFIX}...)",
    )
    append.add_argument(
        "--results",
        metavar="DIR",
        default=None,
        help=f"results folder to take the newest result from (default: {default_results_dir()})",
    )
    remove = actions.add_parser(
        "remove", help="remove rows by the board's run id column", description=REMOVE_TAKES + "."
    )
    remove.add_argument(
        "run_ids",
        nargs="+",
        metavar="RUN_ID",
        help="the board's `run id` (a result id), or a run's short id such as r0001",
    )
    remove.add_argument(
        "--dry-run", action="store_true", help="show what would be removed; change nothing"
    )
    show = actions.add_parser("show", help="print the table")
    show.add_argument(
        "--sort",
        metavar="COLUMN",
        default=None,
        help="re-sort by a column, e.g. 'cost to target' (not-reached rows stay below)",
    )
    show.add_argument("--benchmark", metavar="B", default=None, help="only this benchmark's rows")
    for action in (append, remove, show):
        action.add_argument(
            "--board",
            metavar="PATH",
            default=DEFAULT_BOARD,
            help=f"the leaderboard file (default: ./{DEFAULT_BOARD})",
        )


def run(args: argparse.Namespace) -> None:
    """Dispatch; raises ``LeaderboardError`` for anything the user can fix (the CLI exits 2)."""
    path = Path(args.board)
    if args.leaderboard_command == "append":
        results = Path(args.results) if args.results else default_results_dir()
        for line in append(
            [Path(s) for s in args.sources],
            path,
            allow_scripted=args.allow_scripted,
            results_dir=results,
            allow_fake=args.allow_fake,
        ):
            print(line)
    elif args.leaderboard_command == "remove":
        for line in remove(args.run_ids, path, dry_run=args.dry_run):
            print(line)
    else:
        print("\n".join(show(path, sort=args.sort, benchmark=args.benchmark)))


# ---------------------------------------------------------------------- append
@dataclass(frozen=True)
class Source:
    path: Path
    record: SpeedrunRecord


def newest_result(results_dir: Path) -> Path:
    """The most recently written result copy in ``results_dir``."""
    found = (
        sorted(results_dir.glob("*.json"), key=lambda p: (p.stat().st_mtime_ns, p.name))
        if results_dir.is_dir()
        else []
    )
    if not found:
        raise LeaderboardError(
            f"no results in {results_dir} yet: a run copies its speedrun.json there when it "
            "reaches its target or finishes. Finish a run first, or name a run directory or "
            "speedrun.json"
        )
    return found[-1]


def load_result(path: Path) -> Source:
    """A speedrun.json (or a run directory holding one), validated."""
    file = path / SPEEDRUN_FILE if path.is_dir() else path
    if not file.exists():
        if path.is_dir():
            raise LeaderboardError(
                f"{path} has no {SPEEDRUN_FILE}: the run has not reached its target or "
                "finished yet (resume it with --resume to finish it)"
            )
        raise LeaderboardError(f"{path} does not exist; name a run directory or a speedrun.json")
    try:
        data = json.loads(file.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise LeaderboardError(
            f"{file} is not readable JSON ({e}); it is not a speedrun result"
        ) from None
    if not isinstance(data, dict) or "result_id" not in data:
        raise LeaderboardError(
            f"{file} is not a speedrun result of format {FORMAT} (no result_id); results "
            "written before the leaderboard existed cannot be added. Rerun the experiment"
        )
    try:
        record = SpeedrunRecord.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise LeaderboardError(
            f"{file} is not a valid speedrun result: {field}: {first['msg']}"
        ) from None
    if record.run_format != RUN_FORMAT:
        made = (
            "no run-directory format version (an unreleased draft)"
            if record.run_format is None
            else f"run format {record.run_format}"
        )
        raise LeaderboardError(
            f"{file} comes from a run written in {made}; this SpeedRunner adds results of "
            f"run format {RUN_FORMAT} only. Rerun the experiment"
        )
    return Source(file, record)


def append(
    sources: list[Path],
    board_path: Path,
    *,
    allow_scripted: bool,
    results_dir: Path,
    allow_fake: bool = False,
) -> list[str]:
    """Add each source's row; refuse all of them if any is refused (the board stays as it was)."""
    loaded = (
        [load_result(p) for p in sources] if sources else [load_result(newest_result(results_dir))]
    )
    with editing(board_path):
        return _append(loaded, board_path, allow_scripted=allow_scripted, allow_fake=allow_fake)


def _append(
    loaded: list[Source], board_path: Path, *, allow_scripted: bool, allow_fake: bool
) -> list[str]:
    board = read_board(board_path)
    problems: list[str] = []
    new: dict[str, Row] = {}
    for source in loaded:
        r = source.record
        if r.status != "finished":
            problems.append(
                f"{r.result_id} ({source.path}) is from a run still in progress: append it once "
                "the run has finished (resume it with --resume if it was stopped)"
            )
        elif r.scripted and not allow_scripted:
            problems.append(
                f"{r.result_id} ({source.path}) comes from the scripted test model, not an LLM; "
                "pass --allow-scripted to list it anyway (it is marked SCRIPTED)"
            )
        elif is_fake_model(r.model) and not allow_fake:
            problems.append(
                f"{r.result_id} ({source.path}) comes from the fake LLM (model {r.model!r}, "
                "`speedrunner fake-llm`), not a real model; pass --allow-fake to list it anyway"
            )
        elif any(row.run_id == r.result_id for row in board.rows):
            line = board.row_lines.get(r.result_id)
            at = f" (line {line})" if line else ""
            problems.append(
                f"{r.result_id} is already on {board_path}{at}; no duplicate rows. To replace it, "
                f"run `speedrunner leaderboard remove {r.result_id}` first"
            )
        elif r.result_id in new:
            problems.append(f"{r.result_id} is named twice ({source.path})")
        else:
            new[r.result_id] = Row.from_record(r)
    if problems:
        raise LeaderboardError("nothing was added:\n" + "\n".join(f"  - {p}" for p in problems))
    board.rows.extend(new.values())
    write_board(board)
    return [
        f"added {run_id} to {board_path}" + ("" if row.reached else " (not reached)")
        for run_id, row in new.items()
    ]


# ---------------------------------------------------------------------- remove
def remove(run_ids: list[str], board_path: Path, *, dry_run: bool) -> list[str]:
    """Remove rows by run id; every id must be on the board, or nothing is removed."""
    if not board_path.exists():
        raise LeaderboardError(
            f"{board_path} does not exist; nothing to remove (is --board right?)"
        )
    with editing(board_path):
        return _remove(run_ids, board_path, dry_run=dry_run)


def _remove(run_ids: list[str], board_path: Path, *, dry_run: bool) -> list[str]:
    board = read_board(board_path)
    known = [r.run_id for r in board.rows]
    wanted: list[str] = []
    problems: list[str] = []
    for name in dict.fromkeys(run_ids):
        matches = _rows_named(name, known)
        if len(matches) == 1:
            wanted += matches
        elif matches:
            problems.append(
                f"{name!r} is the run id of {len(matches)} rows ({', '.join(matches)}); "
                "name the one to remove by its full id"
            )
        else:
            problems.append(f"{name!r} is not on {board_path}{suggest(name, known)}")
    if problems:
        raise LeaderboardError(
            "nothing was removed:\n"
            + "\n".join(f"  - {p}" for p in problems)
            + f"\n{REMOVE_TAKES} (`speedrunner leaderboard show` lists them)"
        )
    going = [r for r in ordered(board.rows) if r.run_id in wanted]
    if dry_run:
        return [
            f"would remove {len(going)} row(s) from {board_path} (--dry-run: nothing changed):",
            *render_table(going),
        ]
    board.rows = [r for r in board.rows if r.run_id not in wanted]
    write_board(board)
    return [f"removed {len(going)} row(s) from {board_path}:", *(render_row(r) for r in going)]


REMOVE_TAKES = (
    "remove takes what the board's `run id` column shows (the result id, e.g. "
    "babyai-opo-gpt-seq-seed0-r0001-<suffix>), or the run's short id (r0001) if only one row has it"
)


def _rows_named(name: str, known: list[str]) -> list[str]:
    """The board ids ``name`` means: itself, else every result id whose run id part it is.

    A result id ends ``-<run id>-<hash>`` (``SpeedrunTracker.result_id``); the short run id
    (r0001) is what a run directory and the progress lines show.
    """
    if name in known:
        return [name]
    return [k for k in known if len(parts := k.rsplit("-", 2)) == 3 and parts[1] == name]


# ------------------------------------------------------------------------ show
def column_named(name: str) -> str:
    """A column given loosely (``cost``, ``rollouts_to_target``, ``LLM calls to target``)."""
    wanted = " ".join(name.replace("_", " ").replace("-", " ").split()).lower()
    by_lower = {c.lower(): c for c in COLUMNS}
    if wanted in by_lower:
        return by_lower[wanted]
    prefixed = [c for c in COLUMNS if c.lower().startswith(wanted)]
    if len(prefixed) == 1:
        return prefixed[0]
    raise LeaderboardError(unknown("column", name, COLUMNS))


def show(board_path: Path, *, sort: str | None, benchmark: str | None) -> list[str]:
    if not board_path.exists():
        raise LeaderboardError(
            f"{board_path} does not exist; `speedrunner leaderboard append` creates it "
            "(or point --board at the file)"
        )
    board = read_board(board_path)
    column = column_named(sort) if sort else None
    rows = [r for r in board.rows if benchmark is None or r.benchmark == benchmark]
    lines = render_table(ordered(rows, column))
    if not board.rows:
        lines.append(
            f"({board_path} has no results yet; add one with `speedrunner leaderboard append`)"
        )
    elif not rows:
        lines.append(
            f"(no rows for benchmark {benchmark!r}; the board has: "
            f"{', '.join(sorted({r.benchmark for r in board.rows}))})"
        )
    return lines
