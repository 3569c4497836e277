"""Numbers for people: three significant digits, rates in percent, money in dollars.

The CSV files keep six significant digits for machines; these are what the headline shows.
"""

from __future__ import annotations

NONE = "–"


def sig3(value: float | None) -> str:
    """Three significant digits, trailing zeros kept ("30.0", "0.0667", "1.00"); "–" when
    unknown."""
    if value is None:
        return NONE
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:#.3g}".rstrip(".").replace("-", "−")


def percent(rate: float | None) -> str:
    """A rate in [0, 1] as a percentage ("43.3%")."""
    return NONE if rate is None else f"{sig3(rate * 100)}%"


def points(delta: float | None) -> str:
    """A difference of two rates in percentage points, signed ("+13.3 pp")."""
    return NONE if delta is None else f"{signed(delta)} pp"


def signed(delta: float | None) -> str:
    """A difference of two rates in percentage points without the unit ("+13.3", "−6.67")."""
    if delta is None:
        return NONE
    return f"{'+' if delta > 0 else ''}{sig3(delta * 100)}"


def dollars(value: float | None) -> str:
    """Money ("$0.0123", "$12.3", "$0"); "–" when unknown."""
    if value is None:
        return NONE
    return f"${sig3(value)}"
