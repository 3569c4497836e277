"""``speedrunner report``: plots, tables and one HTML file from run directories.

Reads only the files a run writes (docs/run-directory.md) and never imports a method or a
benchmark, so it works on any run, finished or still in progress, on any machine that has
the directories. Output under ``--out``::

    report.html            self-contained (plots, tables, trajectory viewer, knowledge diffs)
    report.md              the headline, then the tables in Markdown, with the plots linked
    tables/<name>.csv      headline, summary, runs, curves, knowledge, answers, caps
    plots/<name>.png|.svg  one figure per curve, the frontier, knowledge size, skills
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from speedrunner.core.atomic import atomic_write_text
from speedrunner.core.reporting.aggregate import Group, Separation, group_experiments
from speedrunner.core.reporting.headline import (
    DEFAULT_BASELINE,
    Headline,
    display_rows,
    headline,
    headline_notes,
    headline_table,
)
from speedrunner.core.reporting.html import render
from speedrunner.core.reporting.plots import SCRIPTED_BANNER, Plot, draw_all
from speedrunner.core.reporting.rundata import find_runs
from speedrunner.core.reporting.tables import Table, all_tables
from speedrunner.errors import ReportInputError

__all__ = ["Report", "build_report", "default_out", "report_line"]


@dataclass(frozen=True)
class Report:
    out: Path
    groups: list[Group]
    plots: list[Plot]
    tables: list[Table]
    headline: Headline
    separations: list[Separation]

    @property
    def html(self) -> Path:
        return self.out / "report.html"


def default_out(paths: list[Path]) -> Path:
    """``<run_dir>/report`` for one run directory (the documented place), else ``./report``."""
    if len(paths) == 1 and (paths[0] / "config.resolved.json").is_file():
        return paths[0] / "report"
    return Path("report")


def build_report(
    paths: list[Path],
    out: Path | None = None,
    *,
    title: str = "SpeedRunner report",
    baseline: str | None = None,
) -> Report:
    """Read every run at or below ``paths`` and write the report files under ``out``; the
    headline compares each method with ``baseline`` (default react) run with the same settings.
    A baseline asked for by name must be the method of some run."""
    runs = find_runs([Path(p) for p in paths])
    methods = sorted({r.key.method for r in runs})
    if baseline is not None and baseline not in methods:
        raise ReportInputError(
            f"--baseline {baseline}: no run of that method among the {len(runs)} run(s) given "
            f"(their methods: {', '.join(methods)}); pick one of these, or leave --baseline "
            f"out for {DEFAULT_BASELINE}"
        )
    out = Path(out) if out is not None else default_out([Path(p) for p in paths])
    groups, separations = group_experiments(runs)
    top = headline(groups, baseline or DEFAULT_BASELINE)
    plots = draw_all(groups, out / "plots")
    tables = [headline_table(top), *all_tables(groups)]
    for table in tables:
        atomic_write_text(out / "tables" / f"{table.name}.csv", table.csv())
    atomic_write_text(out / "report.md", _markdown(groups, plots, tables, title, top, separations))
    atomic_write_text(
        out / "report.html",
        render(groups, plots, tables[1:], title, headline=top, separations=separations),
    )
    return Report(out, groups, plots, tables, top, separations)


def _headline_markdown(top: Headline, separations: list[Separation]) -> list[str]:
    lines = ["## Headline", ""]
    if separations:
        lines += ["**Kept apart** (different settings, never averaged):", ""]
        lines += [f"- {s.text}" for s in separations] + [""]
    lines += ["| " + " | ".join(top.columns) + " |", "|" + "---|" * len(top.columns)]
    lines += [
        "| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in display_rows(top)
    ]
    lines += ["", *(f"- {n}" for n in headline_notes(top)), "", "CSV: `tables/headline.csv`", ""]
    return lines


def _markdown(
    groups: list[Group],
    plots: list[Plot],
    tables: list[Table],
    title: str,
    top: Headline,
    separations: list[Separation],
) -> str:
    lines = [f"# {title}", ""]
    if any(g.scripted for g in groups):
        lines += [
            f"**{SCRIPTED_BANNER}.** Rows with `scripted` true come from the scripted stand-in.",
            "",
        ]
    partial = [r.run for g in groups for r in g.in_progress]
    if partial:
        lines += [
            "**Not finished:** "
            + ", ".join(
                f"{r.run_id} ({r.status}, {len(r.metrics)}/{r.rollouts_planned} rollouts)"
                for r in partial
            )
            + " — their numbers are partial.",
            "",
        ]
    capped = [r.run for g in groups for r in g.runs if r.run.spending is not None]
    if capped:
        lines += [
            "**Spending caps:** " + ", ".join(f"{r.run_id} ({r.spending})" for r in capped),
            "",
        ]
    lines += _headline_markdown(top, separations)
    lines += [
        "## Plots",
        "",
        "Mean ± 1 s.d. (sample) over seeds; one seed shows the mean only.",
        "",
    ]
    lines += [f"![{p.title}](plots/{p.name}.png)" for p in plots if p.empty is None] + [""]
    lines += [f"- {p.collapsed}" for p in plots if p.empty is not None] + [""]
    lines += ["## Tables (all columns)", ""]
    for table in tables[1:]:
        lines += [f"### {table.title}", "", f"CSV: `tables/{table.name}.csv`", "", table.markdown()]
    return "\n".join(lines)


def report_line(report: Report) -> str:
    """What the CLI prints: where the report is and what it covered."""
    runs = [r.run for g in report.groups for r in g.runs]
    partial = sum(r.in_progress for r in runs)
    scripted = " (SCRIPTED runs included: no LLM)" if any(r.scripted for r in runs) else ""
    line = (
        f"report of {len(runs)} run(s) in {len(report.groups)} experiment(s)"
        f"{f', {partial} not finished' if partial else ''}{scripted}: {report.html}"
    )
    return "\n".join([*(f"kept apart: {s.text}" for s in report.separations), line])
