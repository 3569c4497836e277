"""A tiny counting game and a deterministic fake model for runtime unit tests."""

from __future__ import annotations

import hashlib
import re
import threading
import time

from speedrunner.core.benchmark import Benchmark, EpisodeSpec
from speedrunner.core.env import Observation, StepResult, TextEnv
from speedrunner.core.llm.types import Completion, Message, Model, Usage
from speedrunner.core.seeding import episode_seed


class CounterEnv(TextEnv):
    """Reach the target number with `inc` / `dec`; `noop` does nothing."""

    accepts_free_text = False

    def __init__(self) -> None:
        self.value = 0
        self.target = 0
        self.done = False
        self.closed = False

    @property
    def instruction(self) -> str:
        return f"Your goal is to make the counter equal {self.target}."

    @property
    def actions(self) -> list[str]:
        return ["inc", "dec", "noop"]

    @property
    def success(self) -> bool:
        return self.value == self.target

    def reset(self, task: str, seed: int) -> Observation:
        self.value, self.target, self.done = 0, 1 + seed % 4, False
        return self._obs()

    def _obs(self) -> Observation:
        return Observation(f"The counter shows {self.value}.", {"value": self.value})

    def step(self, action: str) -> StepResult:
        assert action in self.actions, action
        self.value += {"inc": 1, "dec": -1, "noop": 0}[action]
        self.done = self.value == self.target or self.value < -3
        return StepResult(self._obs(), float(self.success), self.done)

    def progress(self) -> float:
        return 1.0 if self.success else max(0.0, self.value / self.target)

    def close(self) -> None:
        self.closed = True


class CounterBenchmark(Benchmark):
    name = "counter"

    def __init__(self) -> None:
        self.envs: list[CounterEnv] = []
        self._lock = threading.Lock()

    def make_env(self) -> CounterEnv:
        env = CounterEnv()
        with self._lock:
            self.envs.append(env)
        return env

    def train_episode(self, run_seed: int, index: int) -> EpisodeSpec:
        return EpisodeSpec("train", index, "count", episode_seed(run_seed, "train", index))

    def eval_episodes(self, run_seed: int) -> list[EpisodeSpec]:
        return [
            EpisodeSpec("eval", i, "count", episode_seed(run_seed, "eval", i)) for i in range(3)
        ]

    def close(self) -> None:
        pass


class PolicyModel(Model):
    """Answers from a function of the conversation; records every call it gets."""

    def __init__(self, policy, *, cost: float | None = 0.001, jitter_s: float = 0.0) -> None:
        self.policy = policy
        self.cost = cost
        self.jitter_s = jitter_s
        self.calls: list[tuple[str, str, list[Message]]] = []
        self._lock = threading.Lock()

    def complete(self, messages, *, purpose, call_id, **sampling) -> Completion:
        if self.jitter_s:  # finish in a scrambled order to test ordering by index
            h = int(hashlib.sha256(call_id.encode()).hexdigest()[:4], 16)
            time.sleep(self.jitter_s * (h % 7) / 7)
        with self._lock:
            self.calls.append((purpose, call_id, list(messages)))
        text = self.policy(messages, purpose, call_id)
        return Completion(
            text=text,
            usage=Usage(100, 20, 10, 0),
            cost_usd=self.cost,
            provider="fake",
            model="fake",
        )


def smart_policy(messages, purpose, call_id) -> str:
    """Counts up toward the target named in the first user message."""
    if purpose != "actor":
        return "<guide>Press inc until the counter equals the target.</guide>"
    target = int(re.search(r"equal (\d+)", messages[1].content).group(1))
    value = (
        int(re.findall(r"counter shows (-?\d+)", messages[-1].content)[-1])
        if messages[-1].role == "user"
        else 0
    )
    return "Thought: count up.\nAction: inc" if value < target else "Thought: wait.\nAction: noop"
