"""The skill runner's contract with the episode: actions served through ``step``, the call
tree, the action cap, episode end, one process reused for every call, and ``close()``."""

from __future__ import annotations

import os
import time

import pytest

from speedrunner.core.benchmark import Budget, EpisodeSpec
from speedrunner.core.method import Knowledge
from speedrunner.core.runtime.episode import EpisodeContext, run_episode
from speedrunner.core.runtime.skill_call import Skills
from speedrunner.core.sandbox import open_skill_runner
from speedrunner.core.sandbox.process import SandboxStartError

from ..runtime.fakes import CounterEnv as EpisodeCounterEnv
from ..runtime.fakes import PolicyModel
from .conftest import API, LIMITS, CounterEnv, call, open_runner, still_works

CODEBOOK_LINE = "def forward(env, n):\n    return n\n"


def test_a_skill_takes_20_primitive_actions_through_step(runner) -> None:
    env = CounterEnv()
    outcome = call(runner, "forward", 20, env=env)
    assert (outcome.stopped_by, outcome.returned, outcome.error) == ("returned", 20, None)
    assert env.steps == ["inc"] * 20
    tree = outcome.tree
    assert tree["name"] == "forward" and tree["args"] == [20] and tree["kwargs"] == {}
    assert [a["action"] for a in tree["actions"]] == ["inc"] * 20
    assert tree["actions"][-1] == {"action": "inc", "text": "The counter shows 20.", "done": False}
    assert tree["returned"] == 20 and tree["stopped_by"] == "returned"


def test_nested_calls_form_the_tree_with_their_own_actions_and_prints(runner) -> None:
    outcome = call(runner, "climb", 5, label="up")
    assert outcome.returned == {"label": "up", "value": 3}  # 5 // 2, then 3 // 2
    tree = outcome.tree
    assert (
        tree["kwargs"] == {"label": "up"}
        and tree["prints"] == "up start\n"
        and tree["actions"] == []
    )
    halves = tree["calls"]
    assert [(h["name"], h["args"]) for h in halves] == [
        ("_half", [5]),
        ("_half", [3]),
    ]  # private ones too
    assert [(f["name"], f["args"], f["returned"]) for h in halves for f in h["calls"]] == [
        ("forward", [2], 2),
        ("forward", [1], 3),
    ]
    assert [len(f["actions"]) for h in halves for f in h["calls"]] == [2, 1]


def test_allowed_modules_and_the_skill_api_import_in_every_tier(runner) -> None:
    outcome = call(runner, "uses_the_allowed_modules")
    assert outcome.error is None and outcome.returned == [2, [0, 1, 2], 2, 2, 3, 16, True, None]
    outcome = call(runner, "dotted_import")
    assert outcome.error is None and outcome.returned == [None, True]


def test_the_action_cap_stops_a_skill_that_catches_every_exception(runner) -> None:
    env = CounterEnv()
    outcome = call(runner, "catches_everything", env=env, max_actions=7)
    assert outcome.stopped_by == "max_actions" and outcome.error is None
    assert env.steps == ["inc"] * 7 and len(outcome.tree["actions"]) == 7
    env = CounterEnv()
    outcome = call(
        runner, "swallows_the_stop", env=env, max_actions=3
    )  # even `except BaseException`
    assert outcome.stopped_by == "max_actions" and env.steps == ["inc"] * 3
    still_works(runner)


def test_an_act_after_the_episode_ended_stops_the_call(runner) -> None:
    env = CounterEnv(done_at=3)
    outcome = call(runner, "forward", 10, env=env)
    assert outcome.stopped_by == "episode_done" and env.steps == ["inc"] * 3
    assert outcome.tree["actions"][-1]["done"] is True
    outcome = call(runner, "forward", 1, env=env)  # the episode was over before the call
    assert outcome.stopped_by == "episode_done" and env.steps == ["inc"] * 3


