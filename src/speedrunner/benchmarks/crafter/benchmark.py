"""Crafter as a ``Benchmark``: one task, episodes differ only by world seed.

Training episode ``i`` plays the world ``episode_seed(run_seed, "train", i)``; the
held-out set is the first ``eval_episodes`` worlds of the ``"eval"`` split, which the
sha256-derived seeds keep disjoint from training in practice (2^31 seeds).
"""

from __future__ import annotations

from speedrunner.benchmarks.crafter.config import CrafterConfig
from speedrunner.benchmarks.crafter.env import TASK, CrafterTextEnv
from speedrunner.core.benchmark import EpisodeSpec
from speedrunner.core.seeding import episode_seed


class CrafterBenchmark:
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
        return [EpisodeSpec("eval", i, TASK, episode_seed(run_seed, "eval", i))
                for i in range(self.n_eval)]

    def close(self) -> None:
        """Nothing shared to release: each env owns its world."""
