"""Crafter as a ``Benchmark``: one task, episodes differ only by world seed.

Training episode ``i`` plays the world ``episode_seed(run_seed, "train", i)``; the
held-out set is the first ``eval_episodes`` worlds of the ``"eval"`` split, which the
sha256-derived seeds keep disjoint from training in practice (2^31 seeds).
"""

from __future__ import annotations

from typing import Any

from speedrunner.benchmarks.crafter.config import CrafterConfig
from speedrunner.benchmarks.crafter.env import TASK, CrafterTextEnv
from speedrunner.benchmarks.crafter.text import crafter_score
from speedrunner.core.benchmark import Benchmark, EpisodeSpec
from speedrunner.core.seeding import episode_seed


class CrafterBenchmark(Benchmark):
    """Builds Crafter text envs and the train / eval episode streams from the config."""

    name = "crafter"

    def __init__(self, config: CrafterConfig, *, rollouts: int, eval_episodes: int) -> None:
        self.config = config
        self.rollouts = rollouts
        self.n_eval = eval_episodes

    def make_env(self) -> CrafterTextEnv:
        return CrafterTextEnv(area=tuple(self.config.area), length=self.config.length)

    def train_episode(self, run_seed: int, index: int) -> EpisodeSpec:
        return EpisodeSpec("train", index, TASK, episode_seed(run_seed, "train", index))

    def eval_episodes(self, run_seed: int) -> list[EpisodeSpec]:
        return [
            EpisodeSpec("eval", i, TASK, episode_seed(run_seed, "eval", i))
            for i in range(self.n_eval)
        ]

    def eval_metrics(self, final_infos: list[dict[str, Any]]) -> dict[str, float]:
        """Crafter's own summary of an evaluation: the Crafter score over its episodes
        (from each episode's unlocked achievements), next to the runner's mean progress."""
        unlocked = [info.get("achievements", []) for info in final_infos]
        return {
            "crafter_score": crafter_score(unlocked),
            "achievements_mean": sum(map(len, unlocked)) / max(1, len(unlocked)),
        }

    def close(self) -> None:
        """Nothing shared to release: each env owns its world."""
