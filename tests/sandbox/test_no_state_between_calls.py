"""No state between skill calls but ``env.scratch``, by construction: every call runs in a fresh
namespace of the codebook (its module code run anew), and objects every call shares (imported
modules' functions, classes and values) cannot be changed. Each attack below counted 1, 2, 3, 4,
5 over five calls of one episode's sandbox before (state that a sandbox restart, e.g. after a
timed-out call, silently reset); now every call sees what the first one saw."""

from __future__ import annotations

import pytest

from speedrunner.core.runtime.skill_call import Skills
from speedrunner.core.sandbox import open_skill_runner

from .conftest import LIMITS, call

ATTACKS = """
import functools
from collections import Counter, deque
from dataclasses import dataclass

from speedrunner.benchmarks.crafter.skill_api import ACTION_NAMES


def nested_default(env, _s=([],)):
    _s[0].append(1)
    return len(_s[0])


@functools.lru_cache(maxsize=None)
def _box(key):
    return []


def module_lru_cache(env):
    box = _box("calls")
    box.append(1)
    return len(box)


_store = {}


def module_dict(env):
    _store["n"] = _store.get("n", 0) + 1
    return _store["n"]


_queue = deque()


def module_deque(env):
    _queue.append(1)
    return len(_queue)


class Tally:
    n = 0


def class_attribute(env):
    Tally.n += 1
    return Tally.n


def _make_counter():
    seen = []

    def count(env):
        seen.append(1)
        return len(seen)
    return count


closure = _make_counter()


def api_list_through_the_list_type(env):
    list.append(ACTION_NAMES, "x")
    return len(ACTION_NAMES)


def scratch_counter(env):
    env.scratch["n"] = env.scratch.get("n", 0) + 1
    return env.scratch["n"]


def library_class_attribute(env):
    Counter.calls = 1
    return 1


def library_function_attribute(env):
    setattr(dataclass, "calls", 1)
    return 1


def decorating_a_library_class(env):
    functools.total_ordering(Counter)
    return 1


def own_objects_are_free(env):
    @dataclass
    class P:
        x: int

    class Box:
        n = 0
    Box.n += 1
    p = P(2)
    p.x += 1
    return [Box.n, p.x]
"""
PERSISTENCE = [
    "nested_default",
    "module_lru_cache",
    "module_dict",
    "module_deque",
    "class_attribute",
    "closure",
    "api_list_through_the_list_type",
]
SHARED_OBJECTS = [
    "library_class_attribute",
    "library_function_attribute",
    "decorating_a_library_class",
]


@pytest.fixture
def attacks(tier):
    runner = open_skill_runner(
        Skills(1, ATTACKS, {}, "speedrunner.benchmarks.crafter.skill_api"), tier=tier, limits=LIMITS
    )
    yield runner
    runner.close()


@pytest.mark.parametrize("skill", PERSISTENCE)
def test_five_calls_in_one_sandbox_see_the_same_state(attacks, skill) -> None:
    pid = attacks.pid
    returned = [call(attacks, skill).returned for _ in range(5)]
    assert attacks.pid == pid  # one process served them all: no restart reset anything
    assert len(set(returned)) == 1 and returned[0] is not None, returned


def test_the_scratch_still_carries_state_from_call_to_call(attacks) -> None:
    assert [call(attacks, "scratch_counter").returned for _ in range(5)] == [1, 2, 3, 4, 5]
    assert call(attacks, "module_dict").returned == 1  # and nothing else does, in between
    assert attacks.episode_scratch == {"n": 5}


@pytest.mark.parametrize("skill", SHARED_OBJECTS)
def test_objects_every_call_shares_cannot_be_changed(attacks, skill) -> None:
    for _ in range(2):
        outcome = call(attacks, skill)
        assert outcome.stopped_by == "error" and "outlives the skill call" in outcome.error, (
            outcome.error
        )
        assert "env.scratch" in outcome.error


def test_the_codebooks_own_classes_and_objects_can_still_be_changed(attacks) -> None:
    assert [call(attacks, "own_objects_are_free").returned for _ in range(2)] == [[1, 3], [1, 3]]
