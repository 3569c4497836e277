"""What a codebook is validated against: fixed caps and allow-lists, and the benchmark's rules.

The fixed half (the constants and ``CodebookSizeLimits``) holds for every benchmark. The
per-function caps bound what one LLM-written function may cost: its public part is pasted into
every actor prompt. The whole library is *not* capped by default: how large it grows is a
finding (the paper's ASI library reaches about 160 functions), so the two library caps are
per-method config (``method.max_functions``, ``method.max_codebook_chars``; null = no cap) and
reach ``CodebookSizeLimits`` through ``codebook_rules``. Change a default here, or pass a
``CodebookSizeLimits`` to ``Rules`` for one run.

The benchmark's half is ``Rules``. The codebook package knows no benchmark and no sandbox: a
method builds one ``Rules`` per run (``Rules.for_api`` reads the skill API's ``__all__``) and
passes the sandbox's import check in as ``smoke_test``, so this package can be tested with a
fake one.
"""

from __future__ import annotations

import builtins
import importlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from speedrunner.core.skill import SKILL_IMPORTS

MAX_FUNCTION_LINES = 60
"""Lines of one function, ``def`` line to last line: longer skills should be split."""
MAX_FUNCTION_CHARS = 3_000
MAX_DOCSTRING_CHARS = 800
"""A public docstring is in every actor prompt."""

ALLOWED_IMPORTS: frozenset[str] = frozenset(SKILL_IMPORTS)
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


SmokeTest = Callable[[str], "str | None"]
"""Imports a candidate module in the sandbox: ``source -> error message``,
or ``None`` if it loads."""

_PLACEHOLDER = re.compile(r"^[A-Z]{2,}$")  # ScienceWorld templates: "open OBJ", "go to LOC"


def normalise_action(action: str) -> str:
    """The identifier a primitive action reads as: ``"go forward"`` and ``"Go Forward"`` ->
    ``go_forward``; template placeholders drop out (``"focus on OBJ"`` -> ``focus_on``)."""
    words = [w for w in action.split() if not _PLACEHOLDER.match(w)]
    return re.sub(r"[^0-9a-z]+", "_", " ".join(words).lower()).strip("_")


@dataclass(frozen=True)
class Rules:
    """The benchmark-specific half of validation (the fixed half is above).

    ``api_module`` is the only non-standard module skill code may import, and only the
    names in ``api_names`` (its ``__all__``) from it; no codebook name may shadow those,
    a primitive action (normalised) or a builtin. ``smoke_test`` must be given explicitly:
    ``None`` skips the sandbox import check (tests, or offline tooling), never by default.
    ``env_param``, when set, must be the first parameter of every public function and is
    hidden from the signature the actor sees.
    """

    api_module: str
    api_names: frozenset[str]
    primitive_actions: tuple[str, ...]
    smoke_test: SmokeTest | None
    limits: CodebookSizeLimits = field(default_factory=CodebookSizeLimits)
    allowed_imports: frozenset[str] = ALLOWED_IMPORTS
    env_param: str | None = ENV_PARAM

    @classmethod
    def for_api(
        cls,
        api_module: str,
        primitive_actions: Iterable[str],
        smoke_test: SmokeTest | None,
        **options: object,
    ) -> Rules:
        """Rules for a benchmark whose skill API module is importable here
        (reads its ``__all__``)."""
        module = importlib.import_module(api_module)
        names = getattr(module, "__all__", None)
        if names is None:
            raise ValueError(
                f"skill API module {api_module} has no __all__; list its public names there"
            )
        return cls(api_module, frozenset(names), tuple(primitive_actions), smoke_test, **options)  # type: ignore[arg-type]

    def reserved_actions(self) -> dict[str, str]:
        """Normalised primitive action -> the action as the env spells it."""
        return {normalise_action(a): a for a in self.primitive_actions if normalise_action(a)}
