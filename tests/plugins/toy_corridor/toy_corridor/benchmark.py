"""The corridor benchmark: episodes differ by seed (where the key lies)."""

from speedrunner.core.benchmark import Benchmark, EpisodeSpec
from speedrunner.core.seeding import episode_seed
from toy_corridor.config import CorridorConfig
from toy_corridor.env import CorridorEnv


class CorridorBenchmark(Benchmark):
    name = "corridor"

    def __init__(self, config: CorridorConfig, *, rollouts: int, eval_episodes: int) -> None:
        self.config, self.n_eval = config, eval_episodes

    def make_env(self) -> CorridorEnv:
        return CorridorEnv()

    def train_episode(self, run_seed: int, index: int) -> EpisodeSpec:
        return EpisodeSpec(
            "train", index, self.config.task_set, episode_seed(run_seed, "train", index)
        )

    def eval_episodes(self, eval_seed: int) -> list[EpisodeSpec]:
        return [
            EpisodeSpec("eval", i, self.config.task_set, episode_seed(eval_seed, "eval", i))
            for i in range(self.n_eval)
        ]
