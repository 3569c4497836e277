"""The parent trusts only what it observed: a sandbox that left the restricted layer and
writes what it likes on the protocol pipe costs one skill call (or analysis turn), counted
as a violation, and the record of that call is what the parent served."""

from __future__ import annotations

import inspect
import json
import select

import pytest

from speedrunner.core.episode_files import load_trajectory, save_trajectory
from speedrunner.core.runtime.skill_call import Skills
from speedrunner.core.sandbox import open_analysis_session
from speedrunner.core.sandbox.tracing import MAX_NODES
from speedrunner.core.skill import MAX_SCRATCH_VALUES
from speedrunner.core.trajectory import Trajectory

from .conftest import API, CODEBOOK, LIMITS, CounterEnv, call, still_works
from .hostile import SCENARIOS, HostileRunner

VIOLATIONS = {
    "forged_actions": "claims an action (#0) the parent did not serve",
    "two_results": "more arrived after the call's result",
    "late_result": "code in the sandbox wrote to the protocol pipe itself",
    "stale_id": "arrived while request",
    "deep_tree": "nested deeper than 40 calls",
    "huge_tree": "a message longer than",
    "wide_tree": f"a call tree of more than {MAX_NODES} calls",
    "claims_text": "an action record that is not",
    "hides_action": "accounts for 0 of the 1 actions",
    "long_action": "an action has 30000 characters",
    "garbage": "not JSON",
    "huge_scratch": "env.scratch is more than",
    "dense_scratch": f"env.scratch holds more than {MAX_SCRATCH_VALUES} JSON values",
    "values_over_the_budget": "JSON values (its commas, [ and {), more than the",
    "invented_name": (
        "names a nested call 'solve_the_level', which is not a function of the loaded codebook"
    ),
    "stopped_by_flood": "a call's stopped_by 'sssss",
    "huge_count": "calls_dropped is not a count",
    "junk_over_the_cap": "a message longer than",
}
ACCEPTED_AT_THE_CAPS = ("dense_return", "dense_tree", "dense_junk")
"""Replies just under every cap, made of as many small JSON values as fit (the costliest for the
parent to check: ``benchmarks/skill_reply_cpu.py``); an honest child could send each."""


@pytest.fixture
def hostile(tier, request):
    runner = HostileRunner(Skills(1, CODEBOOK, {}, API), tier, LIMITS, request.param)
    yield runner
    runner.close()


@pytest.mark.parametrize("hostile", sorted(VIOLATIONS), indirect=True)
def test_a_forged_or_broken_reply_ends_the_call_as_a_counted_violation(hostile) -> None:
    env = CounterEnv()
    pid = hostile.pid
    if hostile.scenario == "late_result":  # this call looks fine; the next one reads the late reply
        first = call(hostile, "forward", 3, timeout_s=20)
        assert first.error is None and first.returned == "first" and hostile.violations == 0
    outcome = call(hostile, "forward", 3, env=env, timeout_s=20)
    assert outcome.stopped_by == "error" and "broke the protocol" in outcome.error
    assert VIOLATIONS[hostile.scenario] in outcome.tree["sandbox_violation"], outcome.tree[
        "sandbox_violation"
    ]
    assert "the sandbox restarted" in outcome.error
    # The record is what the parent served: the actions it took, with the observations it saw.
    assert [a["action"] for a in outcome.tree["actions"]] == env.steps
    assert all(a["text"].startswith("The counter shows") for a in outcome.tree["actions"])
    assert outcome.tree["calls"] == [] and outcome.returned is None
    assert hostile.violations == 1
    json.dumps(outcome.tree)  # storable as it is
    still_works(hostile)  # a fresh (honest) process takes the next call
    assert hostile.pid != pid and hostile.violations == 1


def wait_for_bytes(process, timeout_s: float = 10.0) -> None:
    """Until the child has written something the parent has not read (bounded): orders the test's
    next request after a forgery without timing it."""
    ready, _, _ = select.select([process.channel.read_fd], [], [], timeout_s)
    assert ready, "the forgery was never written"


