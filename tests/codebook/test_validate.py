"""Every validation rule: it rejects what it should, and its message names the function,
the line and the rule, and says how to fix it (the author is an LLM that sees only that)."""

from __future__ import annotations

import dataclasses

import pytest

from speedrunner.core.codebook import CodebookSizeLimits, Rules, normalise_action, validate_source
from speedrunner.core.codebook.rules import FORBIDDEN_NAMES

from .helpers import API, GO_TO, IMPORT_FIND, RULES, STEP, module, only


def problems_of(source: str, rules: Rules = RULES):
    return validate_source(source, rules)


def test_a_valid_module_passes() -> None:
    source = module(
        IMPORT_FIND + "\nimport re\n\nLIMIT = 3\nNAMES = ('a', -1, {'k': [1.5, None]})", GO_TO, STEP
    )
    assert problems_of(source) == []


def test_syntax_error_names_the_line() -> None:
    (p,) = problems_of('"""doc."""\n\ndef f(env:\n    pass\n')
    assert p.rule == "syntax" and p.line == 3
    assert str(p).startswith("module line 3 [syntax]: the module does not parse")


def test_top_level_statement_is_rejected_with_the_statement_quoted() -> None:
    p = only(
        problems_of(module('print("hi")', GO_TO.replace("_step(env, name)", "True"))), "top-level"
    )
    assert p.line == 3 and p.function is None
    assert 'top-level statement `print("hi")` is not allowed' in str(
        p
    ) and "move it into a function" in str(p)


@pytest.mark.parametrize(
    ("statement", "needle"),
    [
        ("speed = 3", "must bind one UPPER_CASE name"),
        ("A, B = 1, 2", "must bind one UPPER_CASE name"),
        ("LIMIT = len('abc')", "constant LIMIT must be assigned a literal"),
        ("LIMIT: int = 2 ** 8", "constant LIMIT must be assigned a literal"),
    ],
)
def test_constants_must_be_upper_case_literals(statement: str, needle: str) -> None:
    p = only(problems_of(module(statement)), "constant")
    assert p.line == 3 and needle in p.message and p.fix


def test_classes_are_rejected_at_top_level_and_inside_functions() -> None:
    p = only(problems_of(module("class Plan:\n    pass")), "class")
    assert p.line == 3 and "class 'Plan' is not allowed" in str(p)
    inner = '''
    def plan(env):
        """Plan."""
        class Step:
            pass
        return Step
    '''
    p = only(problems_of(module(inner)), "class")
    assert (p.function, p.function_line, p.line) == ("plan", 3, 5)
    assert str(p).startswith(
        "function 'plan', line 3 (module line 5) [class]: class 'Step' is not allowed"
    )


def test_async_functions_are_rejected() -> None:
    p = only(problems_of(module('async def wait(env):\n    """Wait."""\n    return 1')), "async")
    assert p.function == "wait" and p.function_line == 1 and "write a plain `def`" in str(p)


def test_decorators_are_rejected() -> None:
    source = module(
        f"import functools\n{IMPORT_FIND}",
        '@functools.cache\ndef look(env):\n    """Look."""\n    return find(env.state, "x")',
    )
    p = only(problems_of(source), "decorator")
    assert (p.function, p.function_line) == ("look", 1) and "`@functools.cache`" in p.message


@pytest.mark.parametrize("statement", ["global COUNT", "nonlocal COUNT"])
def test_global_and_nonlocal_are_rejected(statement: str) -> None:
    outer = (
        'def tick(env):\n    """Tick."""\n    COUNT = 0\n\n    def inner():\n        ' + statement
    )
    outer += "\n        COUNT = 1\n    inner()\n    return COUNT"
    p = only(problems_of(module(outer)), "global")
    assert (p.function, p.function_line) == ("tick", 6) and f"`{statement}` is not allowed" in str(
        p
    )
    assert "return values instead" in str(p)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (
            "import os",
            "module 'os' may not be imported (allowed: collections, collections.abc, dataclasses, "
            "functools, itertools, math, re, typing, and names from fake_skill_api)",
        ),
        ("from os import path", "module 'os' may not be imported"),
        ("from . import helpers", "module '.' may not be imported"),
        (f"import {API}", f"`import {API}` is not allowed"),
        ("from re import *", "`from re import *` is not allowed"),
        (
            f"from {API} import secret",
            "'secret' is not part of the skill API (it offers: ACTIONS, SkillEnv, find)",
        ),
        (f"from {API} import fnd", "'fnd' is not part of the skill API (did you mean 'find'?)"),
        ("from re import _compile", "'_compile' is private to re"),
    ],
)
def test_only_allowed_imports(line: str, needle: str) -> None:
    p = only(problems_of(module(line)), "import")
    assert p.line == 3 and needle in p.message, str(p)
    assert str(p).startswith("module line 3 [import]: ") and p.fix


