"""What the runner needs from a benchmark besides the env itself.

A ``Benchmark`` turns (run seed, split, index) into an ``EpisodeSpec`` — which task,
which seed — so that the training stream and the fixed held-out evaluation set are
pure functions of the config. The runner never inspects task ids; it hands them back
to ``TextEnv.reset``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from speedrunner.core.env import TextEnv

Split = Literal["train", "eval"]


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to play: ``env.reset(task, seed)`` reproduces it in any process."""

    split: Split
    index: int
    task: str
    seed: int


@dataclass(frozen=True)
class Budget:
    """Per-episode limits. ``None`` means unlimited for that counter."""

    max_llm_calls: int | None
    max_env_actions: int | None
    wall_clock_s: float


class Benchmark(Protocol):
    """Built from a validated benchmark config section."""

    name: str

    def make_env(self) -> TextEnv:
        """A fresh env; the caller closes it. One per concurrently running episode."""
        ...

    def train_episode(self, run_seed: int, index: int) -> EpisodeSpec:
        """The ``index``-th training episode of the run (0-based)."""
        ...

    def eval_episodes(self, eval_seed: int) -> list[EpisodeSpec]:
        """The fixed held-out evaluation set for ``run.eval_seed``: the same for every
        method, checkpoint and run seed."""
        ...

    # Optional hooks the runner calls when a benchmark has them:
    # - ``eval_metrics(final_infos: list[dict]) -> dict[str, float]`` adds the benchmark's own
    #   summary of an evaluation (e.g. Crafter's score) to ``eval.jsonl``; ``final_infos``
    #   are the env ``info`` dicts after each episode's last action.
    # - ``start_run(run_tag: str, run_dir: Path) -> None`` before the first episode: ``run_tag``
    #   is the same for every process of one run (BabyAI tags server-side episodes with it, and
    #   keeps the server's owner token in ``run_dir``, so a resume deletes what a killed
    #   predecessor left on a shared server).
    # - ``recover(error: Exception) -> bool`` after an episode failed with an env error: True
    #   if the benchmark repaired its backend (e.g. restarted the server it started) and the
    #   episode should be played again from its seed; False lets the error stop the run.

    def close(self) -> None:
        """Release shared resources (servers started on the user's behalf, JVM pools)."""
        ...
