"""The actor on the real ScienceWorld simulator: it may type what the simulator accepts.

A prompt-only player (``speedrunner.testing.scienceworld_player``) moves between rooms; on the
old runtime its answers were matched against the start room's actions (and free text never
reached the simulator), so it failed nearly every episode.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from speedrunner.benchmarks.scienceworld.benchmark import ScienceWorldBenchmark
from speedrunner.benchmarks.scienceworld.config import ScienceWorldConfig
from speedrunner.benchmarks.scienceworld.env import ScienceWorldTextEnv
from speedrunner.core.benchmark import Budget, EpisodeSpec
from speedrunner.core.llm.types import Completion
from speedrunner.core.method import Knowledge
from speedrunner.core.runtime.episode import EpisodeContext, run_episode
from speedrunner.testing.scienceworld_player import next_action

pytestmark = pytest.mark.slow


class Player:
    """The prompt-only player as a model; ``script`` answers first, when given."""

    def __init__(self, script: list[str] | None = None) -> None:
        self.script = list(script or [])

    def complete(self, messages, *, purpose, call_id, tools=None, **sampling) -> Completion:
        action = (
            self.script.pop(0)
            if self.script
            else next_action([{"role": m.role, "content": m.content} for m in messages])
        )
        return Completion(text=f"Thought: on with the plan.\nAction: {action}", scripted=True)


@pytest.fixture(scope="module")
def env() -> Iterator[ScienceWorldTextEnv]:
    env = ScienceWorldTextEnv(jvm_options="-Xmx384m -XX:+UseSerialGC")
    yield env
    env.close()


def play(env: ScienceWorldTextEnv, spec: EpisodeSpec, model: Player, calls: int = 100):
    return run_episode(
        env, spec, EpisodeContext(model, Knowledge(0), Budget(calls, None, 300.0), eval_point=0)
    )


def test_free_text_reaches_the_simulator(env: ScienceWorldTextEnv) -> None:
    traj = play(
        env,
        EpisodeSpec("eval", 0, "4-4/train#0", 0),
        Player(["dance with the moon", "look at door"]),
        calls=2,
    )
    assert [s.parsed_action for s in traj.steps] == ["dance with the moon", "look at door"]
    assert all(s.error is None for s in traj.steps) and traj.env_actions == 2
    assert traj.steps[1].observation == "No known action matches that input."
    assert traj.final_observation.startswith("Ambiguous request")  # the simulator's own menu


def test_valid_actions_are_not_refused_after_the_actor_moves(env: ScienceWorldTextEnv) -> None:
    """4-1/train#3 starts outside;
    the kitchen's own actions must be taken once the actor is there."""
    script = [
        "focus on blue jay egg",
        "pick up blue jay egg",
        "go to kitchen",
        "open freezer",
        "move blue jay egg to orange box",
    ]
    traj = play(env, EpisodeSpec("eval", 0, "4-1/train#3", 0), Player(script), calls=5)
    assert [s.error for s in traj.steps] == [None] * 5
    assert traj.steps[3].observation == "You move to the kitchen."
    assert traj.success and traj.stop_reason == "success"


def test_the_prompt_only_player_solves_held_out_t4(env: ScienceWorldTextEnv) -> None:
    bench = ScienceWorldBenchmark(ScienceWorldConfig(task_set="t4"), rollouts=200, eval_episodes=10)
    trajs = [play(env, spec, Player()) for spec in bench.eval_episodes(0)]
    assert sum(t.success for t in trajs) / len(trajs) >= 0.9, [
        (t.task, t.stop_reason) for t in trajs
    ]
    assert sum(s.error is not None for t in trajs for s in t.steps) == 0
    assert {t.task.split("/")[0] for t in trajs} == {"4-1", "4-2", "4-3", "4-4"}
    assert max(t.llm_calls for t in trajs if t.success) < 40
