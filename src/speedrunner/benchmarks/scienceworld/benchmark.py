"""ScienceWorld as a ``Benchmark``: task-set streams over the package's variation splits.

Training draws from TRAIN variations, evaluation from TEST variations (the package's
own fixed splits; see ``tasks.py``). Every ``EpisodeSpec.task`` names its variation
exactly (``"4-1/train#37"``), so an episode replays from its spec alone. No JVM is
started here: envs start theirs on first reset and the caller closes them.
"""

from __future__ import annotations

from speedrunner.benchmarks.scienceworld.config import ScienceWorldConfig
from speedrunner.benchmarks.scienceworld.env import ScienceWorldTextEnv
from speedrunner.benchmarks.scienceworld.tasks import eval_refs, train_ref
from speedrunner.core.benchmark import Benchmark, EpisodeSpec
from speedrunner.core.seeding import episode_seed


class ScienceWorldBenchmark(Benchmark):
    """Builds ScienceWorld text envs and the train / eval episode streams from the config."""

    name = "scienceworld"

    def __init__(self, config: ScienceWorldConfig, *, rollouts: int, eval_episodes: int) -> None:
        self.config = config
        self.rollouts = rollouts
        self.n_eval = eval_episodes

    def make_env(self) -> ScienceWorldTextEnv:
        return ScienceWorldTextEnv(
            simplification=self.config.simplification,
            env_step_limit=self.config.env_step_limit,
            jvm_options=self.config.launch_jvm_options,
        )

    def train_episode(self, run_seed: int, index: int) -> EpisodeSpec:
        seed = episode_seed(run_seed, "train", index)
        ref = train_ref(self.config.task_set, self.rollouts, seed, index)
        return EpisodeSpec("train", index, str(ref), seed)

    def eval_episodes(self, run_seed: int) -> list[EpisodeSpec]:
        refs = eval_refs(self.config.task_set, self.n_eval, run_seed)
        return [
            EpisodeSpec("eval", i, str(ref), episode_seed(run_seed, "eval", i))
            for i, ref in enumerate(refs)
        ]

    def close(self) -> None:
        """Nothing shared to release: each env owns (and its ``close`` stops) its JVM."""
