"""Parallel episodes parse skill calls and codebooks in threads: those parses must not collide.

CPython 3.11 raises ``SystemError: AST constructor recursion depth mismatch`` when two threads
build AST objects at once and a thread switch lands inside one (python/cpython#106905). The
harness below provokes such switches: a tiny switch interval and a garbage collector that runs
often, collecting cycles whose ``__del__`` runs Python code, while many threads parse.
"""

from __future__ import annotations

import ast
import gc
import re
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from speedrunner.core import pyast
from speedrunner.core.runtime.actor import parse_answer
from speedrunner.core.sandbox.schema import codebook_functions

SRC = Path(__file__).resolve().parents[2] / "src" / "speedrunner"
THREADS = 8
ROUNDS = 30


def codebook(tag: int) -> str:
    """A codebook-sized module, different for every ``tag`` (so no cache answers it)."""
    return f"# version {tag}\n" + "\n".join(
        f"def f{i}(env, x: int = {i}) -> str:\n    '''Doc.'''\n"
        f"    return env.act([{{'a': (x, [1, 2, {{3: 4}}])}}][0]['a'])\n"
        for i in range(60)
    )


class _Cycle:
    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        for _ in range(3):  # Python code run by the collector: a chance for a thread switch
            pass


@pytest.fixture
def switchy() -> Iterator[None]:
    interval, thresholds = sys.getswitchinterval(), gc.get_threshold()
    sys.setswitchinterval(1e-6)
    gc.set_threshold(50, 1, 1)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)
        gc.set_threshold(*thresholds)


def hammer(parse_once: Callable[[int, int], None]) -> list[BaseException]:
    """Run ``parse_once(thread, round)`` from ``THREADS`` threads amid collectable cycles."""
    errors: list[BaseException] = []

    def work(thread: int) -> None:
        try:
            for r in range(ROUNDS):
                for _ in range(50):
                    _Cycle()
                parse_once(thread, r)
        except BaseException as e:  # noqa: BLE001 - every failure is the finding
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_the_harness_reproduces_the_interpreter_bug_with_bare_ast_parse(switchy: None) -> None:
    """The control: unserialised ``ast.parse`` fails under this harness (on interpreters that have
    the bug), so the tests below are strong enough to catch a parse that escaped the lock."""
    source = codebook(-1)
    errors = hammer(lambda t, r: ast.parse(source))
    if not errors:
        pytest.skip(
            f"Python {sys.version.split()[0]} builds ASTs from several threads without the error"
        )
    assert all(
        isinstance(e, SystemError) and "recursion depth mismatch" in str(e) for e in errors
    ), errors[:3]


def test_parallel_parsing_paths_never_collide(switchy: None) -> None:
    """What episode threads parse: the actor's skill calls, a new version's codebook, the
    runner's function list, and the codebook helpers, all at once."""
    signatures = {"go_to": "go_to(target: str, n: int = 1)", "f0": "f0(x: int = 0)"}

    def parse_once(thread: int, r: int) -> None:
        parsed = parse_answer(
            f"Thought: go.\nAction: go_to('red ball {thread}-{r}', n={r})",
            ["look"],
            skills=signatures,
        )
        assert parsed.skill_call is not None and parsed.skill_call.kwargs == {"n": r}, parsed
        source = codebook(thread * 1000 + r)
        functions = pyast.top_level_functions(source)
        assert len(functions) == 60
        assert codebook_functions(source) == functions
        assert len(pyast.parse(source).body) == 60
        assert pyast.literal_eval(f"[{r}, ({thread},)]") == [r, (thread,)]

    assert hammer(parse_once) == []


def test_a_codebook_is_parsed_once_per_version() -> None:
    source = codebook(424242)
    first = pyast.top_level_functions(source)
    assert pyast.top_level_functions(source) is first  # every episode's runner shares it
    assert codebook_functions(source) is first


def test_no_parse_in_the_parent_escapes_the_lock() -> None:
    """Every AST build in the parent goes through ``core/pyast.py``. The sandbox child
    (``sandbox/restrict.py``) runs one skill at a time in its own process."""
    allowed = {SRC / "core" / "pyast.py", SRC / "core" / "sandbox" / "restrict.py"}
    bare = re.compile(r"\bast\.(parse|literal_eval)\(|\bfrom ast import\b")
    found = [
        f"{path.relative_to(SRC)}:{n}"
        for path in sorted(SRC.rglob("*.py"))
        if path not in allowed
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if bare.search(line)
    ]
    assert found == [], (
        "parse through speedrunner.core.pyast (one lock for every thread): " + ", ".join(found)
    )
