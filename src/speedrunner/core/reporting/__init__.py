"""``speedrunner report``: plots, tables and one HTML file from run directories.

Reads only the files a run writes (docs/run-directory.md) and never imports a method or a
benchmark, so it works on any run, finished or still in progress, on any machine that has
the directories. Output under ``--out``::

    report.html            self-contained (plots, tables, trajectory viewer, knowledge diffs)
    report.md              the tables in Markdown, with the plots linked
    tables/<name>.csv      summary, runs, curves, knowledge, answers, caps: the same numbers as report.md
    plots/<name>.png|.svg  one figure per curve, the frontier, knowledge size, skills
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from speedrunner.core.atomic import atomic_write_text
from speedrunner.core.reporting.aggregate import Group, group_runs
from speedrunner.core.reporting.html import render
from speedrunner.core.reporting.plots import SCRIPTED_BANNER, Plot, draw_all
from speedrunner.core.reporting.rundata import find_runs
from speedrunner.core.reporting.tables import Table, all_tables

__all__ = ["Report", "build_report", "default_out", "report_line"]


@dataclass(frozen=True)
class Report:
    out: Path
    groups: list[Group]
    plots: list[Plot]
    tables: list[Table]

    @property
    def html(self) -> Path:
        return self.out / "report.html"


def default_out(paths: list[Path]) -> Path:
    """``<run_dir>/report`` for one run directory (the documented place), else ``./report``."""
    if len(paths) == 1 and (paths[0] / "config.resolved.json").is_file():
        return paths[0] / "report"
    return Path("report")


def build_report(paths: list[Path], out: Path | None = None, *, title: str = "SpeedRunner report") -> Report:
    """Read every run at or below ``paths`` and write the report files under ``out``."""
    runs = find_runs([Path(p) for p in paths])
    out = Path(out) if out is not None else default_out([Path(p) for p in paths])
    groups = group_runs(runs)
    plots = draw_all(groups, out / "plots")
    tables = all_tables(groups)
    for table in tables:
        atomic_write_text(out / "tables" / f"{table.name}.csv", table.csv())
    atomic_write_text(out / "report.md", _markdown(groups, plots, tables, title))
    atomic_write_text(out / "report.html", render(groups, plots, tables, title))
    return Report(out, groups, plots, tables)


def _markdown(groups: list[Group], plots: list[Plot], tables: list[Table], title: str) -> str:
    lines = [f"# {title}", ""]
    if any(g.scripted for g in groups):
        lines += [f"**{SCRIPTED_BANNER}.** Rows with `scripted` true come from the scripted stand-in.", ""]
    partial = [r.run for g in groups for r in g.in_progress]
    if partial:
        lines += ["**Not finished:** " + ", ".join(f"{r.run_id} ({r.status}, {len(r.metrics)}/{r.rollouts_planned}"
                                                   " rollouts)" for r in partial)
                  + " — their numbers are partial.", ""]
    capped = [r.run for g in groups for r in g.runs if r.run.spending is not None]
    if capped:
        lines += ["**Spending caps:** " + ", ".join(f"{r.run_id} ({r.spending})" for r in capped), ""]
    lines += ["Mean ± 1 s.d. (sample) over seeds; one seed shows the mean only.", ""]
    lines += [f"![{p.title}](plots/{p.name}.png)" for p in plots] + [""]
    for table in tables:
        lines += [f"## {table.title}", "", f"CSV: `tables/{table.name}.csv`", "", table.markdown()]
    return "\n".join(lines)


def report_line(report: Report) -> str:
    """What the CLI prints: where the report is and what it covered."""
    runs = [r.run for g in report.groups for r in g.runs]
    partial = sum(r.in_progress for r in runs)
    scripted = " (SCRIPTED runs included: no LLM)" if any(r.scripted for r in runs) else ""
    return (f"report of {len(runs)} run(s) in {len(report.groups)} experiment(s)"
            f"{f', {partial} not finished' if partial else ''}{scripted}: {report.html}")
