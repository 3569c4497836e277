"""Every cap and allow-list the codebook validator applies, in one place.

The per-function caps bound what one LLM-written function may cost: its public part is
pasted into every actor prompt. The whole library is *not* capped by default: how large it
grows is a finding (the paper's ASI library reaches about 160 functions), so the two library caps
are per-method config (``method.max_functions``, ``method.max_codebook_chars``; null = no
cap) and reach ``CodebookSizeLimits`` through ``codebook_rules``. Change a default here, or pass a
``CodebookSizeLimits`` to ``Rules`` for one run.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass

MAX_FUNCTION_LINES = 60
"""Lines of one function, ``def`` line to last line: longer skills should be split."""
MAX_FUNCTION_CHARS = 3_000
MAX_DOCSTRING_CHARS = 800
"""A public docstring is in every actor prompt."""

ALLOWED_IMPORTS: frozenset[str] = frozenset(
    {
        "re",
        "math",
        "itertools",
        "collections",
        "collections.abc",
        "functools",
        "dataclasses",
        "typing",
    }
)
"""Standard modules skill code may import (besides the benchmark's skill API module)."""

FORBIDDEN_NAMES: frozenset[str] = frozenset(
    {
        "__import__",
        "eval",
        "exec",
        "compile",
        "open",
        "globals",
        "locals",
        "vars",
        "breakpoint",
        "input",
    }
)
"""Builtins that load code, reach the file system or expose namespaces. The sandbox process
is the real boundary; rejecting these early gives the author a clear message instead."""

FORBIDDEN_MEMBERS: frozenset[str] = frozenset({"get_type_hints", "ForwardRef"})
"""Members of allowed modules (``typing``) that evaluate strings as code."""

ATTRIBUTE_BUILTINS: frozenset[str] = frozenset({"getattr", "setattr", "delattr", "hasattr"})
"""Allowed only when called with a literal attribute name that is not private or dunder."""

ENV_PARAM = "env"
"""First parameter of every public skill: the sandbox passes the episode's ``SkillEnv`` there,
so the actor's signature leaves it out (the actor writes ``go_to("red ball")``)."""

BUILTIN_NAMES: frozenset[str] = frozenset(
    {n for n in dir(builtins) if not n.startswith("_")}
    | {
        "exit",
        "quit",
        "help",
        "copyright",
        "credits",
        "license",
    }  # added by ``site``, not always present
)
"""Names a codebook function must not shadow, fixed here so validation does not depend on
how the interpreter was started."""


@dataclass(frozen=True)
class CodebookSizeLimits:
    """Size caps for one codebook: the per-function ones default to the constants above, the
    library ones to ``None`` (no cap)."""

    max_function_lines: int = MAX_FUNCTION_LINES
    max_function_chars: int = MAX_FUNCTION_CHARS
    max_docstring_chars: int = MAX_DOCSTRING_CHARS
    max_functions: int | None = None
    """Functions in the module (public and private); ``method.max_functions``."""
    max_total_chars: int | None = None
    """Characters of the whole module, docstring and imports included;
    ``method.max_codebook_chars``."""
