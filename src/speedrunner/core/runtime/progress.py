"""Progress display while a run works: episodes, success, cost, knowledge version, ETA.

On a terminal it is a live rich progress bar; elsewhere (CI, logs) one line per event.
Scripted runs say so on every line: their numbers come from no LLM.
"""

from __future__ import annotations

import sys
import threading
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from speedrunner.core.runtime.checkpoint import Totals


class ProgressReporter:
    def __init__(self, total_episodes: int, *, scripted: bool, totals: Totals | None = None,
                 version: int = 0, console: Console | None = None) -> None:
        """``totals`` carries the counts of a resumed run forward (episodes, successes, cost)."""
        totals = totals or Totals()
        self.console = console or Console(stderr=True)
        self.total = total_episodes
        self.done = totals.episodes
        self.successes = totals.successes
        self.cost: float | None = totals.cost_usd
        self.version = version
        self.tag = "[SCRIPTED MODEL - not an LLM] " if scripted else ""
        self.started = time.monotonic()
        self._start_done = self.done
        self._lock = threading.Lock()
        self._live = self.console.is_terminal
        self._progress: Progress | None = None
        if self._live:
            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TimeRemainingColumn(), console=self.console, transient=False,
            )
            self._task = self._progress.add_task(self._describe("starting"), total=total_episodes, completed=self.done)
            self._progress.start()

    def _describe(self, phase: str) -> str:
        cost = "unknown" if self.cost is None else f"${self.cost:.4f}"
        rate = f"{self.successes / self.done:.0%}" if self.done else "-"
        return f"{self.tag}{phase} | success {rate} | cost {cost} | knowledge v{self.version}"

    def phase(self, text: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=self._describe(text))
        else:
            print(f"{self.tag}{text}", file=sys.stderr, flush=True)

    def training_episode(self, index: int, success: bool, cost: float | None, version: int) -> None:
        with self._lock:  # called from episode threads as they finish
            self._training_episode(index, success, cost, version)

    def _training_episode(self, index: int, success: bool, cost: float | None, version: int) -> None:
        self.done += 1
        self.successes += int(success)
        self.cost = None if self.cost is None or cost is None else self.cost + cost
        self.version = version
        if self._progress is not None:
            self._progress.update(self._task, completed=self.done, description=self._describe("training"))
        else:
            elapsed = time.monotonic() - self.started
            rate = elapsed / max(1, self.done - self._start_done)
            eta = rate * (self.total - self.done)
            print(f"episode {self.done}/{self.total} (#{index}) "
                  f"{'success' if success else 'failure'} | {self._describe('training')} | "
                  f"{elapsed:.0f}s elapsed, ETA {eta:.0f}s (training only)", file=sys.stderr, flush=True)

    def sleep_cost(self, cost: float | None) -> None:
        """Add a sleep phase's cost to the running total (unknown stays unknown)."""
        self.cost = None if self.cost is None or cost is None else self.cost + cost

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
