"""Skill calls in a wake episode: one LLM call, many env actions, all recorded and budgeted.

The runner here is a test double that plays a fixed, trusted Python function through the
episode's ``step`` callback; the sandboxed runner has its own tests. What is tested is the
episode's side: parsing, the per-call cap and the env-action budget, what the trajectory
stores and what the actor sees next.
"""

from __future__ import annotations

import re

from speedrunner.core.benchmark import Budget, EpisodeSpec
from speedrunner.core.method import Knowledge
from speedrunner.core.runtime.episode import EpisodeContext, run_episode
from speedrunner.core.runtime.skill_call import SkillCall, SkillOutcome, Skills

from .fakes import CounterEnv, PolicyModel

SPEC = EpisodeSpec("train", 0, "count", 2)  # target = 3
SKILLS = Skills(1, "def count_to(n): ...", {"count_to": "count_to(n: int) -> int"}, "counter_api")


class FakeRunner:
    """Plays ``count_to(n)``: presses inc until the counter shows n (trusted test code)."""

    tier = "test-double"

    def __init__(self) -> None:
        self.calls: list[SkillCall] = []
        self.closed = False

    def call(self, call, *, step, observation, max_actions, timeout_s) -> SkillOutcome:
        self.calls.append(call)
        if call.kwargs.get("explode"):
            return SkillOutcome(
                {"name": call.name, "error": "ValueError: boom"},
                error="Traceback ...\nValueError: boom",
                stopped_by="error",
            )
        tree = {"name": call.name, "args": call.args, "actions": []}
        value = observation["structured"]["value"]
        while value < call.args[0]:
            if len(tree["actions"]) >= max_actions:
                return SkillOutcome(tree, stopped_by="max_actions")
            reply = step("inc")
            if "error" in reply:
                return SkillOutcome(tree, error=reply["error"], stopped_by="error")
            tree["actions"].append({"action": "inc", "observation": reply["text"]})
            value = reply["structured"]["value"]
        return SkillOutcome(tree, returned=value)

    def close(self) -> None:
        self.closed = True


def calls_skill_then_waits(messages, purpose, call_id) -> str:
    if len(messages) == 2:
        return "Thought: use the skill.\nAction: count_to(3)"
    return "Thought: done?\nAction: noop"


def run(policy, *, runner=None, calls=30, actions=None, max_skill_actions=50):
    runner = runner or FakeRunner()
    ctx = EpisodeContext(
        PolicyModel(policy),
        Knowledge(1, "Skills", "count_to(n)", skills=SKILLS),
        Budget(calls, actions, 60.0),
        open_skills=lambda skills: runner,
        max_skill_actions=max_skill_actions,
    )
    return run_episode(CounterEnv(), SPEC, ctx), runner


def test_one_skill_call_is_one_llm_call_and_many_recorded_env_actions() -> None:
    traj, runner = run(calls_skill_then_waits)
    assert traj.success and traj.stop_reason == "success"
    assert traj.llm_calls == 1 and traj.env_actions == 3
    (step,) = traj.steps
    assert step.parsed_action == "count_to(3)" and step.executed == ["inc", "inc", "inc"]
    assert step.skill_call["actions"][-1] == {
        "action": "inc",
        "observation": "The counter shows 3.",
    }
    assert traj.sandbox_tier == "test-double" and runner.closed
    assert traj.skill_calls() == [
        {
            "step": 0,
            "call": "count_to(3)",
            "tree": step.skill_call,
            "actions": ["inc", "inc", "inc"],
        }
    ]
    assert traj.primitive_actions() == ["inc", "inc", "inc"]
    assert "-> 3 actions: inc, inc, inc" in traj.summary()


def test_the_actor_sees_the_final_observation_and_a_concise_result() -> None:
    seen: list[str] = []

    def policy(messages, purpose, call_id):
        if len(messages) == 2:
            return "Action: count_to(2)"
        seen.append(messages[-1].content)
        return "Action: inc"

    traj, _ = run(policy)
    assert traj.success and traj.llm_calls == 2
    assert "The counter shows 2." in seen[0]
    assert "[skill count_to(2) took 2 actions; returned 2]" in seen[0]


def test_the_per_call_cap_and_the_episode_budget_bound_a_skill() -> None:
    traj, runner = run(lambda m, p, c: "Action: count_to(10)", calls=2, max_skill_actions=2)
    assert [len(s.executed) for s in traj.steps] == [2, 1]  # 2 by the cap; then the counter hit 3
    traj, _ = run(lambda m, p, c: "Action: count_to(10)", calls=None, actions=2)
    assert traj.env_actions == 2 and traj.stop_reason == "max_env_actions"


def test_a_skill_error_reaches_the_actor_and_the_episode_goes_on() -> None:
    seen: list[str] = []

    def policy(messages, purpose, call_id):
        if len(messages) == 2:
            return "Action: count_to(3, explode=True)"
        seen.append(messages[-1].content)
        return "Action: inc"

    traj, _ = run(policy, calls=2)
    assert re.search(
        r"\[skill count_to\(3, explode=True\) took 0 actions; raised .*ValueError: boom\]", seen[0]
    )
    assert traj.steps[0].error is None and traj.steps[0].skill_call["error"] == "ValueError: boom"
    assert traj.env_actions == 1


def test_an_unknown_skill_is_an_invalid_action_and_the_sandbox_is_never_called() -> None:
    traj, runner = run(lambda m, p, c: 'Action: fly("x")', calls=2)
    assert all("'fly' is not a skill" in s.error for s in traj.steps)
    assert runner.calls == [] and traj.sandbox_tier is None


def test_the_sandbox_opens_before_the_first_model_call_and_closes_with_the_episode() -> None:
    """It boots while the model answers, not after the answer on the episode's path."""
    events: list[str] = []
    runner = FakeRunner()

    def policy(messages, purpose, call_id) -> str:
        events.append("model")
        return calls_skill_then_waits(messages, purpose, call_id)

    ctx = EpisodeContext(
        PolicyModel(policy),
        Knowledge(1, "Skills", "count_to(n)", skills=SKILLS),
        Budget(3, None, 60.0),
        open_skills=lambda skills: events.append("open") or runner,
    )
    traj = run_episode(CounterEnv(), SPEC, ctx)
    assert events[:2] == ["open", "model"] and events.count("open") == 1
    assert traj.success and runner.closed and traj.sandbox_tier == "test-double"


def test_without_skills_no_sandbox_opens() -> None:
    opened: list[Skills] = []
    ctx = EpisodeContext(
        PolicyModel(lambda m, p, c: "Action: inc"),
        Knowledge(0, "", ""),
        Budget(3, None, 60.0),
        open_skills=lambda skills: opened.append(skills),
    )
    traj = run_episode(CounterEnv(), SPEC, ctx)
    assert traj.env_actions == 3 and opened == []
