"""Every check a codebook module must pass before it can become a generation.

Each ``Problem`` names the rule, the function and the line, and says how to fix it: the
message goes back to the LLM that wrote the code, which should be able to act on it
without seeing this file. Function lines count from the function's first line (its
``def``), as its author wrote it; the module line is given too.

The static rules are defence in depth; the sandbox process is the real boundary. The last
check imports the module in that sandbox through the injected ``Rules.smoke_test``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Literal

from speedrunner.core import pyast
from speedrunner.core.codebook.parse import first_param
from speedrunner.core.codebook.rules import (
    ATTRIBUTE_BUILTINS,
    BUILTIN_NAMES,
    FORBIDDEN_MEMBERS,
    FORBIDDEN_NAMES,
    Rules,
)
from speedrunner.core.codebook.scopes import global_refs
from speedrunner.core.names import suggest

Rule = Literal[
    "syntax",
    "top-level",
    "constant",
    "class",
    "async",
    "decorator",
    "global",
    "import",
    "import-in-function",
    "forbidden-name",
    "dunder",
    "private-member",
    "dynamic-attribute",
    "size",
    "name-collision",
    "duplicate",
    "docstring",
    "env-parameter",
    "undefined-name",
    "smoke-test",
    "edit",
    "module-state",
    "attribute-hook",
]
_MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "pop",
        "remove",
        "clear",
        "sort",
        "reverse",
        "update",
        "setdefault",
        "popitem",
        "add",
        "discard",
        "difference_update",
        "intersection_update",
        "symmetric_difference_update",
    }
)
"""Methods that change a list, dict or set in place (a module constant is read-only)."""
_HOOK_KEYWORDS = {
    "make_dataclass": ("namespace", "bases", "decorator"),
    "update_wrapper": ("assigned", "updated"),
    "wraps": ("assigned", "updated"),
}
"""Keyword arguments through which the interpreter would read or write dunder attributes for the
code."""
_STATE_FIX = (
    "keep state between calls of one episode in env.scratch (a dict of JSON values that survives a "
    "sandbox restart); module constants are read-only"
)
_CONSTANT_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Problem:
    """Why a candidate was rejected, for its author."""

    rule: Rule
    message: str
    function: str | None = None
    line: int | None = None
    """Line in the candidate module."""
    function_line: int | None = None
    """Line within ``function``, its first line being 1."""
    fix: str | None = None
    cap: str | None = None
    """The library cap this problem is, when it is one (``max_functions``,
    ``max_codebook_chars``): each rejection by one is counted as a cap hit."""

    def __str__(self) -> str:
        if self.function is not None and self.function_line is not None:
            where = f"function {self.function!r}, line {self.function_line}"
            where += f" (module line {self.line})" if self.line is not None else ""
        elif self.function is not None:
            where = f"function {self.function!r}"
        elif self.line is not None:
            where = f"module line {self.line}"
        else:
            where = "module"
        fix = f" Fix: {self.fix}" if self.fix else ""
        return f"{where} [{self.rule}]: {self.message}.{fix}"


def validate_source(source: str, rules: Rules, *, smoke: bool = True) -> list[Problem]:
    """All problems of ``source`` as a codebook module (empty: it may become a generation).

    The smoke test runs only when every static rule passed (and ``smoke`` is true): code
    that fails them is never executed, not even in the sandbox. An exception from the smoke
    test itself (sandbox broken) propagates: that is not the author's fault.
    """
    try:
        tree = pyast.parse(source)
    except SyntaxError as e:
        return [
            Problem(
                "syntax",
                f"the module does not parse: {e.msg}",
                line=e.lineno,
                fix="correct the syntax at that line",
            )
        ]
    checker = _Checker(source, rules)
    checker.check(tree)
    problems = checker.problems
    if not problems and smoke and rules.smoke_test is not None:
        error = rules.smoke_test(source)
        if error:
            problems.append(
                Problem(
                    "smoke-test",
                    f"importing the module in the sandbox failed: {error.strip()}",
                    fix="make the module importable: it may only define functions and constants",
                )
            )
    return problems


class _Checker:
    def __init__(self, source: str, rules: Rules) -> None:
        self.source = source
        self.rules = rules
        self.limits = rules.limits
        self.problems: list[Problem] = []
        self.module_names: dict[str, tuple[str, int]] = {}  # name -> (what, line)
        self.modules: set[str] = set()  # names bound to imported modules (``import re``)
        self.lines = source.splitlines()

    def add(
        self,
        rule: Rule,
        message: str,
        *,
        node: ast.AST | None = None,
        func: Function | None = None,
        fix: str | None = None,
        cap: str | None = None,
    ) -> None:
        line = getattr(node, "lineno", None)
        if func is None:
            self.problems.append(Problem(rule, message, None, line, None, fix, cap))
            return
        start = _start(func)
        self.problems.append(
            Problem(rule, message, func.name, line, None if line is None else line - start + 1, fix)
        )

    def statement(self, node: ast.AST) -> str:
        text = self.lines[node.lineno - 1].strip() if node.lineno <= len(self.lines) else ""
        return text if len(text) <= 60 else text[:57] + "..."

    # ------------------------------------------------------------------- module
    def check(self, tree: ast.Module) -> None:
        max_chars = self.limits.max_total_chars
        if max_chars is not None and len(self.source) > max_chars:
            self.add(
                "size",
                f"the module has {len(self.source)} characters, more than the cap of "
                f"{max_chars} (method.max_codebook_chars)",
                fix="delete unused functions or shorten long ones",
                cap="max_codebook_chars",
            )
        functions: list[Function] = []
        for i, node in enumerate(tree.body):
            if i == 0 and _is_docstring(node):
                continue
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                functions.append(node)
                self.bind(node.name, "function", node)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                self.check_import(node)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                self.check_constant(node)
            elif isinstance(node, ast.ClassDef):
                self.add(
                    "class",
                    f"class {node.name!r} is not allowed: a codebook holds functions only",
                    node=node,
                    fix="use functions, and dicts or tuples for data",
                )
            elif isinstance(node, ast.Global | ast.Nonlocal):
                self.add(
                    "global",
                    f"`{self.statement(node)}` is not allowed",
                    node=node,
                    fix="return values instead of writing module state",
                )
            else:
                self.add(
                    "top-level",
                    f"top-level statement `{self.statement(node)}` is not allowed: the module "
                    "may hold only imports, function definitions and UPPER_CASE constants "
                    "assigned literals",
                    node=node,
                    fix="move it into a function",
                )
        max_functions = self.limits.max_functions
        if max_functions is not None and len(functions) > max_functions:
            self.add(
                "size",
                f"the module defines {len(functions)} functions, more than the cap of "
                f"{max_functions} (method.max_functions)",
                fix="delete or merge functions",
                cap="max_functions",
            )
        for func in functions:
            self.check_function(func)

    def bind(self, name: str, what: str, node: ast.AST) -> None:
        """Record a module-level name; a second binding is a duplicate,
        any is checked for collisions."""
        func = node if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else None
        if name in self.module_names:
            first_what, first_line = self.module_names[name]
            if what == first_what == "import":
                return  # ``from typing import Any`` twice binds the same object
            fix = (
                "keep one definition (edit the existing function instead of adding another)"
                if what == first_what == "function"
                else f"rename the {what}"
            )
            self.add(
                "duplicate",
                f"{name!r} is defined twice: as {_a(first_what)} at module line {first_line} "
                f"and as {_a(what)} at module line {node.lineno}",
                node=node,
                func=func,
                fix=fix,
            )
            return
        self.module_names[name] = (what, node.lineno)
        if what == "import":
            return
        if name.startswith("__"):
            self.add(
                "dunder",
                f"the name {name!r} starts with a double underscore",
                node=node,
                func=func,
                fix="use a single leading underscore for a private helper: "
                f"{'_' + name.lstrip('_')!r}",
            )
        elif name in BUILTIN_NAMES:
            self.add(
                "name-collision",
                f"{name!r} shadows the Python builtin {name}",
                node=node,
                func=func,
                fix="choose another name",
            )
        elif name in self.rules.api_names:
            self.add(
                "name-collision",
                f"{name!r} shadows {name} of the skill API ({self.rules.api_module})",
                node=node,
                func=func,
                fix=f"call the API's {name} instead, or choose another name",
            )
        elif what == "function" and name.lower() in self.rules.reserved_actions():
            action = self.rules.reserved_actions()[name.lower()]
            self.add(
                "name-collision",
                f"{name!r} reads as the primitive action {action!r}, which the actor "
                "takes without a skill",
                node=node,
                func=func,
                fix="choose a name that says what the skill achieves, e.g. with a goal in it",
            )

    def check_import(self, node: ast.Import | ast.ImportFrom) -> None:
        allowed = ", ".join(sorted(self.rules.allowed_imports))
        api = self.rules.api_module
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == api:
                    self.add(
                        "import",
                        f"`import {api}` is not allowed",
                        node=node,
                        fix=f"import the names you use: `from {api} import ...`",
                    )
                elif alias.name not in self.rules.allowed_imports:
                    self.add(
                        "import",
                        f"module {alias.name!r} may not be imported (allowed: {allowed}, "
                        f"and names from {api})",
                        node=node,
                        fix="use the allowed modules or the skill API instead",
                    )
                else:
                    bound = alias.asname or alias.name.split(".")[0]
                    self.bind(bound, "import", node)
                    self.modules.add(bound)
            return
        module = node.module or ""
        if node.level or (module not in self.rules.allowed_imports and module != api):
            shown = "." * node.level + module
            self.add(
                "import",
                f"module {shown!r} may not be imported (allowed: {allowed}, and names from {api})",
                node=node,
                fix="use the allowed modules or the skill API instead",
            )
            return
        for alias in node.names:
            if alias.name == "*":
                self.add(
                    "import",
                    f"`from {module} import *` is not allowed",
                    node=node,
                    fix=f"name what you import: `from {module} import a, b`",
                )
            elif alias.name.startswith("_"):
                self.add(
                    "dunder" if alias.name.startswith("__") else "import",
                    f"{alias.name!r} is private to {module} and may not be imported",
                    node=node,
                    fix="use public names only",
                )
            elif alias.name in FORBIDDEN_MEMBERS:
                self.add(
                    "forbidden-name",
                    f"{module}.{alias.name} is not allowed (it evaluates strings as code)",
                    node=node,
                    fix="do not import it",
                )
            elif module == api and alias.name not in self.rules.api_names:
                self.add(
                    "import",
                    f"{alias.name!r} is not part of the skill "
                    f"API{suggest(alias.name, self.rules.api_names)} (it offers: "
                    f"{', '.join(sorted(self.rules.api_names))})",
                    node=node,
                    fix="import only names the skill API lists",
                )
            else:
                self.bind(alias.asname or alias.name, "import", node)

    def check_constant(self, node: ast.Assign | ast.AnnAssign) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if len(names) != len(targets) or not all(_CONSTANT_NAME.match(n) for n in names):
            self.add(
                "constant",
                f"`{self.statement(node)}`: a top-level assignment must bind one UPPER_CASE name",
                node=node,
                fix="name the constant in UPPER_CASE, or move the code into a function",
            )
            return
        try:
            if node.value is None:
                raise ValueError("no value")
            pyast.literal_eval(node.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            self.add(
                "constant",
                f"constant {names[0]} must be assigned a literal (number, string, True/False/None, "
                "or a tuple, list, dict or set of literals)",
                node=node,
                fix="compute the value inside the function that needs it",
            )
            return
        for name in names:
            self.bind(name, "constant", node)

    # ---------------------------------------------------------------- functions
    def check_function(self, func: Function) -> None:
        name, public = func.name, not func.name.startswith("_")
        if isinstance(func, ast.AsyncFunctionDef):
            self.add(
                "async",
                f"async function {name!r} is not allowed",
                node=func,
                func=func,
                fix="write a plain `def`: skills run synchronously",
            )
        for decorator in func.decorator_list:
            self.add(
                "decorator",
                f"decorator `@{ast.unparse(decorator)}` on {name!r} is not allowed (the sandbox "
                "calls and records codebook functions by name)",
                node=decorator,
                func=func,
                fix="remove the decorator and write its behaviour into the function",
            )
        start, end = _start(func), func.end_lineno or func.lineno
        text = "\n".join(self.lines[start - 1 : end])
        if end - start + 1 > self.limits.max_function_lines:
            self.add(
                "size",
                f"{name!r} has {end - start + 1} lines, more than the cap of "
                f"{self.limits.max_function_lines}",
                node=func,
                func=func,
                fix="move parts into private helper functions",
            )
        if len(text) > self.limits.max_function_chars:
            self.add(
                "size",
                f"{name!r} has {len(text)} characters, more than the cap of "
                f"{self.limits.max_function_chars}",
                node=func,
                func=func,
                fix="move parts into private helper functions",
            )
        if public:
            self.check_public(func)
        self.check_body(func)
        self.check_names(func)

    def check_public(self, func: Function) -> None:
        docstring = ast.get_docstring(func)
        if not docstring:
            self.add(
                "docstring",
                f"public function {func.name!r} has no docstring (the actor sees only its "
                "signature and docstring)",
                node=func,
                func=func,
                fix=f"add a docstring saying what it does and when to call it, or make it private "
                f"({'_' + func.name!r})",
            )
        elif len(docstring) > self.limits.max_docstring_chars:
            self.add(
                "size",
                f"the docstring of {func.name!r} has {len(docstring)} characters, more than the "
                f"cap of {self.limits.max_docstring_chars} (it is in every actor prompt)",
                node=func.body[0],
                func=func,
                fix="shorten it",
            )
        env = self.rules.env_param
        if env is not None and first_param(func) != env:
            self.add(
                "env-parameter",
                f"public function {func.name!r} must take the episode's SkillEnv as its "
                f"first parameter, named {env!r} (the sandbox passes it; the actor's call "
                "leaves it out)",
                node=func,
                func=func,
                fix=f"def {func.name}({env}, ...)",
            )

    def check_state(self, func: Function) -> None:
        """Module constants are read-only and defaults are not a store: state between calls goes in
        ``env.scratch``. The sandbox freezes constants anyway; this says so at edit time."""
        constants = {n for n, (what, _) in self.module_names.items() if what == "constant"}
        refs = {id(r.node) for r in global_refs(func) if r.node.id in constants}
        parents = {
            id(child): node for node in ast.walk(func) for child in ast.iter_child_nodes(node)
        }
        for node in ast.walk(func):
            if not (isinstance(node, ast.Name) and id(node) in refs):
                continue
            parent = parents.get(id(node))
            if isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Store | ast.Del):
                what = f"`{self.statement(parent)}` changes the module constant {node.id}"
            elif (
                isinstance(parent, ast.Attribute)
                and parent.attr in _MUTATORS
                and isinstance(parents.get(id(parent)), ast.Call)
            ):
                what = f"{node.id}.{parent.attr}(...) changes the module constant {node.id}"
            else:
                continue
            self.add("module-state", what, node=node, func=func, fix=_STATE_FIX)
        for default in [*func.args.defaults, *(d for d in func.args.kw_defaults if d is not None)]:
            part = _mutable_part(default)
            if part is None:
                continue
            shown = ast.unparse(part)
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            where = "" if part is default else f" (`{shown}` inside it)"
            self.add(
                "module-state",
                f"{func.name!r} has a mutable default argument{where}: a default is made once, "
                "so it would look like a place to keep state from call to call",
                node=default,
                func=func,
                fix="default to None or to numbers, strings and tuples of them, and build other "
                "values inside; " + _STATE_FIX,
            )

    def check_hooks(self, node: ast.Call, func: Function) -> None:
        """Calls that would make the interpreter read or write dunder attributes by name."""
        callee = (
            node.func.attr
            if isinstance(node.func, ast.Attribute)
            else node.func.id
            if isinstance(node.func, ast.Name)
            else None
        )
        for keyword in node.keywords:
            if keyword.arg in _HOOK_KEYWORDS.get(str(callee), ()):
                self.add(
                    "attribute-hook",
                    f"{callee}(..., {keyword.arg}=...) is not allowed (it reaches "
                    "attributes by name, past the dunder rule)",
                    node=node,
                    func=func,
                    fix=f"call {callee} without {keyword.arg}=",
                )
        if callee == "type" and len(node.args) == 3:
            self.add(
                "class",
                "type(name, bases, dict) makes a class, which a codebook may not",
                node=node,
                func=func,
                fix="use functions, and dicts or tuples for data",
            )
        elif callee in ("update_wrapper", "wraps") and len(node.args) > (
            2 if callee == "update_wrapper" else 1
        ):
            self.add(
                "attribute-hook",
                f"{callee} takes no attribute names in skill code",
                node=node,
                func=func,
                fix=f"call {callee} with the functions only",
            )

    def check_body(self, func: Function) -> None:
        call_funcs = {id(n.func) for n in ast.walk(func) if isinstance(n, ast.Call)}
        self.check_state(func)
        for node in ast.walk(func):
            if node is func:
                continue
            if isinstance(node, ast.Call):
                self.check_hooks(node, func)
            if isinstance(node, ast.ClassDef):
                self.add(
                    "class",
                    f"class {node.name!r} is not allowed",
                    node=node,
                    func=func,
                    fix="use functions, and dicts or tuples for data",
                )
            elif isinstance(node, ast.AsyncFunctionDef | ast.Await | ast.AsyncFor | ast.AsyncWith):
                self.add(
                    "async",
                    "async code is not allowed",
                    node=node,
                    func=func,
                    fix="write synchronous code",
                )
            elif isinstance(node, ast.Global | ast.Nonlocal):
                self.add(
                    "global",
                    f"`{self.statement(node)}` is not allowed",
                    node=node,
                    func=func,
                    fix="return values instead of writing module state",
                )
            elif isinstance(node, ast.Import | ast.ImportFrom):
                self.add(
                    "import-in-function",
                    f"`{self.statement(node)}` inside a function is not allowed",
                    node=node,
                    func=func,
                    fix="import at the top of the module",
                )
            elif (
                isinstance(node, ast.Name)
                and node.id.startswith("__")
                and node.id not in FORBIDDEN_NAMES
            ):
                self.add(
                    "dunder",
                    f"the name {node.id} is not allowed",
                    node=node,
                    func=func,
                    fix="do not reach into interpreter internals",
                )
            elif isinstance(node, ast.Attribute) and node.attr.startswith("__"):
                self.add(
                    "dunder",
                    f"the attribute .{node.attr} is not allowed",
                    node=node,
                    func=func,
                    fix="do not reach into interpreter internals",
                )
            elif (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and node.attr not in ("_asdict", "_replace", "_fields", "_field_defaults", "_make")
                and not (isinstance(node.value, ast.Name) and node.value.id in self.modules)
            ):
                self.add(
                    "private-member",
                    f"the private attribute .{node.attr} is not allowed",
                    node=node,
                    func=func,
                    fix="use public attributes only",
                )
            elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_MEMBERS:
                self.add(
                    "forbidden-name",
                    f".{node.attr} is not allowed (it evaluates strings as code)",
                    node=node,
                    func=func,
                    fix="do not use it",
                )
            elif isinstance(node, ast.Name) and node.id in ATTRIBUTE_BUILTINS:
                self.check_attribute_builtin(node, func, called=id(node) in call_funcs)
            elif isinstance(node, ast.arg) and node.arg.startswith("__"):
                self.add(
                    "dunder",
                    f"the parameter name {node.arg} is not allowed",
                    node=node,
                    func=func,
                    fix="use a plain name",
                )

    def check_attribute_builtin(self, node: ast.Name, func: Function, *, called: bool) -> None:
        call = next((c for c in ast.walk(func) if isinstance(c, ast.Call) and c.func is node), None)
        if not called or call is None:
            self.add(
                "dynamic-attribute",
                f"{node.id} may only be called directly",
                node=node,
                func=func,
                fix=f"call {node.id}(obj, 'name', ...) with a literal name",
            )
            return
        attr = call.args[1] if len(call.args) > 1 else None
        if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
            self.add(
                "dynamic-attribute",
                f"{node.id} needs a literal attribute name",
                node=node,
                func=func,
                fix="write the attribute name as a string literal, or use a dict for data keyed by "
                "name",
            )
        elif attr.value.startswith("_"):
            self.add(
                "dunder",
                f"{node.id} on the private attribute {attr.value!r} is not allowed",
                node=node,
                func=func,
                fix="use public attributes only",
            )

    def check_names(self, func: Function) -> None:
        """Names the function reads from the module must exist there (or be builtins); those
        that reach a forbidden builtin are rejected (a local variable ``input`` is harmless),
        and so is a private member of an imported module (``re._compile``)."""
        known = set(self.module_names) | BUILTIN_NAMES
        parents = {
            id(child): node for node in ast.walk(func) for child in ast.iter_child_nodes(node)
        }
        reported: set[str] = set()
        for ref in global_refs(func):
            name = ref.node.id
            parent = parents.get(id(ref.node))
            if name in FORBIDDEN_NAMES:
                self.add(
                    "forbidden-name",
                    f"{name} is not allowed in skill code",
                    node=ref.node,
                    func=func,
                    fix="compute with ordinary Python and the skill API",
                )
                continue
            if (
                name in self.modules
                and isinstance(parent, ast.Attribute)
                and parent.value is ref.node
                and parent.attr.startswith("_")
                and not parent.attr.startswith("__")
            ):
                self.add(
                    "private-member",
                    f"{name}.{parent.attr} is private to the module {name}",
                    node=parent,
                    func=func,
                    fix=f"use the public API of {name}",
                )
            if name in known or name in reported or name.startswith("__"):
                continue
            reported.add(name)
            self.add(
                "undefined-name",
                f"{name!r} is not defined: not a codebook function, import, constant "
                f"or builtin{suggest(name, known - BUILTIN_NAMES)}",
                node=ref.node,
                func=func,
                fix="define it, import it from an allowed module, or correct the name",
            )


_MUTABLE = (
    ast.List,
    ast.Dict,
    ast.Set,
    ast.ListComp,
    ast.DictComp,
    ast.SetComp,
    ast.GeneratorExp,
    ast.Call,
)
"""Default expressions whose value may be changed in place: containers and any call's result
(``deque()``, ``Counter()``, ``frozenset(...)``: a call is not checked for what it returns)."""


def _mutable_part(default: ast.expr) -> ast.expr | None:
    """The first part of a default's expression that may build a mutable value, at any depth (a
    tuple holding a list counts); a lambda's body runs per call, so only its own defaults count."""
    stack: list[ast.AST] = [default]
    while stack:
        node = stack.pop()
        if isinstance(node, _MUTABLE):
            return node  # type: ignore[return-value]
        if isinstance(node, ast.Lambda):
            stack.extend(d for d in [*node.args.defaults, *node.args.kw_defaults] if d is not None)
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return None


def _a(what: str) -> str:
    return f"an {what}" if what[0] in "aeiou" else f"a {what}"


def _start(func: Function) -> int:
    return min([func.lineno] + [d.lineno for d in func.decorator_list])


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )
