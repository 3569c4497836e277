"""check_text_env over the real benchmarks and over deliberately broken fakes."""

from __future__ import annotations

from typing import Any

import pytest

from speedrunner.benchmarks.crafter.env import CrafterTextEnv
from speedrunner.catalog import BENCHMARKS
from speedrunner.core.env import Observation, StepResult, TextEnv
from speedrunner.core.env_checker import check_text_env
from speedrunner.core.registry import load_entry_point
from speedrunner.errors import EnvError, InvalidActionError


class FakeEnv(TextEnv):
    """A correct tiny TextEnv; subclasses break one rule each."""

    accepts_free_text = False

    def __init__(self) -> None:
        self._seed = 0
        self._calls = 0

    @property
    def instruction(self) -> str:
        return "count"

    @property
    def actions(self) -> list[str]:
        return ["up", "down"]

    @property
    def success(self) -> bool:
        return False

    def progress(self) -> float:
        return 0.5

    def obs(self) -> Observation:
        return Observation(f"seed {self._seed}", {"seed": self._seed})

    def reset(self, task: str, seed: int) -> Observation:
        self._seed = seed
        return self.obs()

    def step(self, action: str) -> StepResult:
        if action not in self.actions:
            raise InvalidActionError(f"{action!r} is not an action")
        return StepResult(self.obs(), 0.0, False, {})

    def close(self) -> None:
        pass


class FreeTextEnv(FakeEnv):
    """Any text reaches the game (ScienceWorld's way): declared, and so allowed."""

    accepts_free_text = True

    def step(self, action: str) -> StepResult:
        return StepResult(
            Observation(
                "No known action matches that input."
                if action not in self.actions
                else f"seed {self._seed}"
            ),
            0.0,
            False,
            {},
        )


class TakesAnything(FakeEnv):
    """Declares a closed vocabulary yet takes any text:
    the actor would be refused what skills send."""

    def step(self, action: str) -> StepResult:
        return StepResult(self.obs(), 0.0, False, {})


class RefusesFreeText(FakeEnv):
    accepts_free_text = True


class Undeclared(FakeEnv):
    accepts_free_text = None  # type: ignore[assignment]


class NeverDeclared(TextEnv):
    """Implements every abstract member but never says what ``step`` accepts."""

    instruction = FakeEnv.instruction
    actions = FakeEnv.actions
    success = FakeEnv.success
    progress = FakeEnv.progress
    obs = FakeEnv.obs
    reset = FakeEnv.reset
    step = FakeEnv.step

    def __init__(self) -> None:
        self._seed = 0


class NotJSON(FakeEnv):
    def obs(self) -> Observation:
        return Observation("x", {"pos": {1, 2}})


class BadProgress(FakeEnv):
    def progress(self) -> float:
        return 1.5


class NoActions(FakeEnv):
    @property
    def actions(self) -> list[str]:
        return []


class Unseeded(FakeEnv):
    def reset(self, task: str, seed: int) -> Observation:
        self._calls += 1
        return Observation(f"world {self._calls}", {})


class BadStep(FakeEnv):
    def step(self, action: str) -> Any:
        return self.obs(), 0.0, False, {}


class BadReward(FakeEnv):
    def step(self, action: str) -> StepResult:
        return StepResult(self.obs(), float("nan"), False, {})


class NoClose:
    def reset(self, task: str, seed: int) -> Observation:
        return Observation("x")


def test_fake_env_passes() -> None:
    check_text_env(FakeEnv(), "t", 3)
    check_text_env(FreeTextEnv(), "t", 3)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (NotJSON(), "structured is not JSON-serializable"),
        (BadProgress(), r"progress\(\) must be a number in \[0, 1\], got 1.5"),
        (NoActions(), "actions must be a non-empty list of str"),
        (Unseeded(), "is not reproducible"),
        (BadStep(), "returned tuple, expected StepResult"),
        (BadReward(), "reward must be a finite number"),
        (NoClose(), "not a TextEnv: subclass speedrunner.core.env.TextEnv"),
        (TakesAnything(), "was taken but accepts_free_text is False"),
        (RefusesFreeText(), "raised InvalidActionError .* but accepts_free_text is True"),
        (Undeclared(), "accepts_free_text must be a bool"),
        (NeverDeclared(), "accepts_free_text must be a bool"),
    ],
)
def test_broken_envs_are_named(env: Any, message: str) -> None:
    with pytest.raises(EnvError, match=message):
        check_text_env(env, "t", 3)


@pytest.mark.parametrize("name", BENCHMARKS.names())
def test_every_registered_benchmark_passes(name: str) -> None:
    """Each benchmark's env, on its first held-out episode, with its default config."""
    spec = BENCHMARKS.get(name)
    try:
        config_cls, factory = load_entry_point(spec.config), load_entry_point(spec.factory)
    except ImportError as e:
        pytest.skip(f"{name} benchmark is not implemented yet ({e})")
    bench = factory(config_cls(), rollouts=10, eval_episodes=1)
    env = bench.make_env()
    try:
        episode = bench.eval_episodes(0)[0]
        check_text_env(env, episode.task, episode.seed)
    finally:
        env.close()
        bench.close()


def test_crafter_passes() -> None:
    check_text_env(CrafterTextEnv(area=(32, 32)), "crafter", 12)


def test_scienceworld_passes() -> None:
    from speedrunner.benchmarks.scienceworld.env import ScienceWorldTextEnv

    env = ScienceWorldTextEnv()
    try:
        check_text_env(env, "4-1/test#230", 1)
        check_text_env(env, "3-2", 7)
    finally:
        env.close()