def test_imports_inside_functions_are_rejected() -> None:
    source = module(
        'def parse(env):\n    """Parse."""\n    import re\n    return re.findall("a", env.text)'
    )
    p = only(problems_of(source), "import-in-function")
    assert (p.function, p.function_line) == (
        "parse",
        3,
    ) and "import at the top of the module" in str(p)


@pytest.mark.parametrize("name", sorted(FORBIDDEN_NAMES - {"__import__"}))
def test_forbidden_builtins_are_rejected_even_when_not_called(name: str) -> None:
    source = module(f'def sneaky(env):\n    """Sneaky."""\n    f = {name}\n    return f')
    p = only(problems_of(source), "forbidden-name")
    assert (p.function, p.function_line) == ("sneaky", 3)
    assert str(p).startswith(
        f"function 'sneaky', line 3 (module line 5) [forbidden-name]: {name} is not allowed"
    )


def test_a_local_variable_named_like_a_forbidden_builtin_is_harmless() -> None:
    source = module(
        'def ask(env):\n    """Ask."""\n    input = env.text\n    return [vars for vars in input]'
    )
    assert problems_of(source) == []


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("from typing import get_type_hints", 3),
        (
            'import typing\n\n\ndef hints(env):\n    """Hints."""\n    return '
            "typing.get_type_hints(hints)",
            8,
        ),
        (
            'import typing\n\n\ndef ref(env):\n    """Ref."""\n    return typing.ForwardRef("env")',
            8,
        ),
    ],
)
def test_typing_members_that_evaluate_strings_are_forbidden(source: str, line: int) -> None:
    p = only(problems_of(module(source)), "forbidden-name")
    assert p.line == line and "is not allowed (it evaluates strings as code)" in p.message


def test_private_members_of_imported_modules_are_rejected() -> None:
    source = module(
        'import re\n\n\ndef grab(env):\n    """Grab."""\n    return re._compile("a", 0)'
    )
    p = only(problems_of(source), "private-member")
    assert (p.function, p.function_line) == (
        "grab",
        3,
    ) and "re._compile is private to the module re" in str(p)
    assert problems_of(source.replace("re._compile", "re.compile")) == []


def test_dunder_import_is_forbidden() -> None:
    p = only(
        problems_of(module('def f(env):\n    """F."""\n    return __import__("os")')),
        "forbidden-name",
    )
    assert p.function_line == 3 and "__import__ is not allowed" in p.message


@pytest.mark.parametrize(
    ("expr", "needle"),
    [
        ("env.__class__", "the attribute .__class__ is not allowed"),
        ("().__class__.__base__.__subclasses__()", "the attribute .__subclasses__ is not allowed"),
        ("__builtins__", "the name __builtins__ is not allowed"),
        (
            "getattr(env, '__class__')",
            "getattr on the private attribute '__class__' is not allowed",
        ),
        ("setattr(env, '_send', None)", "setattr on the private attribute '_send' is not allowed"),
    ],
)
def test_dunder_access_is_rejected(expr: str, needle: str) -> None:
    problems = problems_of(module(f'def peek(env):\n    """Peek."""\n    return {expr}'))
    assert problems and all(
        p.rule == "dunder" and p.function == "peek" and p.function_line == 3 for p in problems
    )
    assert any(needle in p.message for p in problems), [str(p) for p in problems]


