"""What a codebook is validated against: the benchmark's skill API, its actions, a smoke test.

The codebook package knows no benchmark and no sandbox. A method builds one ``Rules`` per
run (``Rules.for_api`` reads the skill API's ``__all__``) and passes the sandbox's import
check in as ``smoke_test``, so this package can be tested with a fake one.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from speedrunner.core.codebook.limits import ALLOWED_IMPORTS, ENV_PARAM, CodebookSizeLimits

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
    """The benchmark-specific half of validation (the fixed half lives in ``limits``).

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
