"""What a hostile or broken skill can do, in every tier: each case checks that the parent is
fine, that the author is told what happened, and that the same runner takes the next call.

Skill code meets two layers. The restricted loader (no ``open``, no imports off the list,
no dunder attributes) answers most attacks with a clear error first; the process (limits,
uid 65534, namespaces, the wall-clock kill) is the boundary behind it, tested directly
with unrestricted code in ``test_analysis.py``.
"""

from __future__ import annotations

import pytest

from speedrunner.core.runtime.skill_call import SkillCall

from .conftest import call, still_works


def test_an_infinite_loop_times_out_and_the_next_call_gets_a_fresh_process(runner) -> None:
    pid = runner.pid
    outcome = call(runner, "spin", timeout_s=1.0)
    assert outcome.stopped_by == "timeout" and outcome.error is None
    assert "timed out after 1 s" in outcome.tree["error"]
    still_works(runner)
    assert runner.pid != pid and runner.processes_started == 2


def test_a_timeout_keeps_the_actions_the_parent_served(runner) -> None:
    outcome = call(runner, "catches_everything", max_actions=10_000_000, timeout_s=1.0)
    assert outcome.stopped_by == "timeout"
    assert len(outcome.tree["actions"]) > 0
    still_works(runner)


def test_a_memory_bomb_is_a_memory_error(runner) -> None:
    outcome = call(runner, "eat_memory", timeout_s=10)
    assert outcome.stopped_by == "error" and "MemoryError" in outcome.error
    still_works(runner)


def test_deep_recursion_is_a_short_recursion_error(runner) -> None:
    outcome = call(runner, "recurse")
    assert outcome.stopped_by == "error" and "RecursionError" in outcome.error
    assert "Previous line repeated" in outcome.error and len(outcome.error) <= 4100
    still_works(runner)


def test_a_huge_print_is_capped_and_the_rest_counted(runner) -> None:
    outcome = call(runner, "shout", timeout_s=20)
    assert outcome.returned == "shouted" and outcome.error is None
    prints = outcome.tree["prints"]
    assert prints.startswith("x" * 2000) and len(prints) < 2100  # LIMITS.max_print_chars = 2000
    assert "more printed characters not kept]" in prints
    still_works(runner)


@pytest.mark.parametrize(
    "skill, message",
    [
        ("exits", "SystemExit: 3"),
        ("calls_exit", "NameError: name 'exit' is not defined"),
    ],
)
def test_exiting_is_an_error_not_an_exit(runner, skill, message) -> None:
    pid = runner.pid
    outcome = call(runner, skill)
    assert outcome.stopped_by == "error" and message in outcome.error
    still_works(runner)
    assert runner.pid == pid


@pytest.mark.parametrize(
    "skill, message",
    [
        (
            "import_os",
            "skill code may not import 'os'",
        ),  # fork bombs, files, env, signals, os._exit
        ("import_socket", "skill code may not import 'socket'"),
        ("import_signal", "skill code may not import 'signal'"),
        ("import_builtins", "skill code may not import 'builtins'"),
        ("import_importlib", "skill code may not import 'importlib'"),
        ("dunder_import", "name '__import__' is not allowed in skill code"),
        ("getattr_escape", "getattr(..., '__class__') is not allowed in skill code"),
        ("subclasses_escape", "attribute '__class__' is not allowed in skill code"),
        ("module_escape", "has no attribute 'sys'"),
        ("opens_a_file", "NameError: name 'open' is not defined"),
    ],
)
def test_what_skills_may_not_touch_is_refused_with_a_reason(runner, skill, message) -> None:
    outcome = call(runner, skill)
    assert outcome.stopped_by == "error" and message in outcome.error, outcome.error
    still_works(runner)


@pytest.mark.parametrize(
    "skill, kind", [("returns_object", "object"), ("returns_set", "set"), ("returns_nan", "float")]
)
def test_a_value_that_cannot_be_sent_back_is_an_error(runner, skill, kind) -> None:
    outcome = call(runner, skill)
    assert outcome.stopped_by == "error"
    assert f"returned an object of type {kind} that cannot be sent back" in outcome.error
    assert "return str/int/float/bool/None/list/dict" in outcome.error
    still_works(runner)


def test_a_parent_side_step_failure_propagates_and_the_runner_recovers(runner) -> None:
    def broken_step(action):
        raise ConnectionError("env server died")

    with pytest.raises(ConnectionError):
        runner.call(
            SkillCall("forward", [1]),
            step=broken_step,
            observation={"text": "", "structured": {"value": 0}, "done": False},
            max_actions=5,
            timeout_s=5,
        )
    still_works(runner)
