"""Which names in a function refer to the module's globals (Python's scoping rules).

A rename must change ``go_to()`` in another skill's body but not a local variable, a
parameter, an attribute ``obj.go_to`` or the string ``"go_to"``; the undefined-name check
must not flag a comprehension variable. Both need the same answer: for each ``Name`` node,
is it bound in an enclosing function scope, or does it resolve to the module? Classes,
``global`` and ``nonlocal`` are rejected by validation, so they need no modelling here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

_FUNCTION = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSION = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


@dataclass(frozen=True)
class GlobalRef:
    """A ``Name`` that resolves to the module; ``bound`` are the names local to the
    function (and comprehension) scopes around it, which would capture a rename to them."""

    node: ast.Name
    bound: frozenset[str]


def global_refs(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[GlobalRef]:
    """Every ``Name`` in a top-level function (its decorators, defaults and annotations
    included) that resolves to the module namespace, in source order."""
    out: list[GlobalRef] = []
    for part in _evaluated_outside(func):
        _walk(part, frozenset(), out)
    _scope(func, frozenset(), out)
    return sorted(out, key=lambda r: (r.node.lineno, r.node.col_offset))


def _evaluated_outside(
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda,
) -> Iterator[ast.AST]:
    """The parts of a function definition evaluated in the enclosing scope."""
    yield from getattr(node, "decorator_list", [])
    a = node.args
    yield from a.defaults
    yield from (d for d in a.kw_defaults if d is not None)
    if not isinstance(node, ast.Lambda):
        for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
            if arg is not None and arg.annotation is not None:
                yield arg.annotation
        if node.returns is not None:
            yield node.returns


def _params(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    a = node.args
    return {
        arg.arg
        for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]
        if arg is not None
    }


def _scope(
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda,
    enclosing: frozenset[str],
    out: list[GlobalRef],
) -> None:
    body = node.body if isinstance(node.body, list) else [node.body]
    local: set[str] = _params(node)
    for stmt in body:
        _bindings(stmt, local, in_comprehension=False)
    bound = enclosing | local
    for stmt in body:
        _walk(stmt, bound, out)


def _bindings(node: ast.AST, acc: set[str], *, in_comprehension: bool) -> None:
    """Names ``node`` binds in the current function scope (not in nested functions).

    Inside a comprehension only walrus targets bind here (PEP 572); its loop variables
    belong to the comprehension.
    """
    if isinstance(node, ast.NamedExpr):
        acc.add(node.target.id)
    elif in_comprehension:
        pass
    elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
        acc.add(node.id)
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        acc.add(node.name)
    elif isinstance(node, ast.Import | ast.ImportFrom):
        acc.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
    elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
        acc.add(node.name)
    elif isinstance(node, ast.MatchMapping) and node.rest:
        acc.add(node.rest)
    if isinstance(node, (*_FUNCTION, ast.ClassDef)):
        return  # their bodies are other scopes (walrus in a default is too rare to model)
    for child in ast.iter_child_nodes(node):
        _bindings(child, acc, in_comprehension=in_comprehension or isinstance(node, _COMPREHENSION))


def _walk(node: ast.AST, bound: frozenset[str], out: list[GlobalRef]) -> None:
    if isinstance(node, _FUNCTION):
        for part in _evaluated_outside(node):
            _walk(part, bound, out)
        _scope(node, bound, out)
        return
    if isinstance(node, _COMPREHENSION):
        generators = node.generators
        _walk(generators[0].iter, bound, out)  # the first iterable is evaluated outside
        targets: set[str] = set()
        for gen in generators:
            targets.update(n.id for n in ast.walk(gen.target) if isinstance(n, ast.Name))
        inner = bound | targets
        for i, gen in enumerate(generators):
            if i:
                _walk(gen.iter, inner, out)
            for cond in gen.ifs:
                _walk(cond, inner, out)
        parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        for part in parts:
            _walk(part, inner, out)
        return
    if isinstance(node, ast.Name):
        if node.id not in bound:
            out.append(GlobalRef(node, bound))
        return
    for child in ast.iter_child_nodes(node):
        _walk(child, bound, out)