def test_a_result_forged_ahead_by_a_leftover_thread_is_never_believed(tier) -> None:
    """Attack: ids counted up, so a thread the first call left behind wrote, after that call's real
    result, a result for request n+1 ("FORGED", 50 invented nested calls, no action); the next call
    read it as its own answer, no violation. Now ids are random and anything waiting on the pipe
    before a request is sent is a violation: the call ends as one, and nothing forged is kept."""
    runner = HostileRunner(Skills(1, CODEBOOK, {}, API), tier, LIMITS, "delayed_forgery")
    try:
        first = call(runner, "forward", 3, timeout_s=20)
        assert (first.returned, first.error, runner.violations) == ("first", None, 0)
        wait_for_bytes(runner._process)
        outcome = call(runner, "forward", 3, timeout_s=20)
        assert outcome.returned != "FORGED" and outcome.tree["calls"] == []
        assert "wrote to the protocol pipe itself" in outcome.tree["sandbox_violation"]
        assert runner.violations == 1 and outcome.stopped_by == "error"
        still_works(runner)
    finally:
        runner.close()


def test_a_flood_of_deep_trees_never_breaks_the_stored_trajectory(tier, tmp_path) -> None:
    runner = HostileRunner(
        Skills(1, CODEBOOK, {}, API), tier, LIMITS, "deep_tree", hostile_starts=3
    )
    try:
        trees = [call(runner, "forward", 1, timeout_s=20).tree for _ in range(3)]
    finally:
        runner.close()
    assert runner.violations == 3
    from speedrunner.core.trajectory import ActorStep

    traj = Trajectory(
        split="train", index=0, task="t", seed=1, knowledge_version=1, instruction="i"
    )
    traj.steps = [
        ActorStep(
            index=i,
            call_id="c",
            observation="",
            raw_text="",
            reasoning=None,
            thought="",
            parsed_action="forward(1)",
            skill_call=tree,
        )
        for i, tree in enumerate(trees)
    ]
    path = save_trajectory(tmp_path, traj)
    assert load_trajectory(path).steps[2].skill_call["sandbox_violation"]


def test_an_honest_call_is_reconciled_with_what_the_parent_served(runner) -> None:
    """Nested calls keep their place; every action record is the parent's (text and done)."""
    env = CounterEnv()
    outcome = call(runner, "climb", 5, env=env, label="up")
    actions = [a for h in outcome.tree["calls"] for f in h["calls"] for a in f["actions"]]
    assert [a["text"] for a in actions] == [
        "The counter shows 1.",
        "The counter shows 2.",
        "The counter shows 3.",
    ]
    assert runner.violations == 0 and "sandbox_violation" not in outcome.tree


# ------------------------------------------------------------------ analysis
FORGE_WITH_THE_RIGHT_ID = """
import inspect, json, os, sys
rid = next(f.frame.f_locals["request"]["id"] for f in inspect.stack()
           if "request" in f.frame.f_locals)
os.write(int(sys.argv[3]),
         (json.dumps({"id": rid, "stdout": "", "error": "forged"}) + "\\n").encode())
print("real output")
"""
FORGE_WITHOUT_ID = """
import json, os, sys
os.write(int(sys.argv[3]),
         (json.dumps({"stdout": "", "error": "the experience helper is broken"}) + "\\n").encode())
"""


LEAVE_A_FORGER = """
import inspect, json, os, sys, threading, time
rid = next(f.frame.f_locals["request"]["id"] for f in inspect.stack()
           if "request" in f.frame.f_locals)
def forge():
    time.sleep(0.3)  # after this run's real reply
    guess = rid + 1 if isinstance(rid, int) else "0" * 32
    os.write(int(sys.argv[3]),
             (json.dumps({"id": guess, "stdout": "", "error": "forged"}) + "\\n").encode())
threading.Thread(target=forge, daemon=True).start()
print("started")
"""


