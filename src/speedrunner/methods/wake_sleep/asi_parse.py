"""Reading an ASI induction answer: the new functions and the rewritten episode script.

Lenient about form (missing tags, code fences or not) and strict about meaning: only
top-level ``def``s count as functions, and anything that does not parse is reported to
the sleep log instead of being half-used.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

__all__ = ["Induction", "NewFunction", "parse_induction"]

_FUNCTIONS = re.compile(r"<functions>(.*?)(?:</functions>|$)", re.DOTALL)
_SCRIPT = re.compile(r"<script>(.*?)(?:</script>|$)", re.DOTALL)
_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class NewFunction:
    name: str
    source: str


@dataclass
class Induction:
    functions: list[NewFunction] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)
    """Top-level import lines of the block (the functions may need them)."""
    script: list[str] = field(default_factory=list)
    problem: str | None = None
    """Why the functions block could not be used (a syntax error, no block at all)."""


def _code(block: str) -> str:
    fenced = _FENCE.findall(block)
    return "\n\n".join(fenced) if fenced else block


def parse_induction(text: str) -> Induction:
    """The functions (each top-level ``def`` with its own source) and the script lines."""
    result = Induction()
    script = _SCRIPT.search(text)
    if script is not None:
        lines = (line.strip().strip("`").strip() for line in _code(script.group(1)).splitlines())
        result.script = [line for line in lines if line and not line.startswith("#")]
    block = _FUNCTIONS.search(text)
    if block is None:
        result.problem = "no <functions> block in the answer"
        return result
    source = _code(block.group(1)).strip()
    if not source:
        return result
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        result.problem = f"the functions do not parse: line {e.lineno}: {e.msg}"
        return result
    lines = source.splitlines()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            segment = "\n".join(lines[start - 1: node.end_lineno])
            result.functions.append(NewFunction(node.name, segment + "\n"))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            result.imports.append("\n".join(lines[node.lineno - 1: node.end_lineno]))
    return result
