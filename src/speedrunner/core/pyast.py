"""``ast.parse`` and ``ast.literal_eval`` for code that may run in parallel episode threads.

CPython 3.11 does not build AST objects safely from several threads at once: the converter
keeps one recursion-depth counter per interpreter, and when a thread switch lands inside a
conversion (a garbage collection that runs a ``__del__`` is enough) two conversions
interleave and one raises ``SystemError: AST constructor recursion depth mismatch``
(python/cpython#106905). The run's episodes play in threads (``run.parallel_episodes``) and
each parses skill calls and codebooks, so every parse in the parent goes through this module:
one process-wide lock serialises the conversions (each takes microseconds to a few
milliseconds), and a codebook's function names are parsed once per source and shared.
``tests/core/test_pyast.py`` hammers these paths from many threads; a test there keeps any
other ``ast.parse`` out of the parent's code.
"""

from __future__ import annotations

import ast
import functools
import threading
from typing import Any

__all__ = ["AST_LOCK", "literal_eval", "parse", "parse_expression", "top_level_functions"]

AST_LOCK = threading.RLock()
"""Held while CPython builds AST objects; re-entrant so a helper may call another."""


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse`` under ``AST_LOCK`` (same errors: ``SyntaxError``, ``ValueError``, ...)."""
    with AST_LOCK:
        return ast.parse(source, filename=filename)


def parse_expression(source: str) -> ast.Expression:
    """``ast.parse(source, mode="eval")`` under ``AST_LOCK``."""
    with AST_LOCK:
        return ast.parse(source, mode="eval")


def literal_eval(node_or_text: str | ast.AST) -> Any:
    """``ast.literal_eval`` under ``AST_LOCK`` (a string is parsed first)."""
    with AST_LOCK:
        return ast.literal_eval(node_or_text)


@functools.lru_cache(maxsize=64)
def top_level_functions(source: str) -> frozenset[str]:
    """The names of the module's top-level functions, parsed once per source (empty if it does
    not parse). The result is immutable, so every episode of a knowledge version shares it."""
    try:
        tree = parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    return frozenset(
        n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    )