def test_a_reply_a_thread_writes_ahead_for_the_next_run_is_a_violation(tier) -> None:
    """Attack: with counting ids, analysis code left a thread that wrote, after its run's reply, an
    error reply for the next run; that run (busy for a second) got "forged" as its result and no
    violation was counted. Now the reply waiting before the run is sent is a violation."""
    session = open_analysis_session(tier=tier, limits=LIMITS)
    try:
        first = session.run(LEAVE_A_FORGER, timeout_s=10)
        assert (first.stdout, first.error, first.violation) == ("started\n", None, None)
        wait_for_bytes(session._process)
        result = session.run("import time\ntime.sleep(1)\nprint('real')", timeout_s=10)
        assert result.violation is not None and "broke the protocol" in result.error
        assert "forged" not in result.error and session.violations == 1
        after = session.run("print('fresh')", timeout_s=10)
        assert (after.stdout, after.error, after.violation) == ("fresh\n", None, None)
    finally:
        session.close()


@pytest.mark.parametrize("code", [FORGE_WITH_THE_RIGHT_ID, FORGE_WITHOUT_ID])
def test_analysis_code_that_writes_its_own_reply_is_a_violation_and_later_runs_are_clean(
    tier, code
) -> None:
    """Caught at once when the forged reply is out of step or the real one is already queued;
    else by the next run's id check, before that run's code is believed. Either way exactly one
    violation, and no later run ever reads the forged reply."""
    session = open_analysis_session(tier=tier, limits=LIMITS)
    try:
        session.run("x = 1", timeout_s=10)
        result = session.run(code, timeout_s=10)
        following = session.run("print('next')", timeout_s=10)
        assert session.violations == 1
        caught = result if result.violation is not None else following
        assert "broke the protocol" in caught.error and "restarted" in caught.error
        assert "forged" not in (following.error or "") and "broken" not in (following.error or "")
        after = session.run("print('fresh', 'x' in dir())", timeout_s=10)
        assert (after.stdout, after.error, after.violation) == ("fresh False\n", None, None)
    finally:
        session.close()


def test_the_child_caps_traced_values_and_the_parent_accepts_them(runner) -> None:
    """A validator-clean skill that traces huge arguments: the tree stays small (it made 19 MB
    trees)."""
    source = (
        CODEBOOK
        + """

def big(env, n):
    return _echo(env, ["y" * 100_000] * n)


def _echo(env, items):
    return len(items)
"""
    )
    from .conftest import open_runner

    r = open_runner(runner.tier, source)
    try:
        outcome = call(r, "big", 50)
    finally:
        r.close()
    assert outcome.error is None and outcome.returned == 50
    assert len(json.dumps(outcome.tree)) < 20_000
    assert r.violations == 0


def test_hostile_scenarios_are_all_checked() -> None:
    assert set(VIOLATIONS) | {
        "max_valid_tree",
        "delayed_forgery",
        "every_key",
        *ACCEPTED_AT_THE_CAPS,
    } == set(SCENARIOS)
    assert inspect.getsource(HostileRunner._start_process)


def test_the_largest_accepted_trees_stop_being_kept_past_the_episodes_budget(tier) -> None:
    """Trees at the caps are accepted (no violation), but an episode keeps at most
    ``MAX_EPISODE_TREE_CHARS`` of annotations: later calls keep only the served actions."""
    from speedrunner.core.sandbox.skills import MAX_EPISODE_TREE_CHARS

    runner = HostileRunner(Skills(1, CODEBOOK, {}, API), tier, LIMITS, "max_valid_tree")
    try:
        trees = [call(runner, "forward", 1, timeout_s=20).tree]
        more = (
            MAX_EPISODE_TREE_CHARS // runner.tree_chars + 1
        )  # enough to pass the episode's budget
        trees += [call(runner, "forward", 1, timeout_s=20).tree for _ in range(more)]
    finally:
        runner.close()
    assert runner.violations == 0
    kept = [len(t["calls"]) for t in trees]
    assert kept[0] == MAX_NODES - 1 and kept[-1] == 0 and "annotations_dropped" in trees[-1]
    assert sum(len(json.dumps(t)) for t in trees) < 1.75 * MAX_EPISODE_TREE_CHARS


