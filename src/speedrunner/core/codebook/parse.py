"""A codebook module as parts: docstring, header (imports, constants), functions.

Edits work on parts and ``assemble`` writes them back in a fixed layout, so a function no
edit touched keeps its exact text (comments inside it included) from one generation to the
next. Signatures are rendered from the ``ast``, never by running the code.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from speedrunner.core import pyast


@dataclass(frozen=True)
class FunctionSource:
    """One top-level function: its exact text (decorators to last line) and where it was."""

    name: str
    text: str
    lineno: int
    """Module line of the first line of ``text``."""
    node: ast.FunctionDef | ast.AsyncFunctionDef = field(compare=False, repr=False)


@dataclass(frozen=True)
class ModuleParts:
    """A module split at top-level statements; every part is whole source lines."""

    docstring: str | None
    header: tuple[str, ...]
    """Everything else before, between or after the functions (imports, constants, and any
    statement validation will reject), in source order."""
    functions: tuple[FunctionSource, ...]


def _lines(lines: list[str], start: int, end: int) -> str:
    return "".join(lines[start - 1 : end]).rstrip("\n")


def _start(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno] + [d.lineno for d in decorators])


def split_module(source: str) -> ModuleParts:
    """Split ``source`` (which must parse) into parts. Statements sharing a line stay together."""
    tree = pyast.parse(source)
    lines = source.splitlines(keepends=True)
    body = list(tree.body)
    docstring = None
    if body and _is_docstring(body[0]):
        docstring = _lines(lines, body[0].lineno, body[0].end_lineno or body[0].lineno)
        body = body[1:]
    header: list[str] = []
    functions: list[FunctionSource] = []
    last_header_end = 0
    for node in body:
        start, end = _start(node), node.end_lineno or node.lineno
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions.append(FunctionSource(node.name, _lines(lines, start, end), start, node))
        elif start <= last_header_end:  # ``import re; import math``: one line, one part
            continue
        else:
            header.append(_lines(lines, start, end))
            last_header_end = end
    return ModuleParts(docstring, tuple(header), tuple(functions))


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def assemble(
    docstring: str | None, header: list[str] | tuple[str, ...], functions: list[str]
) -> str:
    """The module text for these parts: PEP 8 layout, one trailing newline."""
    blocks = []
    if docstring:
        blocks.append(docstring)
    if header:
        blocks.append("\n".join(header))
    top = "\n\n".join(blocks)
    body = "\n\n\n".join(text.rstrip() for text in functions)
    if top and body:
        return f"{top}\n\n\n{body}\n"
    return f"{top or body}\n"


def render_signature(
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda,
    name: str,
    *,
    hide_first: str | None = None,
) -> str:
    """``name(a: int, b: str = 'x', *, c=1) -> bool`` from the ``ast``.

    ``hide_first`` drops a first positional parameter of that name (the env handle the
    sandbox passes, which the actor never writes).
    """
    a = node.args
    positional = a.posonlyargs + a.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults)) + list(
        a.defaults
    )
    hidden = bool(positional) and hide_first is not None and positional[0].arg == hide_first
    params: list[str] = []
    for i, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        if not (hidden and i == 0):
            params.append(_param(arg, default))
        if a.posonlyargs and i == len(a.posonlyargs) - 1 and params:
            params.append("/")  # not after a hidden lone parameter: "f(/, x)" is no signature
    if a.vararg:
        params.append("*" + _param(a.vararg, None))
    elif a.kwonlyargs:
        params.append("*")
    for arg, kw_default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        params.append(_param(arg, kw_default))
    if a.kwarg:
        params.append("**" + _param(a.kwarg, None))
    returns = getattr(node, "returns", None)
    tail = f" -> {ast.unparse(returns)}" if returns is not None else ""
    return f"{name}({', '.join(params)}){tail}"


def _param(arg: ast.arg, default: ast.expr | None) -> str:
    text = arg.arg
    if arg.annotation is not None:
        text += f": {ast.unparse(arg.annotation)}"
        return text + (f" = {ast.unparse(default)}" if default is not None else "")
    return text + (f"={ast.unparse(default)}" if default is not None else "")


def first_param(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    positional = node.args.posonlyargs + node.args.args
    return positional[0].arg if positional else None
