"""The per-call skill caps: what the sandbox receives, and every binding on record.

The runner is a test double (trusted code playing ``noop`` through the episode's ``step``)
that records the caps it was handed; the sandboxed runner enforces them (its own tests).
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from speedrunner.core.benchmark import Budget, EpisodeSpec
from speedrunner.core.method import Knowledge
from speedrunner.core.runtime.caps import derived_timeout_s, episode_actions_left, resolve_call_caps
from speedrunner.core.runtime.episode import EpisodeContext, run_episode
from speedrunner.core.runtime.skill_call import SkillOutcome, Skills
from speedrunner.core.trajectory import Trajectory

from .fakes import CounterEnv, PolicyModel

SPEC = EpisodeSpec("train", 0, "count", 2)
SKILLS = Skills(
    1, "def wait(n): ...", {"wait": "wait(n: int) -> int", "hang": "hang() -> None"}, "counter_api"
)


class WaitingRunner:
    """``wait(n)`` plays ``noop`` n times within ``max_actions``; ``hang()`` times out."""

    tier = "test-double"

    def __init__(self) -> None:
        self.received: list[tuple[int, float]] = []

    def call(self, call, *, step, observation, max_actions, timeout_s) -> SkillOutcome:
        self.received.append((max_actions, timeout_s))
        tree = {"name": call.name, "actions": []}
        if call.name == "hang":
            return SkillOutcome(tree, stopped_by="timeout")
        for _ in range(call.args[0]):
            if len(tree["actions"]) >= max_actions:
                return SkillOutcome(tree, stopped_by="max_actions")
            reply = step("noop")
            if reply.get("done"):
                return SkillOutcome(tree, stopped_by="episode_done")
            tree["actions"].append({"action": "noop"})
        return SkillOutcome(tree, returned=call.args[0])

    def close(self) -> None:
        pass


class LimitedEnv(CounterEnv):
    """A counter with its own step limit, as BabyAI levels have (``max_steps``)."""

    step_limit = 64

    def reset(self, task, seed):
        self.steps = 0
        return super().reset(task, seed)

    def step(self, action):
        self.steps += 1
        result = super().step(action)
        return dataclasses.replace(result, done=result.done or self.steps >= self.step_limit)


def play(
    answers: list[str], *, calls=None, actions=None, env=None, **caps
) -> tuple[Trajectory, WaitingRunner]:
    runner = WaitingRunner()

    def policy(messages, purpose, call_id):
        turn = sum(m.role == "assistant" for m in messages)
        return f"Action: {answers[min(turn, len(answers) - 1)]}"

    ctx = EpisodeContext(
        PolicyModel(policy),
        Knowledge(1, "Skills", "wait(n)", skills=SKILLS),
        Budget(calls, actions, 60.0),
        open_skills=lambda skills: runner,
        **caps,
    )
    return run_episode(env or CounterEnv(), SPEC, ctx), runner


def test_by_default_a_skill_call_may_take_the_rest_of_the_episode_in_one_llm_call():
    traj, runner = play(["noop", "wait(5000)"], calls=5, actions=2000)
    assert runner.received == [(1999, derived_timeout_s(1999))]
    assert (
        traj.llm_calls == 2 and traj.env_actions == 2000 and traj.stop_reason == "max_env_actions"
    )
    assert traj.cap_hits == {}  # the episode's own budget ended the call: not a cap hit
    assert "the episode's action budget is spent" in traj.final_observation


def test_without_an_action_budget_the_envs_own_step_limit_is_the_call_cap():
    traj, runner = play(["noop", "wait(500)"], calls=3, env=LimitedEnv())
    assert runner.received[0][0] == 63 and traj.env_actions == 64 and traj.stop_reason == "env_done"
    assert traj.cap_hits == {}


def test_a_binding_per_call_cap_is_counted_per_call_and_stored_in_the_trajectory():
    traj, runner = play(["wait(100)"], calls=3, actions=2000, max_skill_actions=50)
    assert [r[0] for r in runner.received] == [50, 50, 50]
    assert [len(s.executed) for s in traj.steps] == [50, 50, 50]
    assert all(s.skill_call["actions"] for s in traj.steps)
    assert traj.cap_hits == {"max_skill_actions": 3}
    assert "stopped at the per-call action cap" in traj.final_observation
    stored = json.loads(json.dumps(traj.to_json()))
    assert Trajectory.from_json(stored).cap_hits == {"max_skill_actions": 3}


def test_the_last_call_ending_at_the_budget_is_not_a_cap_hit_but_the_earlier_ones_are():
    traj, runner = play(["wait(100)"], calls=10, actions=120, max_skill_actions=50)
    assert [r[0] for r in runner.received] == [50, 50, 20]
    assert traj.cap_hits == {"max_skill_actions": 2} and traj.stop_reason == "max_env_actions"


def test_a_timed_out_call_is_a_skill_timeout_hit_and_an_explicit_limit_reaches_the_sandbox():
    traj, runner = play(["hang()", "inc"], calls=2, actions=2000, skill_timeout_s=7.5)
    assert runner.received == [(2000, 7.5)]
    assert traj.cap_hits == {"skill_timeout": 1}


def test_a_trajectory_stored_before_caps_were_counted_loads_with_none():
    traj, _ = play(["inc"], calls=1, actions=10)
    data = traj.to_json()
    del data["cap_hits"]
    assert Trajectory.from_json(data).cap_hits == {}


@pytest.mark.parametrize(
    ("setting", "left", "cap", "per_call"),
    [
        (None, 2000, 2000, False),
        (50, 2000, 50, True),
        (50, 30, 30, False),
        (None, None, 10_000, True),
        (3000, 2000, 2000, False),
        (None, 0, 0, False),
    ],
)
def test_resolution_of_the_action_cap(setting, left, cap, per_call):
    caps = resolve_call_caps(setting, None, left)
    assert (caps.max_actions, caps.per_call_cap) == (cap, per_call)
    assert caps.timeout_s == 60.0 + 0.25 * cap


def test_actions_left_is_the_smaller_of_budget_and_env_limit():
    class Env(CounterEnv):
        step_limit = 100

    assert episode_actions_left(Env(), None, 30) == 70
    assert episode_actions_left(Env(), 50, 30) == 20
    assert episode_actions_left(CounterEnv(), None, 30) is None
    assert episode_actions_left(CounterEnv(), 10, 30) == 0
