"""The known ways out of the restricted layer, and their relatives, are closed in every tier.

Each skill below is code the old layer ran: it reached the real builtins (and from there
the child's own server object, which let it forge results). Now each fails with a
``SkillCodeError`` that names what was refused, and legitimate uses of the same modules
still work. The process is the boundary either way (``test_trust.py``).
"""

from __future__ import annotations

import pytest

from .conftest import call, open_runner, still_works

ESCAPES = '''
import dataclasses
import functools
import typing

from speedrunner.benchmarks.babyai.skill_api import find


def forward(env, n):
    """Press inc n times; return the counter."""
    for _ in range(n):
        env.act("inc")
    return env.state["value"]


def _real_builtins(box):
    return box[0]["__builtins__"]["__import__"]("os").getpid()


def namespace_hook(env):
    box = []
    def grab(self, name, value):
        box.append(value)
    hook = dataclasses.make_dataclass("Hook", [], namespace={"__setattr__": grab})
    functools.update_wrapper(hook(), functools.update_wrapper, assigned=("__globals__",), updated=())
    return _real_builtins(box)


def field_hook(env):
    box = []
    def grab(self, name, value):
        box.append(value)
    hook = dataclasses.make_dataclass("Hook", [("__setattr__", object, dataclasses.field(default=grab))])
    functools.update_wrapper(hook(), functools.update_wrapper, assigned=("__globals__",), updated=())
    return _real_builtins(box)


def base_hook(env):
    meta = dataclasses.make_dataclass("Meta", [], bases=(type,))
    return meta("X", (), {})


def decorator_hook(env):
    return dataclasses.make_dataclass("X", [], decorator=lambda cls, **kw: cls)


def assigned_globals(env):
    box = {}
    def sink():
        pass
    functools.update_wrapper(sink, functools.update_wrapper, assigned=("__globals__",), updated=())
    return box


def wrapper_assignments_plus(env):
    def sink():
        pass
    return functools.wraps(find, assigned=functools.WRAPPER_ASSIGNMENTS + ("__globals__",))(sink)


def copies_a_class_dict(env):
    def sink():
        pass
    functools.update_wrapper(sink, type)
    return "copied"


def type_three_args(env):
    box = []
    def grab(self, name, value):
        box.append(value)
    hook = type(type(find))("Hook", (), {"__setattr__": grab})
    functools.update_wrapper(hook(), find)
    return len(box)


def real_type_through_type(env):
    return [type(3) is int, isinstance(int, type), issubclass(type(int), type), type(type(int)) is type]


def class_statement_hook(env):
    class Hook:
        def __setattr__(self, name, value):
            pass
    return Hook


def metaclass_keyword(env):
    class Hook(metaclass=type):
        pass
    return Hook


def forward_ref_eval(env):
    ref = typing.get_args(typing.List["__import__('os').getpid()"])[0]
    return ref._evaluate({}, {}, frozenset())


def getattr_through_reduce(env):
    return functools.reduce(getattr, ["__globals__"], find)


def operator_attrgetter(env):
    import operator
    return operator.attrgetter("__globals__")(find)


def fields_of_a_forged_class(env):
    cls = type(dataclasses.Field)("X", (), {"__dataclass_fields__": {}})
    return dataclasses.fields(cls)


def legitimate_uses(env):
    def inner(x):
        """Doubles."""
        return 2 * x
    def wrapper(x):
        return inner(x)
    functools.update_wrapper(wrapper, inner)
    point = dataclasses.make_dataclass("Point", ["x", ("y", int, dataclasses.field(default=0))], frozen=True)
    p = point(1)
    return [wrapper.__name__, wrapper.__doc__, [f.name for f in dataclasses.fields(p)], dataclasses.asdict(p),
            isinstance(point, type), type(p).__name__, len(functools.WRAPPER_ASSIGNMENTS)]
'''  # noqa: E501 (skill source, kept byte for byte)

REFUSED = [
    ("namespace_hook", "make_dataclass(..., namespace=...) is not allowed"),
    ("field_hook", "field '__setattr__' is not allowed"),
    ("base_hook", "make_dataclass(..., bases=...) is not allowed"),
    ("decorator_hook", "make_dataclass(..., decorator=...) is not allowed"),
    ("assigned_globals", "take only the attribute names of WRAPPER_ASSIGNMENTS"),
    ("wrapper_assignments_plus", "take only the attribute names of WRAPPER_ASSIGNMENTS"),
    ("copies_a_class_dict", "copy from a function only"),
    ("type_three_args", "defining '__setattr__' is not allowed"),
    ("class_statement_hook", "a method named '__setattr__' is not allowed"),
    ("metaclass_keyword", "a metaclass is not allowed"),
    ("forward_ref_eval", "attribute '_evaluate' is not allowed"),
    ("getattr_through_reduce", "getattr(..., '__globals__') is not allowed"),
    ("operator_attrgetter", "may not import 'operator'"),
    ("fields_of_a_forged_class", "defining '__dataclass_fields__' is not allowed"),
]


@pytest.fixture
def escapes(tier):
    runner = open_runner(tier, ESCAPES)
    yield runner
    runner.close()


@pytest.mark.parametrize("skill, message", REFUSED)
def test_each_way_out_is_refused_with_a_reason(escapes, skill, message) -> None:
    outcome = call(escapes, skill)
    assert outcome.stopped_by == "error" and outcome.error is not None
    assert (
        "SkillCodeError" in outcome.error or "ImportError" in outcome.error
    ) and message in outcome.error, outcome.error
    still_works(escapes)


def test_type_still_answers_what_skill_code_asks_of_it(escapes) -> None:
    """``type(x)`` and ``isinstance(c, type)`` as usual; the metaclass it answers is the checked
    one."""
    assert call(escapes, "real_type_through_type").returned == [True, True, True, True]


def test_legitimate_uses_of_the_same_modules_still_work(escapes) -> None:
    outcome = call(escapes, "legitimate_uses")
    assert outcome.error is None, outcome.error
    assert outcome.returned == ["inner", "Doubles.", ["x", "y"], {"x": 1, "y": 0}, True, "Point", 5]
