"""Loads an LLM-written codebook with a narrowed language, inside the sandbox child.

This is defence in depth, not the boundary: Python cannot be sandboxed in-process, and
the process (uid, namespaces, limits) is what actually contains skill code. What this
layer buys is a clear message for the author when a skill reaches for something skills
should never need, before it gets as far as the process boundary:

- imports only from an allow-list (``re``, ``math``, ``itertools``, ``collections``,
  ``functools``, ``dataclasses``, ``typing`` and the benchmark's skill API), served as
  proxy modules that carry public names only, never a module object (``typing.sys``) or
  a string evaluator (``typing.get_type_hints``);
- no ``open``, ``eval``, ``exec``, ``compile``, ``globals``, ``vars``, ``breakpoint``,
  ``input``, ``exit``; ``getattr`` and friends refuse dunder names;
- no dunder attribute access (``x.__class__.__subclasses__()`` is the classic escape),
  nor frame and code attributes (``f_globals``, ``gi_frame``...): a function that uses
  them is replaced by one that raises ``SkillCodeError``; module-level code that does
  fails the load.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import sys
import types
from collections.abc import Callable
from typing import Any

CODEBOOK_FILENAME = "codebook.py"
"""The filename skill tracebacks show (the codebook has no file of its own in the sandbox)."""

ALLOWED_MODULES = ("re", "math", "itertools", "collections", "collections.abc", "functools",
                   "dataclasses", "typing")
_HIDDEN_NAMES = {"typing": {"get_type_hints", "ForwardRef"},
                 "functools": {"singledispatch", "singledispatchmethod"}}
"""Public names that evaluate strings as code (annotations), which would bypass the checks."""
_ALLOWED_DUNDERS = frozenset({"__name__", "__doc__", "__qualname__", "__init__", "__post_init__", "__len__",
                              "__iter__", "__next__", "__repr__", "__str__", "__eq__", "__hash__", "__lt__",
                              "__le__", "__gt__", "__ge__", "__contains__", "__getitem__", "__enter__",
                              "__exit__"})
_BLOCKED_ATTRIBUTES = frozenset({
    "f_globals", "f_locals", "f_builtins", "f_back", "f_code", "tb_frame", "tb_next", "gi_frame", "gi_code",
    "cr_frame", "cr_code", "ag_frame", "ag_code", "co_code", "mro", "format_map"})
_BLOCKED_BUILTINS = frozenset({
    "open", "eval", "exec", "compile", "globals", "locals", "vars", "breakpoint", "input", "help", "exit",
    "quit", "copyright", "credits", "license", "memoryview", "__loader__", "__spec__", "__package__"})


class SkillCodeError(Exception):
    """Skill code used something skills may not use; the message says what and where."""


def load_codebook(source: str, api_module: str) -> tuple[dict[str, Any], list[str]]:
    """Run the codebook module in a fresh restricted namespace: ``(namespace, function names)``.

    The names are the codebook's own functions (public and private), the ones to trace.

    Raises ``SyntaxError`` or ``SkillCodeError`` (module-level problems), or whatever the
    module's own top-level code raises.
    """
    import linecache

    tree = ast.parse(source, CODEBOOK_FILENAME)
    refused: dict[str, list[str]] = {}
    body: list[ast.stmt] = []
    module_problems: list[str] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            outer = _problems([*stmt.decorator_list, stmt.args, *([stmt.returns] if stmt.returns else [])])
            inner = _problems(stmt.body)
            module_problems += outer
            if inner:
                refused[stmt.name] = inner
                continue
        else:
            module_problems += _problems([stmt])
        body.append(stmt)
    if module_problems:
        raise SkillCodeError("the codebook's module-level code is not allowed in a skill:\n  "
                             + "\n  ".join(module_problems))
    tree.body = body
    linecache.cache[CODEBOOK_FILENAME] = (len(source), None, source.splitlines(True), CODEBOOK_FILENAME)
    module = types.ModuleType("codebook")  # registered: dataclasses look their module up in sys.modules
    module.__builtins__ = safe_builtins(api_module)  # type: ignore[attr-defined]
    sys.modules["codebook"] = module
    namespace = module.__dict__
    exec(compile(tree, CODEBOOK_FILENAME, "exec"), namespace)
    for name, problems in refused.items():
        namespace[name] = _refusing(name, problems)
    functions = [name for name, value in namespace.items()
                 if name in refused or (isinstance(value, types.FunctionType)
                                        and value.__code__.co_filename == CODEBOOK_FILENAME)]
    return namespace, functions


def safe_builtins(api_module: str) -> dict[str, Any]:
    """The builtins skill code sees: the usual ones minus file, eval and introspection escapes."""
    names = {k: v for k, v in vars(builtins).items() if k not in _BLOCKED_BUILTINS}
    names["__import__"] = _importer(api_module)
    names["getattr"] = _guarded(getattr)
    names["hasattr"] = _guarded(hasattr)
    names["setattr"] = _guarded(setattr)
    names["delattr"] = _guarded(delattr)
    return names


def _problems(nodes: list[Any]) -> list[str]:
    found: list[str] = []
    for root in nodes:
        for node in ast.walk(root):
            if isinstance(node, ast.Attribute) and not _attribute_allowed(node.attr):
                found.append(f"line {node.lineno}: attribute {node.attr!r} is not allowed in skill code")
            elif isinstance(node, ast.Name) and node.id.startswith("__") and node.id not in ("__name__", "__doc__"):
                found.append(f"line {node.lineno}: name {node.id!r} is not allowed in skill code")
            elif isinstance(node, ast.ImportFrom) and node.level:
                found.append(f"line {node.lineno}: relative imports are not allowed in skill code")
    return found


def _attribute_allowed(name: str) -> bool:
    if name.startswith("__") and name.endswith("__"):
        return name in _ALLOWED_DUNDERS
    return name not in _BLOCKED_ATTRIBUTES


def _refusing(name: str, problems: list[str]) -> Callable[..., Any]:
    message = f"{name} cannot run:\n  " + "\n  ".join(problems)

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise SkillCodeError(message)

    refused.__name__ = refused.__qualname__ = name
    return refused


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(obj: Any, name: str, *rest: Any) -> Any:
        if isinstance(name, str) and not _attribute_allowed(name):
            raise SkillCodeError(f"{fn.__name__}(..., {name!r}) is not allowed in skill code")
        return fn(obj, name, *rest)

    guarded.__name__ = fn.__name__
    return guarded


def _importer(api_module: str) -> Callable[..., Any]:
    allowed = (*ALLOWED_MODULES, api_module)
    proxies: dict[str, types.ModuleType] = {}

    def proxy(name: str) -> types.ModuleType:
        if name not in proxies:
            proxies[name] = _public_view(importlib.import_module(name), _HIDDEN_NAMES.get(name, set()))
            if name == "collections":
                proxies[name].abc = proxy("collections.abc")  # type: ignore[attr-defined]
        return proxies[name]

    def restricted_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),
                          level: int = 0) -> types.ModuleType:
        if level:
            raise ImportError("relative imports are not allowed in skill code")
        if name not in allowed:
            raise ImportError(f"skill code may not import {name!r}; allowed: {', '.join(allowed)}")
        if fromlist or "." not in name:
            return proxy(name)
        top = name.split(".")[0]
        if top in allowed:
            return proxy(top)
        return _chain(name, proxy(name))  # `import a.b.skill_api` binds `a`: give a stub path to the API only

    return restricted_import


def _public_view(module: types.ModuleType, hidden: set[str]) -> types.ModuleType:
    view = types.ModuleType(module.__name__, module.__doc__)
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    for name in names:
        value = getattr(module, name, None)
        if name in hidden or name.startswith("_") or isinstance(value, types.ModuleType):
            continue
        setattr(view, name, value)
    return view


def _chain(dotted: str, leaf: types.ModuleType) -> types.ModuleType:
    parts = dotted.split(".")
    node = leaf
    for i in range(len(parts) - 1, 0, -1):
        parent = types.ModuleType(".".join(parts[:i]))
        setattr(parent, parts[i], node)
        node = parent
    return node


def preload(api_module: str) -> None:
    """Import what skill code may import while the child can still read the interpreter's files."""
    for name in (*ALLOWED_MODULES, api_module):
        importlib.import_module(name)
