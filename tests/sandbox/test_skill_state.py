"""What a skill knows and keeps: ``env.actions_left`` (its budget for this call) and
``env.scratch`` (per-episode state the parent keeps, so it survives a sandbox restart).
Module constants are read-only: the UPPER_CASE dict that used to carry state until the
next restart now refuses to change, with a message naming the scratch."""

from __future__ import annotations

from speedrunner.core.benchmark import Budget, EpisodeSpec
from speedrunner.core.method import Knowledge
from speedrunner.core.runtime.episode import EpisodeContext, run_episode
from speedrunner.core.runtime.skill_call import Skills
from speedrunner.core.sandbox import open_skill_runner

from ..runtime.fakes import CounterEnv as EpisodeCounterEnv
from ..runtime.fakes import PolicyModel
from .conftest import API, LIMITS, call, open_runner

STATEFUL = """
SEEN = {"calls": 0}
NAMES = ["a"]


def budget(env, n):
    before = env.actions_left
    for _ in range(n):
        env.act("inc")
    return [before, env.actions_left]


def remember(env, key, value):
    env.scratch[key] = value
    return sorted(env.scratch)


def recall(env, key):
    return env.scratch.get(key)


def count_calls(env):
    env.scratch["calls"] = env.scratch.get("calls", 0) + 1
    return env.scratch["calls"]


def sets_then_spins(env):
    env.scratch["lost"] = True
    while True:
        pass


def fills_scratch(env):
    env.scratch["big"] = "x" * 100_000
    return "filled"


def replaces_scratch(env):
    env.scratch = [1, 2]
    return "replaced"


def mutates_a_constant(env):
    SEEN["calls"] += 1
    return SEEN["calls"]


def appends_to_a_constant(env):
    NAMES.append("b")


def reads_constants(env):
    return [SEEN["calls"], NAMES + ["c"], dict(SEEN)]
"""


def test_actions_left_counts_down_from_the_cap_the_parent_sent(tier) -> None:
    runner = open_runner(tier, STATEFUL)
    try:
        assert call(runner, "budget", 3, max_actions=7).returned == [7, 4]
        stopped = call(runner, "budget", 5, max_actions=2)
        assert stopped.stopped_by == "max_actions"
    finally:
        runner.close()


def test_actions_left_is_the_smaller_of_the_per_call_cap_and_the_episodes_budget(tier) -> None:
    skills = Skills(1, STATEFUL, {"budget": "budget(n: int) -> list"}, API)
    model = PolicyModel(
        lambda m, p, c: (
            "Thought: go.\nAction: inc"
            if c.endswith("0000")
            else "Thought: skill.\nAction: budget(1)"
        )
    )
    ctx = EpisodeContext(
        model,
        Knowledge(1, "Skills", "budget(n)", skills=skills),
        Budget(3, 10, 60.0),
        open_skills=lambda s: open_skill_runner(s, tier=tier, limits=LIMITS),
        max_skill_actions=50,
    )
    traj = run_episode(EpisodeCounterEnv(), EpisodeSpec("train", 0, "count", 99), ctx)
    assert traj.steps[1].skill_call["returned"] == [
        9,
        8,
    ]  # 10 actions, one taken by the actor: 9 left
    assert traj.steps[2].skill_call["returned"] == [8, 7]


def test_the_scratch_carries_state_between_calls_and_survives_a_restart(tier) -> None:
    runner = open_runner(tier, STATEFUL)
    try:
        assert call(runner, "remember", "door", [3, 4]).returned == ["door"]
        assert call(runner, "count_calls").returned == 1
        pid = runner.pid
        assert (
            call(runner, "sets_then_spins", timeout_s=1.0).stopped_by == "timeout"
        )  # kills the process
        assert call(runner, "recall", "door").returned == [
            3,
            4,
        ]  # the parent's copy, in a new process
        assert runner.pid != pid
        assert (
            call(runner, "recall", "lost").returned is None
        )  # a timed-out call's changes are lost
        assert call(runner, "count_calls").returned == 2
        assert runner.episode_scratch == {"door": [3, 4], "calls": 2}
    finally:
        runner.close()
    fresh = open_runner(tier, STATEFUL)  # a new episode starts empty
    try:
        assert call(fresh, "recall", "door").returned is None
    finally:
        fresh.close()


def test_an_oversized_or_replaced_scratch_is_an_error_and_the_old_one_is_kept(tier) -> None:
    runner = open_runner(tier, STATEFUL)
    try:
        call(runner, "remember", "k", 1)
        big = call(runner, "fills_scratch")
        assert (
            big.stopped_by == "error"
            and "env.scratch holds" in big.error
            and "was kept" in big.error
        )
        replaced = call(runner, "replaces_scratch")
        assert "env.scratch must stay a dict" in replaced.error
        assert call(runner, "recall", "k").returned == 1 and runner.violations == 0
    finally:
        runner.close()


def test_module_constants_are_read_only_in_every_call(tier) -> None:
    """The loophole: a mutable UPPER_CASE dict kept state until a restart silently reset it."""
    runner = open_runner(tier, STATEFUL)
    try:
        for skill in ("mutates_a_constant", "appends_to_a_constant"):
            outcome = call(runner, skill)
            assert (
                outcome.stopped_by == "error" and "module constants are read-only" in outcome.error
            )
            assert "env.scratch" in outcome.error
        assert call(runner, "reads_constants").returned == [0, ["a", "c"], {"calls": 0}]
    finally:
        runner.close()


def test_a_skill_env_outside_the_sandbox_has_the_same_members() -> None:
    from speedrunner.core.skill import SkillEnv

    env = SkillEnv(
        lambda a: {"text": a, "structured": {}, "done": False}, "start", {}, actions_left=2
    )
    env.act("x")
    assert (env.text, env.actions_left, env.scratch) == ("x", 1, {})


RETURNS = """
def returns(env, n):
    return "x" * n
"""


def test_a_returned_value_is_kept_up_to_its_cap_and_past_it_the_call_says_so(tier) -> None:
    """The returned value's cap is ``MAX_RETURN_BYTES`` characters of JSON (it was 1,000,000: a
    reply at that cap cost the parent 165 ms of CPU to check); the actor sees the value's first
    few hundred."""
    from speedrunner.core.skill import MAX_RETURN_BYTES

    runner = open_runner(tier, RETURNS)
    try:
        assert call(runner, "returns", MAX_RETURN_BYTES - 2).returned == "x" * (
            MAX_RETURN_BYTES - 2
        )
        over = call(runner, "returns", 100_000)
        assert over.stopped_by == "error" and over.returned is None
        assert (
            f"the skill returned 100002 characters of JSON; the limit is {MAX_RETURN_BYTES}"
            in over.error
        )
        assert runner.violations == 0 and call(runner, "returns", 3).returned == "xxx"
    finally:
        runner.close()
