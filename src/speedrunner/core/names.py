"""Close-match suggestions for unknown names, shared by registries and config errors."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def suggest(name: str, valid: Iterable[str], *, n: int = 3) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest valid names, or ``""``."""
    valid = sorted(set(valid))
    matches = difflib.get_close_matches(name, valid, n=n, cutoff=0.6)
    if not matches:
        return ""
    quoted = " or ".join(repr(m) for m in matches)
    return f" (did you mean {quoted}?)"


def unknown(kind: str, name: str, valid: Iterable[str]) -> str:
    """One-line message for an unknown name, with suggestions and the valid list."""
    valid = sorted(set(valid))
    return f"unknown {kind} {name!r}{suggest(name, valid)}; valid: {', '.join(valid)}"
