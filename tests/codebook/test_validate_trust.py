"""The validator's side of the restricted layer's promise: the known escape and its relatives
are rejected at edit time with a reason, and state between calls has one sanctioned place
(``env.scratch``): module constants cannot be changed and defaults cannot carry state."""

from __future__ import annotations

import pytest

from speedrunner.core.codebook import validate_source

from .helpers import RULES, module, only

ESCAPE = '''
def escape(env):
    """Reads the real builtins (the old layer let this through)."""
    box = []
    def grab(self, name, value):
        box.append(value)
    hook = dataclasses.make_dataclass("Hook", [], namespace={"__setattr__": grab})
    functools.update_wrapper(
        hook(), functools.update_wrapper, assigned=("__globals__",), updated=()
    )
    return box[0]["__builtins__"]["__import__"]("os").getpid()
'''


def test_the_make_dataclass_and_update_wrapper_escape_is_rejected() -> None:
    problems = validate_source(module("import dataclasses\nimport functools", ESCAPE), RULES)
    hooks = [p for p in problems if p.rule == "attribute-hook"]
    assert {p.message.split("(")[0] for p in hooks} == {"make_dataclass", "update_wrapper"}
    assert all(p.function == "escape" for p in hooks)
    assert "call make_dataclass without namespace=" in " ".join(str(p) for p in hooks)


@pytest.mark.parametrize(
    "body, rule, words",
    [
        (
            'return dataclasses.make_dataclass("X", [], bases=(type,))',
            "attribute-hook",
            "bases=...",
        ),
        (
            'return functools.wraps(env.act, functools.WRAPPER_ASSIGNMENTS + ("__globals__",))',
            "attribute-hook",
            "takes no attribute names",
        ),
        (
            'return type("X", (), {"__setattr__": print})',
            "class",
            "type(name, bases, dict) makes a class",
        ),
        (
            'return typing.get_args(typing.List["1"])[0]._evaluate({}, {}, frozenset())',
            "private-member",
            "private attribute ._evaluate",
        ),
    ],
)
def test_relatives_of_the_escape_are_rejected(body, rule, words) -> None:
    source = module(
        "import dataclasses\nimport functools\nimport typing",
        f'def f(env):\n    """Doc."""\n    {body}\n',
    )
    assert words in only(validate_source(source, RULES), rule).message


@pytest.mark.parametrize(
    "body",
    ["SEEN['x'] = 1", "SEEN.update(x=1)", "PATH.append(env.text)", "del SEEN['x']", "MARKS.add(1)"],
)
def test_changing_a_module_constant_is_rejected_with_the_scratch_as_the_fix(body) -> None:
    source = module(
        "SEEN = {}\nPATH = []\nMARKS = {0}", f'def f(env):\n    """Doc."""\n    {body}\n'
    )
    problem = only(validate_source(source, RULES), "module-state")
    assert "changes the module constant" in problem.message and "env.scratch" in str(problem)


def test_a_local_of_the_same_name_and_reading_a_constant_are_fine() -> None:
    source = module(
        "SEEN = {'a': 1}",
        '''def f(env):
    """Doc."""
    copy = dict(SEEN)
    copy["b"] = 2
    return [SEEN["a"], SEEN.get("a"), copy]''',
        '''def g(env):
    """Doc."""
    SEEN = {}
    SEEN["x"] = 1
    return SEEN''',
    )
    assert validate_source(source, RULES) == []


def test_a_mutable_default_argument_is_rejected() -> None:
    source = module(
        'def f(env, seen=[]):\n    """Doc."""\n    seen.append(1)\n    return len(seen)\n'
    )
    problem = only(validate_source(source, RULES), "module-state")
    assert "mutable default argument" in problem.message and "default to None" in str(problem)


@pytest.mark.parametrize(
    "default, shown",
    [
        ("_s=([],)", "[]"),
        ("box=(1, (2, {}))", "{}"),
        ("seen=frozenset([1])", None),
        ("queue=(deque(),)", "deque()"),
        ("*, cache={'n': 0}", None),
        ("key=lambda x, memo=[]: x", "[]"),
    ],
)
def test_a_mutable_value_nested_in_a_default_is_rejected_with_the_scratch_as_the_fix(
    default, shown
) -> None:
    """``def tally(env, _s=([],))`` counted 1, 2, 3... across calls: a tuple hid the list."""
    source = module(
        "from collections import deque", f'def f(env, {default}):\n    """Doc."""\n    return 1\n'
    )
    problem = only(validate_source(source, RULES), "module-state")
    assert "mutable default argument" in problem.message and "env.scratch" in str(problem)
    if shown is not None:
        assert f"`{shown}` inside it" in problem.message


def test_immutable_defaults_are_fine() -> None:
    source = module(
        "import math",
        "MOVES = ('a', 'b')",
        '''def f(env, n=3, dirs=("a", ("b", -1)), key=None,
      pick=lambda x: [x], scale=math.pi, moves=MOVES, *, label="x", flag=True):
    """Doc."""
    return [n, dirs, key, pick(1), scale, moves, label, flag]''',
    )
    assert validate_source(source, RULES) == []