def test_a_double_underscore_function_name_is_rejected_with_a_private_name_suggested() -> None:
    p = only(problems_of(module("def __helper(env):\n    return 1")), "dunder")
    assert p.function == "__helper" and "'_helper'" in p.fix


@pytest.mark.parametrize(
    ("expr", "needle"),
    [
        ("getattr(env, name)", "getattr needs a literal attribute name"),
        ("list(map(getattr, [env], ['text']))", "getattr may only be called directly"),
    ],
)
def test_getattr_needs_a_literal_name(expr: str, needle: str) -> None:
    source = module(f'def read(env, name):\n    """Read."""\n    return {expr}')
    p = only(problems_of(source), "dynamic-attribute")
    assert (p.function, p.function_line) == ("read", 3) and needle in p.message
    assert problems_of(source.replace(expr, "getattr(env, 'text', '')")) == []


def test_size_caps_name_the_function_and_the_cap() -> None:
    small = dataclasses.replace(
        RULES,
        limits=CodebookSizeLimits(
            max_function_lines=4,
            max_function_chars=120,
            max_docstring_chars=20,
            max_functions=1,
            max_total_chars=300,
        ),
    )
    long_function = (
        'def walk(env):\n    """Walk a long way."""\n' + "    env.act('go forward')\n" * 4
    )
    problems = [str(p) for p in problems_of(module(long_function), small)]
    assert (
        "function 'walk', line 1 (module line 3) [size]: 'walk' has 6 lines, more than the cap of "
        "4. Fix: move parts into private helper functions" in problems
    )
    assert any("'walk' has 145 characters, more than the cap of 120" in p for p in problems)
    two = module(
        'def a(env):\n    """A docstring longer than twenty."""\n    return 1',
        'def b(env):\n    """B."""\n    return 2',
    )
    problems = [str(p) for p in problems_of(two, small)]
    assert any(
        "the docstring of 'a' has 31 characters, more than the cap of 20" in p for p in problems
    )
    assert any(
        p.startswith("module [size]: the module defines 2 functions, more than the cap of 1")
        for p in problems
    )
    big = module("DATA = '" + "x" * 400 + "'")
    assert any("more than the cap of 300" in str(p) for p in problems_of(big, small))


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("list", "'list' shadows the Python builtin list"),
        ("find", f"'find' shadows find of the skill API ({API})"),
        ("go_forward", "'go_forward' reads as the primitive action 'go forward'"),
        ("Pick_Up", "'Pick_Up' reads as the primitive action 'pick up'"),
        ("move_west", "'move_west' reads as the primitive action 'Move West'"),
        ("focus_on", "'focus_on' reads as the primitive action 'focus on OBJ'"),
    ],
)
def test_names_must_not_collide_with_builtins_api_or_actions(name: str, needle: str) -> None:
    p = only(
        problems_of(module(f'def {name}(env):\n    """Doc."""\n    return 1')), "name-collision"
    )
    assert (p.function, p.function_line, p.line) == (name, 1, 3) and needle in p.message and p.fix


def test_constants_must_not_shadow_the_api_and_private_helpers_may_echo_actions() -> None:
    p = only(problems_of(module("ACTIONS = ('x',)")), "name-collision")
    assert p.line == 3 and "'ACTIONS' shadows ACTIONS of the skill API" in p.message
    assert problems_of(module('def _go_forward(env):\n    return env.act("go forward")')) == []


def test_normalise_action() -> None:
    assert normalise_action("go forward") == normalise_action("Go  Forward") == "go_forward"
    assert normalise_action("Make Wood Pickaxe") == "make_wood_pickaxe"
    assert normalise_action("pour OBJ in OBJ") == "pour_in" and normalise_action("Noop") == "noop"


def test_duplicate_definitions_name_both_lines() -> None:
    twice = module(
        'def a(env):\n    """A."""\n    return 1', 'def a(env):\n    """A again."""\n    return 2'
    )
    p = only(problems_of(twice), "duplicate")
    assert (p.function, p.line) == ("a", 8)
    assert (
        "'a' is defined twice: as a function at module line 3 and as a function at module line 8"
        in p.message
    )
    assert "keep one definition" in p.fix
    clash = module("import re", 'def re(env):\n    """Re."""\n    return 1')
    p = only(problems_of(clash), "duplicate")
    assert "as an import at module line 3 and as a function at module line 6" in p.message


