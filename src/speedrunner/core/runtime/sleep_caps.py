"""The caps a sleep phase counts: the library caps an edit is rejected by, and the tally a
sleep record carries. Apart from ``caps.py`` so a method reaches only these (``caps.py`` says
what every cap means and re-exports them)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from speedrunner.core.codebook.rules import CodebookSizeLimits

if TYPE_CHECKING:
    from speedrunner.core.codebook.validate import Problem
    from speedrunner.core.config.schema import MethodConfig

LIBRARY_CAPS = ("max_functions", "max_codebook_chars")
"""The codebook's caps (counted per sleep phase, one per edit they reject)."""
SLEEP_CAPS = (*LIBRARY_CAPS, "max_functions_per_episode", "max_inducer_turns")
"""The caps counted per sleep phase (a sleep record's and a row's ``sleep_cap_hits``)."""


def rejected_caps(problems: Iterable[Problem]) -> list[str]:
    """The library caps among a rejected edit's validation problems (each counts one hit)."""
    return sorted({p.cap for p in problems if p.cap})


def count_caps(names: Iterable[str]) -> dict[str, int]:
    """``{cap: hits}`` of one sleep phase from the cap behind each binding, every
    ``SLEEP_CAPS`` key present (0 when it never bound)."""
    counts = dict.fromkeys(SLEEP_CAPS, 0)
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return counts


def codebook_limits(method: MethodConfig) -> CodebookSizeLimits:
    """The validator's ``CodebookSizeLimits`` with the method's library caps
    (``MethodConfig.skill_caps``)."""
    caps = method.skill_caps()
    return CodebookSizeLimits(
        max_functions=caps.max_functions, max_total_chars=caps.max_codebook_chars
    )
