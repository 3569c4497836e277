"""Progress display while a run works: episodes, the run's metric, spend, knowledge, ETA.

On a terminal it is a live rich progress bar; elsewhere (CI, logs) one line per event. Both
go to stdout (warnings and errors go to stderr). The metric shown is the one the run is
judged by (``speedrun.metric``: success on BabyAI, progress on Crafter and ScienceWorld).
The ETA appears once a whole batch (wake and sleep) has run in this process, and counts
training time only, so evaluation and start-up do not inflate it. Scripted runs say so on
every line (``[scripted]``: short, so an 80-column line keeps its content): their numbers
come from no LLM. On a terminal each phase ("eval at rollout 4: ...") is printed as a line of
its own above the bar, whose text is only the run's standing, so neither is cut. The money
shown is the run's spend (``core.llm.spent``: every call so far, training, sleep and
evaluation), the same figure summary.json and the run's last line give.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from speedrunner.core.interrupt import stop_for_closed_stdout
from speedrunner.core.runtime.checkpoint import Totals

SCRIPTED_TAG = "[scripted] "
"""Starts every progress line of a run of the scripted test model (its numbers come from no LLM)."""


class ProgressReporter:
    def __init__(
        self,
        total_episodes: int,
        *,
        scripted: bool,
        totals: Totals | None = None,
        version: int = 0,
        metric: str = "success",
        metric_sum: float | None = None,
        console: Console | None = None,
        spend: Callable[[], str] | None = None,
    ) -> None:
        """``totals`` carries the counts of a resumed run forward (episodes, successes);
        ``metric_sum`` the sum of ``metric`` over its finished episodes (default: successes);
        ``spend`` says the run's spend (and its caps), e.g. ``spent $0.0123 of cap $5.0000``."""
        totals = totals or Totals()
        self.spend = spend
        self.console = console or Console()
        self.total = total_episodes
        self.done = totals.episodes
        self.metric = metric
        self.metric_sum = float(totals.successes if metric_sum is None else metric_sum)
        self.version = version
        self.tag = SCRIPTED_TAG if scripted else ""
        self._lock = threading.Lock()
        self.actor_turns = 0  # actor turns of the episodes counted here, and those that acted
        self.actor_acted = 0
        self._done_here = 0  # training episodes finished in this process
        self._batches_here = 0  # whole batches (wake + sleep) finished in this process
        self._training_s = 0.0  # wall time of those batches
        self._timed_episodes = 0  # training episodes within those batches
        self._batch_started: float | None = None
        self._live = self.console.is_terminal
        self._progress: Progress | None = None
        if self._live:
            self._progress = Progress(
                TextColumn("{task.description}", markup=False),
                BarColumn(bar_width=12),
                MofNCompleteColumn(),
                console=self.console,
                transient=False,
            )
            self._task = self._progress.add_task(
                self._standing(), total=total_episodes, completed=self.done
            )
            self._progress.start()

    # ------------------------------------------------------------------ events
    def batch_started(self) -> None:
        self._batch_started = time.monotonic()

    def batch_finished(self, version: int) -> None:
        """A batch's wake and sleep are done; ``version`` is the knowledge the sleep produced."""
        if self._batch_started is not None:
            self._training_s += time.monotonic() - self._batch_started
            self._batches_here += 1
            self._timed_episodes = self._done_here
        self._batch_started = None
        self.version = version
        self.phase(f"knowledge v{version} ready")

    def phase(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(f"{self.tag}{text}", markup=False, highlight=False)
            self._progress.update(self._task, description=self._standing())
        else:
            _say(f"{self.tag}{text}")

    def training_episode(
        self,
        success: bool,
        progress: float,
        *,
        index: int | None = None,
        actor: dict[str, int] | None = None,
    ) -> None:
        """A training episode finished. Episodes of a batch finish in any order, so the line
        counts episodes *done* and names the finished one by its index, never as "episode n"."""
        with self._lock:  # called from episode threads as they finish
            self.done += 1
            self._done_here += 1
            if actor:  # the episode's actor turns (core.answer_counts.actor_turn_counts)
                self.actor_turns += actor.get("turns", 0)
                self.actor_acted += actor.get("acted", 0) + actor.get("skill_calls", 0)
            self.metric_sum += float(progress if self.metric == "progress" else success)
            outcome = (
                "success"
                if success
                else f"progress {progress:.2f}"
                if self.metric == "progress"
                else "failure"
            )
            if self._progress is not None:
                self._progress.update(self._task, completed=self.done, description=self._standing())
            else:
                which = f"episode {index}: {outcome}" if index is not None else outcome
                _say(
                    f"{self._describe(f'episodes done {self.done}/{self.total} ({which})')}"
                    f"{self._eta()}"
                )

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()

    # ------------------------------------------------------------------ text
    def _describe(self, phase: str) -> str:
        return f"{self.tag}{phase} | {self._standing(tag=False)}"

    def _standing(self, *, tag: bool = True) -> str:
        """The run's metric so far, its spend and knowledge version (the live bar's text)."""
        value = f"{self.metric_sum / self.done:.0%}" if self.done else "-"
        spend = f" | {self.spend()}" if self.spend is not None else ""
        acted = (
            f" | env acted {self.actor_acted}/{self.actor_turns} turns" if self.actor_turns else ""
        )
        return (
            f"{self.tag if tag else ''}{self.metric} {value}{acted}{spend} "
            f"| knowledge v{self.version}"
        )

    def _eta(self) -> str:
        """Remaining training time from this process's finished batches (none before the first)."""
        if self._batches_here == 0 or self._timed_episodes == 0:
            return ""
        eta = self._training_s / self._timed_episodes * (self.total - self.done)
        return f" | ETA {eta:.0f}s (training only)"


def _say(line: str) -> None:
    """Print a progress line; a reader that closed stdout stops the run as Ctrl-C would."""
    try:
        print(line, flush=True)
    except BrokenPipeError:
        raise stop_for_closed_stdout() from None