def test_public_functions_need_a_docstring_private_ones_do_not() -> None:
    p = only(problems_of(module("def explore(env):\n    return 1")), "docstring")
    assert (p.function, p.function_line) == ("explore", 1)
    assert "public function 'explore' has no docstring" in str(p) and "'_explore'" in p.fix
    assert problems_of(module("def _explore(env):\n    return 1")) == []


def test_public_functions_take_env_first() -> None:
    p = only(
        problems_of(module('def explore(steps):\n    """Explore."""\n    return steps')),
        "env-parameter",
    )
    assert (
        p.function == "explore" and "named 'env'" in p.message and p.fix == "def explore(env, ...)"
    )
    no_env = dataclasses.replace(RULES, env_param=None)
    assert (
        problems_of(module('def explore(steps):\n    """Explore."""\n    return steps'), no_env)
        == []
    )


def test_undefined_names_are_reported_once_with_a_suggestion() -> None:
    source = module(
        IMPORT_FIND, GO_TO.replace("_step(env, name)", "_stpe(env, name) or _stpe(env, name)"), STEP
    )
    p = only(problems_of(source), "undefined-name")
    assert (p.function, p.function_line) == ("go_to", 4)
    assert "'_stpe' is not defined" in p.message and "(did you mean '_step'?)" in p.message


def test_scoping_does_not_invent_undefined_names() -> None:
    tricky = '''
    def tricky(env, *args, key=None, **kw):
        """Every way a function binds a name."""
        total = sum(x * y for x in args for y in range(x) if y)
        pairs = {k: v for k, v in kw.items()}
        table = [[i for i in row] for row in [[1], [2]]]
        if (n := len(table)) > 1:
            pass
        first = [m for m in args if (last := m)]
        try:
            pass
        except ValueError as err:
            total += len(str(err))
        with open_like() if False else nullish() as handle:
            pass
        for a, (b, c) in []:
            del a
        match env:
            case {"k": found, **rest}:
                pass
            case [head, *tail]:
                pass
            case str() as word:
                pass

        def inner(z=total):
            return z + n + len(pairs) + len(first) + last

        def open_like():
            return inner
        nullish = lambda q=0: q  # noqa: E731
        return inner(), key, handle, b, c, found, rest, head, tail, word
    '''
    assert problems_of(module(tricky)) == []


def test_smoke_test_runs_only_on_statically_valid_code_and_its_error_is_reported() -> None:
    seen: list[str] = []

    def smoke(source: str) -> str | None:
        seen.append(source)
        return "NameError: name 'x' is not defined (line 5)"

    rules = dataclasses.replace(RULES, smoke_test=smoke)
    good = module('def a(env):\n    """A."""\n    return 1')
    (p,) = validate_source(good, rules)
    assert seen == [good] and p.rule == "smoke-test"
    assert str(p).startswith(
        "module [smoke-test]: importing the module in the sandbox failed: NameError: name 'x'"
    )
    assert [q.rule for q in validate_source(module("import os"), rules)] == ["import"] and len(
        seen
    ) == 1


def test_rules_for_a_real_skill_api_read_its_all() -> None:
    from speedrunner.benchmarks.babyai import skill_api
    from speedrunner.benchmarks.babyai.text import ACTIONS

    rules = Rules.for_api(skill_api.__name__, ACTIONS, None)
    assert (
        rules.api_names == frozenset(skill_api.__all__)
        and rules.reserved_actions()["toggle"] == "toggle"
    )
    p = only(
        validate_source(module('def in_front(env):\n    """X."""\n    return 1'), rules),
        "name-collision",
    )
    assert (
        "shadows in_front of the skill API (speedrunner.benchmarks.babyai.skill_api)" in p.message
    )
    with pytest.raises(ValueError, match="has no __all__"):
        Rules.for_api("speedrunner.core.atomic", [], None)
