"""What the runner needs from a benchmark besides the env itself.

A ``Benchmark`` turns (run seed, split, index) into an ``EpisodeSpec`` — which task,
which seed — so that the training stream and the fixed held-out evaluation set are
pure functions of the config. The runner never inspects task ids; it hands them back
to ``TextEnv.reset``. ``EpisodeSpec`` and ``Budget`` live in ``env.py`` (what one episode
of an env is), re-exported here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from speedrunner.core.env import Budget, EpisodeSpec, Split, TextEnv

__all__ = ["Benchmark", "Budget", "EpisodeSpec", "Split"]


class Benchmark(ABC):
    """Built from a validated benchmark config section. Subclass it: the abstract members are
    required; ``start_run``, ``recover``, ``eval_metrics`` and ``close`` are optional hooks whose
    defaults do nothing, and the runner calls them directly."""

    name: str
    """Set in every subclass (a class attribute): the benchmark's registered name."""

    @abstractmethod
    def make_env(self) -> TextEnv:
        """A fresh env; the caller closes it. One per concurrently running episode."""

    @abstractmethod
    def train_episode(self, run_seed: int, index: int) -> EpisodeSpec:
        """The ``index``-th training episode of the run (0-based)."""

    @abstractmethod
    def eval_episodes(self, eval_seed: int) -> list[EpisodeSpec]:
        """The fixed held-out evaluation set for ``run.eval_seed``: the same for every
        method, checkpoint and run seed."""

    # ----------------------------------------------------------- optional hooks
    def start_run(self, run_tag: str, run_dir: Path) -> None:
        """Called before the first episode. ``run_tag`` is the same for every process of one run
        (BabyAI tags server-side episodes with it, and keeps the server's owner token in
        ``run_dir``, so a resume deletes what a killed predecessor left on a shared server)."""
        return None

    def recover(self, error: Exception) -> bool:
        """Called after an episode failed with an env error: True if the benchmark repaired its
        backend (e.g. restarted the server it started) and the episode should be played again
        from its seed; False (the default) lets the error stop the run."""
        return False

    def eval_metrics(self, final_infos: list[dict[str, Any]]) -> dict[str, float] | None:
        """The benchmark's own summary of one evaluation (e.g. Crafter's score), stored as
        ``benchmark_metrics`` in ``eval.jsonl``; ``final_infos`` are the env ``info`` dicts after
        each episode's last action. ``None`` (the default): nothing is added."""
        return None

    def close(self) -> None:
        """Release shared resources (servers started on the user's behalf, JVM pools)."""
        return None
