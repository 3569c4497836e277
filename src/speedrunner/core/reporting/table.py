"""One report table: rows of formatted cells, written as CSV, Markdown or HTML cells.

The data type and the number format every table shares; ``tables.py`` and
``caps_table.py`` build tables on it (kept apart so neither imports the other).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass


@dataclass
class Table:
    """Rows of formatted cells; ``stats`` names the columns that hold a mean with an s.d."""

    name: str
    title: str
    columns: list[str]
    rows: list[dict[str, str]]
    stats: list[str]
    notes: dict[str, str] | None = None
    """Column -> what it means, listed under the table."""

    def csv(self) -> str:
        header = []
        for c in self.columns:
            header += [f"{c}_mean", f"{c}_sd"] if c in self.stats else [c]
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=header, lineterminator="\n")
        writer.writeheader()
        for row in self.rows:
            writer.writerow({k: row.get(k, "") for k in header})
        return out.getvalue()

    def cells(self) -> list[list[str]]:
        """The displayed cells, row by row (Markdown and HTML show the same)."""
        cells = []
        for row in self.rows:
            line = []
            for c in self.columns:
                if c in self.stats:
                    mean, sd = row.get(f"{c}_mean", ""), row.get(f"{c}_sd", "")
                    line.append("–" if mean == "" else mean if sd == "" else f"{mean} ± {sd}")
                else:
                    line.append(row.get(c, "") or "–")
            cells.append(line)
        return cells

    def markdown(self) -> str:
        head = "| " + " | ".join(self.columns) + " |\n|" + "---|" * len(self.columns) + "\n"
        body = "".join(
            "| " + " | ".join(c.replace("|", "\\|") for c in line) + " |\n" for line in self.cells()
        )
        notes = "".join(f"- `{k}`: {v}\n" for k, v in (self.notes or {}).items())
        return head + body + ("\n" + notes if notes else "")


def fmt(value: float | int | None) -> str:
    """Six significant digits ("30", "0.5", "0.816497"); empty when unknown."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    return f"{float(value):.6g}"