def test_every_key_the_parent_keeps_is_counted_where_it_is_kept(tier) -> None:
    """A child filling every key the parent keeps to its cap (nested stopped_by and calls_dropped,
    the root's error, prints of characters JSON escapes six-fold) and adding unknown keys of a
    megabyte: the unknown keys are dropped, everything kept is measured as the JSON it is (before,
    the root's error, stopped_by and calls_dropped were counted nowhere), and past the episode's
    budget later calls keep only the served actions."""
    from speedrunner.core.sandbox.skills import MAX_EPISODE_TREE_CHARS
    from speedrunner.core.sandbox.tracing import value_cost

    runner = HostileRunner(
        Skills(1, CODEBOOK, {}, API), tier, LIMITS, "every_key", hostile_starts=20
    )
    try:
        first = call(runner, "forward", 1, timeout_s=20)
        counted = runner.tree_chars
        more = MAX_EPISODE_TREE_CHARS // counted + 1  # enough to pass the episode's budget
        trees = [first.tree] + [call(runner, "forward", 1, timeout_s=20).tree for _ in range(more)]
    finally:
        runner.close()
    assert runner.violations == 0 and first.error is not None
    assert len(first.tree["calls"]) == MAX_NODES - 1 and "junk" not in json.dumps(trees)
    child_part = {k: v for k, v in first.tree.items() if k != "actions"}
    assert counted >= value_cost(child_part) - 2000, (counted, value_cost(child_part))
    assert "annotations_dropped" in trees[-1] and trees[-1]["calls"] == []
    assert (
        len(trees[-1]["error"]) < 310
    )  # past the budget, a call keeps the served actions and a short error
    assert sum(value_cost(t) for t in trees) < MAX_EPISODE_TREE_CHARS + 1_000_000


@pytest.mark.parametrize("scenario", ["stopped_by_flood", "huge_count"])
def test_a_flood_of_uncounted_keys_keeps_nothing_of_it(tier, scenario) -> None:
    """30 calls (one episode) each answered with a 4 MB nested stopped_by kept 118.7 MiB before (now
    the call's message cap refuses 4 MB unread; the scenario sends 40 KB, which it lets through);
    now each is a counted violation and the stored trees hold only what the parent served."""
    runner = HostileRunner(Skills(1, CODEBOOK, {}, API), tier, LIMITS, scenario, hostile_starts=40)
    try:
        trees = [call(runner, "forward", 1, timeout_s=20).tree for _ in range(30)]
    finally:
        runner.close()
    assert runner.violations == 30
    assert sum(len(json.dumps(t)) for t in trees) < 200_000


@pytest.mark.parametrize("scenario", ACCEPTED_AT_THE_CAPS)
def test_replies_of_many_small_values_just_under_the_caps_are_accepted_and_kept_whole(
    tier, scenario
) -> None:
    """The cheaper checks refuse nothing an honest child may send: every value is kept as sent."""
    from speedrunner.core.skill import MAX_RETURN_VALUES

    runner = HostileRunner(Skills(1, CODEBOOK, {}, API), tier, LIMITS, scenario)
    try:
        outcome = call(runner, "forward", 1, timeout_s=20)
    finally:
        runner.close()
    assert runner.violations == 0 and outcome.error is None, outcome.tree.get("sandbox_violation")
    assert [a["action"] for a in outcome.tree["actions"]] == ["inc"]
    if scenario == "dense_return":
        assert outcome.returned == [0] * MAX_RETURN_VALUES
    elif scenario == "dense_tree":
        calls = outcome.tree["calls"]
        assert len(calls) == MAX_NODES - 1 and all(c["args"] == calls[0]["args"] for c in calls)
        assert len(calls[0]["args"][0]) > 20 and set(calls[0]["args"][0]) == {0}
    else:
        assert "junk" not in json.dumps(outcome.tree) and outcome.returned is None
