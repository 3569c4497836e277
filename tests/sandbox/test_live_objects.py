"""Skill code reaches no live object of the sandbox child: every attempt below ran on the old
layer (the env was a mutable ``SkillEnv`` subclass holding the server's bound ``send``), and read
the pipe's server, the request id or kept state in a class between calls. Each is now refused
with a reason, and the sandbox goes on serving honest calls. The OS tier is the boundary either
way (``test_trust.py``); this is what the restricted layer itself promises."""

from __future__ import annotations

import pytest

from .conftest import call, open_runner, still_works

ATTEMPTS = '''
import functools
import math

from speedrunner.benchmarks.babyai.skill_api import SkillEnv


def forward(env, n):
    """Press inc n times; return the counter."""
    for _ in range(n):
        env.act("inc")
    return env.state["value"]


def cached_property_peek(env):
    cp = functools.cached_property(lambda self: None)
    cp.attrname = "_send"
    type(env).peek = cp
    return repr(env.peek)


def cached_property_on_the_instance(env):
    cp = functools.cached_property(lambda self: None)
    cp.attrname = "_send"
    return repr(cp.__get__(env))


def format_walks_dunders(env):
    return "{0.act.__self__}".format(env)


def format_reads_private(env):
    return "{0._send.__self__.call_id}".format(env)


def format_unbound(env):
    return str.format("{0.act.__globals__}", env)[:80]


def format_through_getattr(env):
    return getattr("{0.act.__globals__}", "format")(env)[:80]


def format_held_for_later(env):
    fill = "{0.__class__.__mro__}".format
    return fill(env)


def format_in_a_nested_spec(env):
    return "{0:{1.__class__}}".format(1, env)


def format_through_map(env):
    return list(map(str.format, ["{0.act.__func__}"], [env]))


def class_attribute_state(env):
    type(env).calls = getattr(type(env), "calls", 0) + 1
    return type(env).calls


def setattr_on_the_class(env):
    setattr(type(env), "calls", 1)
    return 1


def skill_api_class_state(env):
    SkillEnv.calls = 1
    return 1


def module_state(env):
    math.calls = 1
    return 1


def subclass_of_the_env(env):
    class Peek(type(env)):
        pass
    return Peek


def private_getattr(env):
    return getattr(env, "_send")


def vars_of_env(env):
    return vars(env)


def dict_of_env(env):
    return env.__dict__


def gc_referrers(env):
    import gc
    return gc.get_referrers(env)


def frame_of_a_traceback(env):
    try:
        env.act(5)
    except TypeError as e:
        return e.__traceback__.tb_frame.f_back.f_locals


def frame_of_a_generator(env):
    g = (x for x in [1])
    return g.gi_frame.f_back


def class_write(env):
    env.__class__ = dict


def class_write_by_setattr(env):
    setattr(env, "__class__", dict)


def metaclass_of_env(env):
    class Hook(metaclass=type(type(env))):
        pass
    return Hook


def object_getattribute(env):
    return object.__getattribute__(env, "_send")


def instance_attribute(env):
    env.memo = 1
    return 1


def legitimate_uses(env):
    env.scratch["seen"] = env.scratch.get("seen", 0) + 1
    return ["{} {:>3} {name}".format("a", 7, name=env.text[:3]), str.format("{0}", 1),
            "{0.real}".format(3), isinstance(env, SkillEnv), env.done, env.actions_left,
            env.scratch["seen"],
            [n for n in dir(env) if n.startswith("_") and not n.startswith("__")], repr(env)[:5]]
'''

ESCAPES = [
    ("cached_property_peek", "the env's class is read-only"),
    ("cached_property_on_the_instance", "attribute '__get__' is not allowed"),
    ("format_walks_dunders", "reads attribute '__self__'"),
    ("format_reads_private", "reads attribute '_send'"),
    ("format_unbound", "reads attribute '__globals__'"),
    ("format_through_getattr", "reads attribute '__globals__'"),
    ("format_held_for_later", "reads attribute '__class__'"),
    ("format_in_a_nested_spec", "reads attribute '__class__'"),
    ("format_through_map", "reads attribute '__func__'"),
    ("class_attribute_state", "the env's class is read-only"),
    ("setattr_on_the_class", "the env's class is read-only"),
    ("skill_api_class_state", "the env's class is read-only"),
    ("module_state", "module 'math' is read-only"),
    ("subclass_of_the_env", "cannot be subclassed"),
    ("private_getattr", "getattr(..., '_send') is not allowed"),
    ("vars_of_env", "name 'vars' is not defined"),
    ("dict_of_env", "attribute '__dict__' is not allowed"),
    ("gc_referrers", "may not import 'gc'"),
    ("frame_of_a_traceback", "attribute '__traceback__' is not allowed"),
    ("frame_of_a_generator", "attribute 'gi_frame' is not allowed"),
    ("class_write", "attribute '__class__' is not allowed"),
    ("class_write_by_setattr", "setattr(..., '__class__') is not allowed"),
    ("metaclass_of_env", "a metaclass is not allowed"),
    ("object_getattribute", "attribute '__getattribute__' is not allowed"),
    ("instance_attribute", "keep state between calls in env.scratch"),
]
LEAKS = ("SkillServer", "bound method", "Channel", "write_fd", "call_id")


@pytest.fixture
def attempts(tier):
    runner = open_runner(tier, ATTEMPTS)
    yield runner
    runner.close()


@pytest.mark.parametrize("skill, message", ESCAPES)
def test_no_way_to_a_live_object_or_state_outside_scratch(attempts, skill, message) -> None:
    first = call(attempts, skill)
    second = call(
        attempts, skill
    )  # a class or module attribute set by the first would persist here
    for outcome in (first, second):
        assert outcome.error is not None and message in outcome.error, (
            skill,
            outcome.returned,
            outcome.error,
        )
        assert not any(leak in repr(outcome.returned) for leak in LEAKS), outcome.returned
    still_works(attempts)


def test_the_env_still_does_what_skills_use(attempts) -> None:
    outcome = call(attempts, "legitimate_uses")
    assert outcome.error is None, outcome.error
    text, one, real, is_env, done, left, seen, private, shown = outcome.returned
    assert (text, one, real, is_env, done, left, seen, private, shown) == (
        "a   7 The",
        "1",
        "3",
        True,
        False,
        50,
        1,
        [],
        "<env:",
    )
    assert call(attempts, "forward", 2).returned == 2


def test_the_escape_table_covers_every_attempt() -> None:
    names = {line.split("(")[0][4:] for line in ATTEMPTS.splitlines() if line.startswith("def ")}
    assert names - {"forward", "legitimate_uses"} == {name for name, _ in ESCAPES}
