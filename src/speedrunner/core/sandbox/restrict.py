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
  no private attribute (``ForwardRef._evaluate`` runs ``eval`` with the real builtins;
  only namedtuple's ``_asdict``/``_replace``/``_fields``/``_make`` are allowed), nor frame
  and code attributes (``f_globals``, ``gi_frame``...): a function that uses them is
  replaced by one that raises ``SkillCodeError``; module-level code that does fails the load;
- no way to have the interpreter read or write a dunder attribute on the code's behalf:
  ``functools.update_wrapper``/``wraps`` take only the default attribute names and a
  function to copy from; ``dataclasses.make_dataclass`` takes no ``namespace``, ``bases``
  or ``decorator`` and no field named with a leading underscore; a class (``class``
  statement or ``type(name, bases, dict)``) may define only the ordinary dunder methods
  (``__init__``, ``__eq__``, ...), never hooks such as ``__setattr__``, ``__getattribute__``
  or ``__set_name__``, nor take a metaclass. ``make_dataclass(namespace={"__setattr__": f})``
  plus ``update_wrapper(obj, target, assigned=(name,))`` read any dunder attribute before;
- ``str.format`` reads only attributes skill code could read itself: every ``<expr>.format``
  (and ``getattr(s, "format")``) is rewritten to a checked formatter, since a format string
  such as ``"{0.act.__globals__}"`` walks attributes no check of the source can see;
- no state between calls outside ``env.scratch``, by construction: the codebook is compiled
  once and every call runs it anew into a fresh namespace (``CompiledCodebook``); an attribute
  of anything every call shares (a module, a library function or class, an object a module
  exposes) cannot be set (``_writable``); imported modules are read-only views, whose lists and
  dicts are read-only copies made anew for each call; the env is a ``handle.SandboxEnv`` (no
  private state, a read-only class).
See docs/security.md for what this layer promises and what it does not.
"""

from __future__ import annotations

import _string
import ast
import builtins
import dataclasses
import functools
import importlib
import re
import string
import sys
import types
from collections.abc import Callable
from typing import Any

from speedrunner.core.sandbox.handle import SandboxEnv
from speedrunner.core.skill import SKILL_IMPORTS

CODEBOOK_FILENAME = "codebook.py"
"""The filename skill tracebacks show (the codebook has no file of its own in the sandbox)."""
CODEBOOK_MODULE = "codebook"
"""The module name of the codebook's namespace (the ``__module__`` of the classes it defines)."""

_HIDDEN_NAMES = {
    "typing": {
        "get_type_hints",
        "ForwardRef",
        "evaluate_forward_ref",
        "overload",
        "get_overloads",
        "clear_overloads",
    },
    "functools": {"singledispatch", "singledispatchmethod"},
}
"""Public names that evaluate strings as code (annotations), which would bypass the checks, or
that keep a registry across calls (``typing.overload``)."""
_ALLOWED_DUNDERS = frozenset(
    {
        "__name__",
        "__doc__",
        "__qualname__",
        "__init__",
        "__post_init__",
        "__len__",
        "__iter__",
        "__next__",
        "__repr__",
        "__str__",
        "__eq__",
        "__hash__",
        "__lt__",
        "__le__",
        "__gt__",
        "__ge__",
        "__contains__",
        "__getitem__",
        "__enter__",
        "__exit__",
    }
)
_ALLOWED_PRIVATE = frozenset({"_asdict", "_replace", "_fields", "_field_defaults", "_make"})
"""Private-looking attributes that are public API (namedtuple's)."""
_CLASS_DUNDERS = frozenset(
    {
        "__module__",
        "__qualname__",
        "__doc__",
        "__dict__",
        "__weakref__",
        "__annotations__",
        "__slots__",
        "__match_args__",
        "__orig_bases__",
        "__parameters__",
        "__static_attributes__",
        "__firstlineno__",
        "__abstractmethods__",
        "_abc_impl",
    }
)
"""Entries Python itself puts in a class's namespace."""
_BLOCKED_ATTRIBUTES = frozenset(
    {
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_back",
        "f_code",
        "tb_frame",
        "tb_next",
        "gi_frame",
        "gi_code",
        "cr_frame",
        "cr_code",
        "ag_frame",
        "ag_code",
        "co_code",
        "mro",
        "format_map",
    }
)
_BLOCKED_BUILTINS = frozenset(
    {
        "open",
        "eval",
        "exec",
        "compile",
        "globals",
        "locals",
        "vars",
        "breakpoint",
        "input",
        "help",
        "exit",
        "quit",
        "copyright",
        "credits",
        "license",
        "memoryview",
        "__loader__",
        "__spec__",
        "__package__",
    }
)


class SkillCodeError(Exception):
    """Skill code used something skills may not use; the message says what and where."""


_CONSTANT = re.compile(r"^[A-Z][A-Z0-9_]*$")
_READ_ONLY = (
    "module constants are read-only: keep state between calls of one episode in env.scratch "
    "(a dict of JSON values that survives a sandbox restart)"
)


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise TypeError(_READ_ONLY)


class FrozenList(list):  # type: ignore[type-arg]
    """A module constant's list: reads like a list, refuses every change."""

    append = extend = insert = pop = remove = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse


class FrozenDict(dict):  # type: ignore[type-arg]
    """A module constant's dict: reads like a dict, refuses every change."""

    pop = popitem = clear = update = setdefault = _refuse
    __setitem__ = __delitem__ = __ior__ = _refuse


class FrozenSet(set):  # type: ignore[type-arg]
    """A module constant's set: reads like a set, refuses every change."""

    add = discard = remove = pop = clear = update = _refuse
    difference_update = intersection_update = symmetric_difference_update = _refuse
    __ior__ = __iand__ = __isub__ = __ixor__ = _refuse


def frozen(value: Any, depth: int = 0) -> Any:
    """``value`` with every list, dict and set in it replaced by a read-only one (the rule that
    module constants hold no state; ``env.scratch`` is where state goes)."""
    if depth > 50:
        return value
    if isinstance(value, dict):
        return FrozenDict({k: frozen(v, depth + 1) for k, v in value.items()})
    if isinstance(value, list):
        return FrozenList(frozen(v, depth + 1) for v in value)
    if isinstance(value, tuple):
        return tuple(frozen(v, depth + 1) for v in value)
    if isinstance(value, set):
        return FrozenSet(value)
    return value


@dataclasses.dataclass(frozen=True)
class CompiledCodebook:
    """A checked, compiled codebook: ``instantiate`` runs it anew into a fresh namespace, so
    nothing one skill call leaves in module globals, defaults, closures or classes of the
    codebook reaches the next (``env.scratch`` is the one store between calls)."""

    code: types.CodeType
    refused: dict[str, list[str]]
    builtins: dict[str, Any]
    importer: _Importer

    def instantiate(self) -> tuple[dict[str, Any], list[str]]:
        """A fresh module of the codebook: ``(namespace, function names)``; the names are the
        codebook's own functions (public and private), the ones to trace. Raises whatever the
        module's own top-level code raises."""
        self.importer.refresh()
        module = types.ModuleType(
            CODEBOOK_MODULE
        )  # registered: dataclasses look their module up in sys.modules
        module.__builtins__ = self.builtins  # type: ignore[attr-defined]
        sys.modules[CODEBOOK_MODULE] = module
        namespace = module.__dict__
        exec(self.code, namespace)
        for name, value in list(namespace.items()):
            if _CONSTANT.match(name):
                namespace[name] = frozen(value)
        for name, problems in self.refused.items():
            namespace[name] = _refusing(name, problems)
        functions = [
            name
            for name, value in namespace.items()
            if name in self.refused
            or (
                isinstance(value, types.FunctionType)
                and value.__code__.co_filename == CODEBOOK_FILENAME
            )
        ]
        return namespace, functions


def compile_codebook(source: str, api_module: str) -> CompiledCodebook:
    """Check and compile an LLM-written codebook once (``CompiledCodebook.instantiate`` runs it).

    Raises ``SyntaxError`` or ``SkillCodeError`` (module-level problems).
    """
    import linecache

    tree = ast.parse(source, CODEBOOK_FILENAME)
    refused: dict[str, list[str]] = {}
    body: list[ast.stmt] = []
    module_problems: list[str] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            outer = _problems(
                [*stmt.decorator_list, stmt.args, *([stmt.returns] if stmt.returns else [])]
            )
            inner = _problems(stmt.body)
            module_problems += outer
            if inner:
                refused[stmt.name] = inner
                continue
        else:
            module_problems += _problems([stmt])
        body.append(stmt)
    if module_problems:
        raise SkillCodeError(
            "the codebook's module-level code is not allowed in a skill:\n  "
            + "\n  ".join(module_problems)
        )
    tree.body = body
    tree = ast.fix_missing_locations(_Rewriter().visit(tree))
    linecache.cache[CODEBOOK_FILENAME] = (
        len(source),
        None,
        source.splitlines(True),
        CODEBOOK_FILENAME,
    )
    importer = _Importer(api_module)
    return CompiledCodebook(
        compile(tree, CODEBOOK_FILENAME, "exec"), refused, _builtins(importer), importer
    )


def _builtins(importer: _Importer) -> dict[str, Any]:
    names = {k: v for k, v in vars(builtins).items() if k not in _BLOCKED_BUILTINS}
    names["__import__"] = importer
    names["__build_class__"] = _build_class
    names["type"] = GuardedType
    names["getattr"] = _guarded(getattr)
    names["hasattr"] = _guarded(hasattr)
    names["setattr"] = _guarded(setattr)
    names["delattr"] = _guarded(delattr)
    names[_FORMAT_HOOK] = _format_attribute
    names[_OWN_HOOK] = _writable
    return names


def _problems(nodes: list[Any]) -> list[str]:
    found: list[str] = []
    for root in nodes:
        for node in ast.walk(root):
            if isinstance(node, ast.Attribute) and not _attribute_allowed(node.attr):
                found.append(
                    f"line {node.lineno}: attribute {node.attr!r} is not allowed in skill code"
                )
            elif (
                isinstance(node, ast.Name)
                and node.id.startswith("__")
                and node.id not in ("__name__", "__doc__")
            ):
                found.append(f"line {node.lineno}: name {node.id!r} is not allowed in skill code")
            elif isinstance(node, ast.ImportFrom) and node.level:
                found.append(f"line {node.lineno}: relative imports are not allowed in skill code")
            elif (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and node.name.startswith("__")
                and node.name.endswith("__")
                and node.name not in _ALLOWED_DUNDERS
            ):
                found.append(
                    f"line {node.lineno}: a method named {node.name!r} is not allowed in skill code"
                )
    return found


def _attribute_allowed(name: str) -> bool:
    if name.startswith("__") and name.endswith("__"):
        return name in _ALLOWED_DUNDERS
    if name.startswith("_"):
        return name in _ALLOWED_PRIVATE
    return name not in _BLOCKED_ATTRIBUTES


def _check_class(name: Any, bases: tuple[Any, ...], namespace: Any, metaclass: Any = None) -> None:
    """Refuse a class that could hook attribute access or creation (see the module docstring)."""
    if metaclass is not None:
        raise SkillCodeError(f"class {name!r}: a metaclass is not allowed in skill code")
    for base in bases:
        if isinstance(base, type) and issubclass(base, type):
            raise SkillCodeError(
                f"class {name!r}: deriving from {base.__name__} (a metaclass) is not allowed"
            )
    for key in list(namespace):
        if not isinstance(key, str):
            raise SkillCodeError(f"class {name!r}: a non-string attribute name is not allowed")
        if (
            key.startswith("__") or key.endswith("__")
        ) and key not in _ALLOWED_DUNDERS | _CLASS_DUNDERS:
            raise SkillCodeError(
                f"class {name!r}: defining {key!r} is not allowed in skill code (only "
                f"{', '.join(sorted(_ALLOWED_DUNDERS))})"
            )


def _build_class(func: Any, name: Any, *bases: Any, **kwargs: Any) -> Any:
    """``__build_class__`` for skill code: the ``class`` statement, checked (``_check_class``)."""
    _check_class(name, bases, {}, kwargs.pop("metaclass", None))
    cls = builtins.__build_class__(func, name, *bases, **kwargs)
    _check_class(name, (), dict(vars(cls)))
    return cls


class _TypeMeta(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, type)

    def __subclasscheck__(cls, sub: Any) -> bool:
        return sub is cls or (isinstance(sub, type) and issubclass(sub, type))


class GuardedType(metaclass=_TypeMeta):
    """``type`` in skill code: ``type(x)`` as usual (a metaclass answer is this class again, so
    the real ``type`` never reaches skill code), ``type(name, bases, dict)`` checked."""

    def __new__(cls, *args: Any) -> Any:  # noqa: D102
        if len(args) == 1:
            kind = type(args[0])
            return GuardedType if issubclass(kind, type) else kind
        if len(args) != 3:
            raise TypeError("type() takes 1 or 3 arguments")
        name, bases, namespace = args
        if not isinstance(namespace, dict) or not isinstance(bases, tuple):
            raise TypeError("type(name, bases, dict): bases must be a tuple and dict a dict")
        _check_class(name, bases, namespace)
        return type(name, bases, dict(namespace))


_WRAPPER_NAMES = frozenset(functools.WRAPPER_ASSIGNMENTS) | frozenset(functools.WRAPPER_UPDATES)


def _check_wrapper_names(assigned: Any, updated: Any, wrapped: Any) -> None:
    for names in (assigned, updated):
        if isinstance(names, str) or not all(
            isinstance(n, str) and n in _WRAPPER_NAMES for n in names
        ):
            raise SkillCodeError(
                f"functools.update_wrapper/wraps take only the attribute names of "
                f"WRAPPER_ASSIGNMENTS and WRAPPER_UPDATES ({', '.join(sorted(_WRAPPER_NAMES))})"
            )
    if isinstance(wrapped, type | types.ModuleType) or not callable(wrapped):
        raise SkillCodeError(
            "functools.update_wrapper/wraps copy from a function only, not from "
            f"{type(wrapped).__name__!r} objects"
        )


def _update_wrapper(
    wrapper: Any,
    wrapped: Any,
    assigned: Any = functools.WRAPPER_ASSIGNMENTS,
    updated: Any = functools.WRAPPER_UPDATES,
) -> Any:
    _check_wrapper_names(assigned, updated, wrapped)
    if isinstance(wrapper, type | types.ModuleType):
        raise SkillCodeError("functools.update_wrapper updates a function only")
    _writable(wrapper)
    return functools.update_wrapper(wrapper, wrapped, tuple(assigned), tuple(updated))


def _wraps(
    wrapped: Any,
    assigned: Any = functools.WRAPPER_ASSIGNMENTS,
    updated: Any = functools.WRAPPER_UPDATES,
) -> Any:
    _check_wrapper_names(assigned, updated, wrapped)
    return functools.partial(
        _update_wrapper, wrapped=wrapped, assigned=tuple(assigned), updated=tuple(updated)
    )


_MAKE_DATACLASS_OPTIONS = frozenset(
    {
        "init",
        "repr",
        "eq",
        "order",
        "unsafe_hash",
        "frozen",
        "match_args",
        "kw_only",
        "slots",
        "weakref_slot",
    }
)


def _make_dataclass(cls_name: Any, fields: Any, **options: Any) -> Any:
    refused = sorted(set(options) - _MAKE_DATACLASS_OPTIONS)
    if refused:
        raise SkillCodeError(
            f"dataclasses.make_dataclass(..., {refused[0]}=...) is not allowed in skill code"
        )
    fields = list(fields)
    for item in fields:
        name = (
            item
            if isinstance(item, str)
            else (item[0] if isinstance(item, tuple | list) and item else None)
        )
        if not isinstance(name, str) or name.startswith("_"):
            raise SkillCodeError(
                f"dataclasses.make_dataclass: field {name!r} is not allowed (a field name may "
                "not start with an underscore)"
            )
    return dataclasses.make_dataclass(cls_name, fields, **options)


def _own_class(decorator: Callable[..., Any]) -> Callable[..., Any]:
    """A class decorator that changes the class it is given: for the codebook's own classes only."""

    def checked(cls: Any = None, /, **options: Any) -> Any:
        if cls is None:
            return lambda c: checked(c, **options)
        _writable(cls)
        return decorator(cls, **options)

    checked.__name__ = checked.__qualname__ = decorator.__name__
    checked.__doc__ = decorator.__doc__
    return checked


_GUARDED = {
    "functools": {
        "update_wrapper": _update_wrapper,
        "wraps": _wraps,
        "total_ordering": _own_class(functools.total_ordering),
    },
    "dataclasses": {
        "make_dataclass": _make_dataclass,
        "dataclass": _own_class(dataclasses.dataclass),
    },
}
"""Members of allowed modules replaced by checked versions (they read or write attributes by
name)."""


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
        if fn is getattr and name == "format":
            return _format_attribute(obj)
        if fn is setattr or fn is delattr:
            _writable(obj)
        return fn(obj, name, *rest)

    guarded.__name__ = fn.__name__
    return guarded


class _Importer:
    """``__import__`` for skill code: proxies of the allowed modules, built once per codebook.

    A proxy outlives the call, so a list, dict or set it exposes (a skill API's table of
    actions) is a read-only copy that ``refresh`` replaces before every call."""

    def __init__(self, api_module: str) -> None:
        self.allowed = (*SKILL_IMPORTS, api_module)
        self.proxies: dict[str, types.ModuleType] = {}
        self.mutable: list[tuple[types.ModuleType, str, Any]] = []

    def proxy(self, name: str) -> types.ModuleType:
        if name not in self.proxies:
            self.proxies[name] = _public_view(
                importlib.import_module(name), _HIDDEN_NAMES.get(name, set()), self.mutable
            )
            if name == "collections":
                _set(self.proxies[name], "abc", self.proxy("collections.abc"))
        return self.proxies[name]

    def refresh(self) -> None:
        """Fresh read-only copies of the mutable values the proxies expose."""
        for view, name, value in self.mutable:
            _set(view, name, frozen(value))

    def __call__(
        self, name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> types.ModuleType:
        if level:
            raise ImportError("relative imports are not allowed in skill code")
        if name not in self.allowed:
            raise ImportError(
                f"skill code may not import {name!r}; allowed: {', '.join(self.allowed)}"
            )
        if fromlist or "." not in name:
            return self.proxy(name)
        top = name.split(".")[0]
        if top in self.allowed:
            return self.proxy(top)
        return _chain(
            name, self.proxy(name)
        )  # `import a.b.skill_api` binds `a`: give a stub path to the API only


class ReadOnlyModule(types.ModuleType):
    """What ``import`` gives skill code: a module whose attributes cannot be set (a module
    outlives the call, so an attribute set on it would be state between calls)."""

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError(
            f"module {self.__name__!r} is read-only in skill code: keep state between calls of one "
            "episode in env.scratch"
        )

    __delattr__ = __setattr__  # type: ignore[assignment]


def _set(module: types.ModuleType, name: str, value: Any) -> None:
    types.ModuleType.__setattr__(module, name, value)


def _public_view(
    module: types.ModuleType, hidden: set[str], mutable: list[tuple[types.ModuleType, str, Any]]
) -> types.ModuleType:
    from speedrunner.core.skill import SkillEnv

    view = ReadOnlyModule(module.__name__, module.__doc__)
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    for name in names:
        value = getattr(module, name, None)
        if name in hidden or name.startswith("_") or isinstance(value, types.ModuleType):
            continue
        if (
            value is SkillEnv
        ):  # the class skill code sees is the env's own: read-only, nothing private
            value = SandboxEnv
        value = _GUARDED.get(module.__name__, {}).get(name, value)
        _SHARED.add(id(value))
        if type(value) in (list, dict, set, tuple):
            mutable.append((view, name, value))
            value = frozen(value)
        _set(view, name, value)
    return view


def _chain(dotted: str, leaf: types.ModuleType) -> types.ModuleType:
    parts = dotted.split(".")
    node = leaf
    for i in range(len(parts) - 1, 0, -1):
        parent = ReadOnlyModule(".".join(parts[:i]))
        _set(parent, parts[i], node)
        node = parent
    return node


_FORMAT_HOOK = "__skill_format__"
"""The builtin every ``<expr>.format`` in skill code is rewritten to call (a name skill code
cannot write itself: dunder names are refused before the rewrite)."""
_OWN_HOOK = "__skill_own__"
"""The builtin the object of every attribute assignment or deletion in skill code goes through."""


class _Rewriter(ast.NodeTransformer):
    """``x.format`` becomes ``__skill_format__(x)``: ``str.format`` walks attributes named in its
    format string (``"{0.act.__globals__}"``), which no check of the source can see. ``x.a = v``
    (and ``del x.a``, ``x.a += v``, ``for x.a in``) becomes ``__skill_own__(x).a = v``: only an
    object the call itself made may be changed (``_writable``)."""

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if node.attr == "format" and isinstance(node.ctx, ast.Load):
            return ast.copy_location(
                ast.Call(ast.Name(_FORMAT_HOOK, ast.Load()), [node.value], []), node
            )
        if isinstance(node.ctx, ast.Store | ast.Del):
            node.value = ast.copy_location(
                ast.Call(ast.Name(_OWN_HOOK, ast.Load()), [node.value], []), node.value
            )
        return node


_SHARED: set[int] = set()
"""Ids of the objects the allowed modules expose (kept alive by their modules): every call sees
the same ones, so skill code may not set their attributes."""


def _shared(obj: Any) -> str | None:
    """What ``obj`` is if it outlives a skill call (so setting its attributes would be state
    between calls), else ``None``: the codebook's own functions and classes are made anew by
    every call; modules, library functions and classes and the objects modules expose are not."""
    if isinstance(obj, ReadOnlyModule) or type(obj) is type(SandboxEnv):
        return None  # read-only already, and they say so themselves
    if isinstance(obj, types.ModuleType):
        return f"the module {obj.__name__!r}"
    if isinstance(obj, type):
        return None if obj.__module__ == CODEBOOK_MODULE else f"the class {obj.__name__!r}"
    if isinstance(obj, types.FunctionType):
        return (
            None
            if obj.__code__.co_filename == CODEBOOK_FILENAME
            else f"the function {obj.__name__!r}"
        )
    if id(obj) in _SHARED:
        return f"{type(obj).__name__!r} object of an imported module"
    return None


def _writable(obj: Any) -> Any:
    """``obj`` if skill code may set its attributes, else ``SkillCodeError`` saying where state
    goes."""
    what = _shared(obj)
    if what is not None:
        raise SkillCodeError(
            f"{what} outlives the skill call, so skill code may not set or delete its attributes: "
            "keep state between calls of one episode in env.scratch"
        )
    return obj


class _CheckedFormatter(string.Formatter):
    """``str.format`` whose fields may name only attributes skill code may read itself."""

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
        _, rest = _string.formatter_field_name_split(field_name)
        for is_attribute, name in rest:
            if is_attribute and not _attribute_allowed(name):
                raise SkillCodeError(
                    f"str.format: field {field_name!r} reads attribute {name!r}, which is not "
                    "allowed in skill code"
                )
        return super().get_field(field_name, args, kwargs)


_FORMATTER = _CheckedFormatter()


def _checked_format(text: str, /, *args: Any, **kwargs: Any) -> str:
    if not isinstance(text, str):
        raise TypeError(f"str.format needs a str, not {type(text).__name__}")
    return _FORMATTER.vformat(text, args, kwargs)


def _format_attribute(obj: Any) -> Any:
    """``obj.format`` for skill code: the checked ``str.format`` for a string (or ``str``
    itself)."""
    if obj is str or (isinstance(obj, type) and issubclass(obj, str)):
        return _checked_format
    if isinstance(obj, str):
        return functools.partial(_checked_format, obj)
    return obj.format


def preload(api_module: str) -> None:
    """Import what skill code may import while the child can still read the interpreter's files."""
    for name in (*SKILL_IMPORTS, api_module):
        importlib.import_module(name)