def test_a_refused_action_is_an_env_error_inside_the_skill(runner) -> None:
    outcome = call(runner, "refused")
    assert outcome.returned == "refused: EnvError" and outcome.stopped_by == "returned"
    assert outcome.tree["actions"] == [
        {"action": "jump", "error": "'jump' is not an action (actions: inc, noop)"}
    ]
    outcome = call(runner, "refused_uncaught")
    assert outcome.stopped_by == "error" and "EnvError: 'jump' is not an action" in outcome.error


def test_errors_show_the_skills_own_traceback_only(runner) -> None:
    outcome = call(runner, "bad_arithmetic")
    assert outcome.stopped_by == "error"
    assert 'File "codebook.py"' in outcome.error and "in helper_that_fails" in outcome.error
    assert "ZeroDivisionError: division by zero" in outcome.error
    assert "sandbox" not in outcome.error  # no frames of our own machinery
    assert outcome.tree["calls"][0]["error"] == "ZeroDivisionError: division by zero"
    outcome = call(runner, "no_such_skill")
    assert "no skill named 'no_such_skill'" in outcome.error


def test_a_sandbox_is_launched_at_open_and_waited_for_at_its_first_call(tier) -> None:
    """Open returns before the child is up (it boots while the episode's model answers); one
    that does not come up fails the first call with the child's own words, and is not silently
    replaced by a second start."""
    runner = open_skill_runner(
        Skills(1, CODEBOOK_LINE, {}, "no_such_skill_api"), tier=tier, limits=LIMITS
    )
    try:
        assert runner.pid is not None and runner.processes_started == 1
        with pytest.raises(
            SandboxStartError, match=r"(?s)did not start .*No module named .no_such_skill_api"
        ):
            call(runner, "forward", 1)
        assert runner.processes_started == 1 and runner.pid is None
    finally:
        runner.close()


def test_one_process_serves_every_call_of_the_episode(runner) -> None:
    pid = runner.pid
    started = time.monotonic()
    for _ in range(20):
        still_works(runner)
    assert runner.pid == pid and runner.processes_started == 1
    assert (time.monotonic() - started) / 20 < 0.05  # milliseconds, not a process start


def test_close_kills_the_process_and_removes_scratch(tier) -> None:
    runner = open_runner(tier, "def forward(env, n):\n    return n\n")
    pid, scratch = runner.pid, runner.scratch
    assert scratch.is_dir() and os.path.exists(f"/proc/{pid}")
    runner.close()
    assert not scratch.exists() and not os.path.exists(f"/proc/{pid}")
    runner.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        runner.call(None, step=None, observation={}, max_actions=1, timeout_s=1)


def test_a_codebook_that_does_not_load_fails_each_call_clearly(tier) -> None:
    with open_runner(tier, "def forward(env, n):\n    return n +\n") as runner:
        for _ in range(2):
            outcome = call(runner, "forward", 1)
            assert outcome.stopped_by == "error" and "the codebook did not load" in outcome.error
            assert "SyntaxError" in outcome.error
    with open_runner(tier, "import os\n\ndef forward(env, n):\n    return n\n") as runner:
        assert "may not import 'os'" in call(runner, "forward", 1).error


def test_an_episode_runs_its_skill_calls_in_the_sandbox(tier) -> None:
    source = (
        "def count_to(env, n):\n    while env.state['value'] < n:\n        env.act('inc')\n"
        "    return env.state['value']\n"
    )
    skills = Skills(1, source, {"count_to": "count_to(n: int) -> int"}, API)
    opened = []

    def open_skills(s):
        opened.append(open_skill_runner(s, tier=tier, limits=LIMITS))
        return opened[-1]

    model = PolicyModel(lambda m, p, c: "Thought: skill.\nAction: count_to(3)")
    ctx = EpisodeContext(
        model,
        Knowledge(1, "Skills", "count_to(n)", skills=skills),
        Budget(5, None, 60.0),
        open_skills=open_skills,
    )
    traj = run_episode(EpisodeCounterEnv(), EpisodeSpec("train", 0, "count", 2), ctx)
    assert traj.success and traj.llm_calls == 1 and traj.env_actions == 3
    assert traj.sandbox_tier == tier and traj.steps[0].executed == ["inc"] * 3
    assert traj.steps[0].skill_call["returned"] == 3
    assert opened[0].pid is None  # the episode closed it
