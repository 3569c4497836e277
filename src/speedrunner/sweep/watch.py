"""What a running sweep prints: a line when each run starts, and every so often how far each
running run is and what it has spent.

Progress comes from the files each run keeps (``summary.json``, rewritten at every
checkpoint, and ``checkpoint.json`` while that is older), never from the run's process, so
it reads the same on every backend whose run directories this machine sees.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from speedrunner.core.llm.spent import CallLogTotals, usd
from speedrunner.core.records import SUMMARY_FILE, RunSummary, SummaryError, stored_summary
from speedrunner.sweep.spec import SweepRun

STATUS_EVERY_S = 30.0
"""Default seconds between status blocks (``speedrunner sweep --status-every``)."""
HEARTBEAT = 10
"""An unchanged status block is printed again only after this many intervals."""
TICK_S = 1.0
"""How often queued runs (Ray) are checked for having started."""
CLOCK_SLACK_S = 1.0
"""File times come from a coarser clock than ``time.time()``: a summary.json written this close
before a run's start still counts as the run's own."""


@dataclass(frozen=True)
class Progress:
    """One run as its files say now."""

    status: str
    """summary.json's status (running, finished, interrupted, ...); ``new`` before it exists,
    ``summary.json damaged`` when it cannot be read (the run's resume rewrites it)."""
    episodes: int
    """Training episodes done: the later of summary.json's and checkpoint.json's totals."""
    planned: int | None
    spent_usd: float | None
    """Dollars the run spent (``core.llm.spent``): summary.json ``spent_usd``, or before the run's
    first summary its ``llm_calls.jsonl``; ``None``: a price is unknown."""
    scripted: bool = False
    fake: bool = False
    written_at: float = 0.0
    """summary.json's modification time (0: none): one older than the run's start is an earlier
    attempt's."""

    def line(self) -> str:
        planned = "?" if self.planned is None else str(self.planned)
        return f"{self.episodes}/{planned} episodes, spent {usd(self.spent_usd)}{self.tag()}"

    def tag(self) -> str:
        if self.scripted:
            return " scripted (no LLM)"
        return " fake LLM" if self.fake else ""


class CallLogs:
    """One incremental reader per run's ``llm_calls.jsonl`` (a long run's log is megabytes)."""

    def __init__(self) -> None:
        self._readers: dict[Path, CallLogTotals] = {}

    def spent(self, path: Path) -> float | None:
        reader = self._readers.setdefault(path, CallLogTotals(path))
        try:
            return reader.read().spent_usd
        except OSError:  # unreadable right now (e.g. a network file system's hiccup): nothing yet
            return 0.0


def read_progress(run: SweepRun, logs: CallLogs) -> Progress:
    """What ``run``'s directory says now; a summary.json not written yet reads as a new run."""
    summary_path = run.run_dir / SUMMARY_FILE
    summary, status = _summary(run.run_dir)
    checkpoint = _json(run.run_dir / "checkpoint.json")
    episodes = max(
        0 if summary is None else summary.training.episodes,
        _count(checkpoint.get("totals"), "episodes"),
    )
    if summary is None:
        return Progress(
            status=status,
            episodes=episodes,
            planned=run.rollouts,
            spent_usd=logs.spent(run.run_dir / "llm_calls.jsonl"),
        )
    spent_usd = None if summary.spent_usd is None else float(summary.spent_usd)
    return Progress(
        status=status,
        episodes=episodes,
        planned=run.rollouts,
        spent_usd=spent_usd,
        scripted=summary.scripted,
        fake=summary.model.startswith("fake-"),
        written_at=_mtime(summary_path),
    )


def _summary(run_dir: Path) -> tuple[RunSummary | None, str]:
    """The run's summary (``None`` before its first, or damaged) and the status to show."""
    try:
        summary = stored_summary(run_dir)
    except SummaryError:
        return None, "summary.json damaged"
    return summary, "new" if summary is None else summary.status


def _count(section: Any, key: str) -> int:
    value = section.get(key) if isinstance(section, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


class Watch:
    """Prints a sweep's start lines and, every ``every_s`` seconds while runs go, a status block.

    Backends say when a run starts (``started``), is handed to a scheduler that starts it
    elsewhere (``queued``: it counts as started once its log grows) and ends (``ended``).
    With ``ends_from_disk`` (SLURM, which says nothing per run) a started run has ended once
    it rewrites its summary.json with a status other than running. Every line goes through
    ``say``, so the lines of threads never interleave.
    """

    def __init__(
        self,
        runs: list[SweepRun],
        *,
        every_s: float | None = STATUS_EVERY_S,
        cap_usd: float | None = None,
        out: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        ends_from_disk: bool = False,
    ) -> None:
        self.runs = runs
        self.every_s = every_s if every_s and every_s > 0 else None
        self.cap_usd = cap_usd
        self._out = out
        self._clock = clock
        self._began = clock()
        self._lock = threading.Lock()
        self._running: dict[str, SweepRun] = {}
        self._queued: dict[str, tuple[SweepRun, str, int]] = {}
        self._ended: set[str] = set()
        self._logs = CallLogs()
        self._last_block = ""
        self._last_at = self._began
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ends_from_disk = ends_from_disk
        self._since: dict[str, float] = {}
        """Wall time each run was queued or started, to tell its new summary.json from an older
        one's."""

    def say(self, text: str) -> None:
        with self._lock:
            out = self._out or sys.stdout
            out.write(text + "\n")
            out.flush()

    def elapsed(self) -> float:
        return self._clock() - self._began

    def started(self, run: SweepRun, action: str, why: str) -> None:
        """A run's process was started here (``action``: start or resume)."""
        with self._lock:
            self._queued.pop(run.run_id, None)
            self._running[run.run_id] = run
            self._since.setdefault(run.run_id, time.time())
        why = why.split("; WARNING", 1)[0]  # the warning itself was printed on stderr
        self.say(f"[{action}] {run.label} ({why}): run dir {run.run_dir}; log {run.log_file}")

    def queued(self, run: SweepRun, action: str, *, quiet: bool = False) -> None:
        """A run is about to be handed to a scheduler; it starts (and is announced) when its log
        grows. ``quiet``: say it later (``say_queued``), once the scheduler took it."""
        with self._lock:
            self._queued[run.run_id] = (run, action, _size(run.log_file))
            self._since[run.run_id] = time.time()
        if not quiet:
            self.say(f"[queued] {run.label}: run dir {run.run_dir}; log {run.log_file}")

    def say_queued(self) -> None:
        with self._lock:
            waiting = [run for run, _, _ in self._queued.values()]
        for run in waiting:
            self.say(f"[queued] {run.label}: run dir {run.run_dir}; log {run.log_file}")

    def ended(self, run_id: str) -> None:
        with self._lock:
            self._running.pop(run_id, None)
            self._queued.pop(run_id, None)
            self._ended.add(run_id)

    def check_queued(self) -> None:
        """Announce each queued run whose log grew since it was queued: its task has begun."""
        with self._lock:
            grown = [
                (run, action)
                for run, action, size in self._queued.values()
                if _size(run.log_file) > size
            ]
        for run, action in grown:
            self.started(run, action, "on a worker")
        if self._ends_from_disk:
            self._check_ends()

    def _check_ends(self) -> None:
        with self._lock:
            running = [(run, self._since.get(run.run_id, 0.0)) for run in self._running.values()]
        for run, since in running:
            path = run.run_dir / SUMMARY_FILE
            summary, status = _summary(run.run_dir)
            if summary is not None and status != "running" and _mtime(path) >= since:
                self.ended(run.run_id)
                self.say(f"[{status}] {run.label}  ({self.elapsed():.0f} s)")

    def status(self) -> str | None:
        """The status block to print now, or ``None``: nothing running, or nothing changed
        since the last block and the heartbeat is not due."""
        with self._lock:
            running = [(run, self._since.get(run.run_id, 0.0)) for run in self._running.values()]
            queued = [run for run, _, _ in self._queued.values()]
            ended = len(self._ended)
        if not running:
            return None
        progress = {r.run_id: read_progress(r, self._logs) for r in self.runs}
        body = self._block(running, queued, ended, progress)
        now = self._clock()
        due = self.every_s is not None and now - self._last_at >= HEARTBEAT * self.every_s
        if body == self._last_block and not due:
            return None
        self._last_block, self._last_at = body, now
        return f"status at {self.elapsed():.0f} s: {body}"

    def _block(
        self,
        running: list[tuple[SweepRun, float]],
        queued: list[SweepRun],
        ended: int,
        progress: dict[str, Progress],
    ) -> str:
        done = sum(p.episodes for p in progress.values())
        plans = [p.planned for p in progress.values()]
        planned = (
            "?" if any(p is None for p in plans) else str(sum(p for p in plans if p is not None))
        )
        spent = [p.spent_usd for p in progress.values()]
        total = None if any(s is None for s in spent) else sum(s for s in spent if s is not None)
        cap = "" if self.cap_usd is None else f" of the sweep's ${self.cap_usd:.2f} cap"
        waiting = len(self.runs) - len(running) - ended
        head = (
            f"{len(running)} running, {ended} ended, {waiting} waiting"
            f"{f' ({len(queued)} queued)' if queued else ''}; "
            f"sweep: {done}/{planned} episodes, spent {usd(total)}{cap}"
        )
        lines = [head]
        for run, since in running:
            p = progress[run.run_id]
            # Until the run rewrites summary.json, the file (if any) is an earlier attempt's.
            state = (
                " (starting)"
                if p.written_at < since - CLOCK_SLACK_S
                else ""
                if p.status == "running"
                else f" ({p.status})"
            )
            lines.append(f"  {run.label}: {p.line()}{state}")
        return "\n".join(lines)

    def __enter__(self) -> Watch:
        self._thread = threading.Thread(target=self._loop, name="sweep-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        tick = min(TICK_S, self.every_s) if self.every_s is not None else TICK_S
        next_status = self._clock() + (self.every_s or 0.0)
        while not self._stop.wait(tick):
            self.check_queued()
            if self.every_s is not None and self._clock() >= next_status:
                next_status = self._clock() + self.every_s
                block = self.status()
                if block is not None:
                    self.say(block)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
