"""One self-contained HTML file: plots (PNG inlined as base64), tables, trajectory viewer,
knowledge diffs.

Nothing is fetched at view time: the CSS and the viewer's JavaScript are inlined from
``assets/``, the episodes travel as JSON in a ``<script type="application/json">`` block
(every ``<`` escaped, so run text can never close it), and all run text reaches the page
through ``html.escape`` or the viewer's ``textContent``.
"""

from __future__ import annotations

import base64
import json
from html import escape
from importlib import resources
from typing import Any

from speedrunner.core.reporting.aggregate import Group, RunNumbers, Separation
from speedrunner.core.reporting.headline import Headline, display_rows, headline_notes
from speedrunner.core.reporting.knowledge import diffs, sleep_notes
from speedrunner.core.reporting.plots import SCRIPTED_BANNER, Plot
from speedrunner.core.reporting.rundata import read_trajectory
from speedrunner.core.reporting.tables import Table
from speedrunner.core.sandbox.tiers import WEAK_ISOLATION_NOTE

MAX_EMBEDDED_BYTES = 40_000_000
"""Episode JSON embedded in one report, shared evenly by its runs (a Crafter episode of 2,000
actions is ~1 MB). A run over its share embeds an evenly spaced sample of its episodes,
always at least one, and the viewer says how many stayed in the run directory."""

_STEP_KEYS = (
    "index",
    "observation",
    "thought",
    "parsed_action",
    "raw_action",
    "executed",
    "error",
    "usage",
    "cost_usd",
    "cached",
    "skill_call",
)
_EPISODE_KEYS = (
    "split",
    "index",
    "eval_point",
    "task",
    "seed",
    "instruction",
    "knowledge_version",
    "success",
    "progress",
    "stop_reason",
    "llm_calls",
    "env_actions",
    "cost_usd",
    "final_observation",
)


def _asset(name: str) -> str:
    return resources.files("speedrunner.core.reporting").joinpath("assets", name).read_text("utf-8")


def _episode(t: dict[str, Any]) -> dict[str, Any]:
    ep = {k: t.get(k) for k in _EPISODE_KEYS}
    ep["steps"] = [{k: s.get(k) for k in _STEP_KEYS} for s in t.get("steps", [])]
    for step, raw in zip(ep["steps"], t.get("steps", []), strict=True):
        if raw.get("parsed_action") is None:  # an invalid answer: what the model said verbatim
            step["raw_text"] = raw.get("raw_text")
    return ep


def _episodes(run_numbers: RunNumbers, budget: int) -> tuple[list[dict[str, Any]], int]:
    """The run's episodes for the viewer, or an evenly spaced sample within ``budget`` bytes.

    Sized by their files (a trajectory file holds every field the viewer shows, so its
    size bounds the embedded JSON's) and read one at a time: a long run's trajectories
    (hundreds of MB) are neither parsed nor held beyond what is embedded."""
    run = run_numbers.run
    files = run.trajectory_files("train") + run.trajectory_files("eval")
    sizes = []
    for path in files:
        try:
            sizes.append(path.stat().st_size)
        except OSError:
            sizes.append(0)  # gone since listed: read_trajectory skips it below
    total = sum(sizes)
    if total <= budget:
        picked = list(range(len(files)))
    else:
        keep = max(1, len(files) * budget // total)
        while True:
            picked = sorted({round(i * (len(files) - 1) / max(1, keep - 1)) for i in range(keep)})
            if keep == 1 or sum(sizes[i] + 2 for i in picked) <= budget:
                break
            keep -= 1
    episodes = [_episode(t) for i in picked if (t := read_trajectory(files[i])) is not None]
    readable = len(episodes) + sum(1 for i in set(range(len(files))) - set(picked) if sizes[i] > 0)
    return episodes, readable - len(episodes)


def _run_label(g: Group, r: RunNumbers) -> str:
    run = r.run
    marks = (
        [run.status]
        + (["SCRIPTED"] if run.scripted else [])
        + ([f"resumed {run.resumes}x"] if run.resumes else [])
    )
    marks += [run.spending] if run.spending is not None else []
    return f"{g.key.label} seed {run.seed} {run.run_id} [{', '.join(marks)}]"


def _data_json(groups: list[Group]) -> str:
    runs = []
    budget = MAX_EMBEDDED_BYTES // max(1, sum(len(g.runs) for g in groups))
    for g in groups:
        for r in g.runs:
            episodes, omitted = _episodes(r, budget)
            runs.append(
                {
                    "label": _run_label(g, r),
                    "scripted": r.run.scripted,
                    "status": r.run.status,
                    "episodes": episodes,
                    "omitted": omitted,
                }
            )
    return json.dumps({"runs": runs}, ensure_ascii=False).replace("<", "\\u003c")


LONG_TABLE_ROWS = 20
"""A table longer than this starts collapsed (its CSV is named beside it), so the viewer and
the knowledge diffs stay a scroll away, not thousands of pixels."""


def _table_html(table: Table) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in table.columns)
    cells = table.cells()
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in cells
    )
    csv = f"tables/{escape(table.name)}.csv"
    # Wide tables scroll inside their own box; the page never scrolls sideways.
    grid = (
        f'<div class="table-scroll"><table id="table-{escape(table.name)}">'
        f"<thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table></div>"
    )
    notes = (
        '<ul class="notes">'
        + "".join(f"<li><code>{escape(k)}</code>: {escape(v)}</li>" for k, v in table.notes.items())
        + "</ul>"
        if table.notes
        else ""
    )
    if len(cells) > LONG_TABLE_ROWS:
        return (
            f"<h3>{escape(table.title)}</h3>"
            f'<details class="long-table" id="long-{escape(table.name)}">'
            f"<summary>{len(cells)} rows: show them (or open {csv})</summary>"
            f"{grid}</details>{notes}"
        )
    return f'<h3>{escape(table.title)}</h3><p class="csv">CSV: {csv}</p>{grid}{notes}'


def _diff_html(text: str) -> str:
    lines = []
    for line in text.splitlines():
        cls = (
            "hunk"
            if line.startswith("@@")
            else "add"
            if line.startswith("+") and not line.startswith("+++")
            else "del"
            if line.startswith("-") and not line.startswith("---")
            else ""
        )
        lines.append(f'<span class="{cls}">{escape(line)}</span>' if cls else escape(line))
    return '<pre class="diff">' + "\n".join(lines) + "</pre>"


def _knowledge_html(groups: list[Group]) -> str:
    parts = []
    for g in groups:
        for r in g.runs:
            if not r.knowledge:
                continue
            kind = r.knowledge[0].kind
            parts.append(
                f"<h3>{escape(_run_label(g, r))}: "
                f"{kind} generations 0–{r.knowledge[-1].generation}</h3>"
            )
            notes = sleep_notes(r.run.path)
            unchanged: list[int] = []
            for before, after, text in [*diffs(r.knowledge), (-1, -1, "end")]:
                if not text:
                    unchanged += [before, after]
                    continue
                if unchanged:  # a run of identical generations is one line
                    parts.append(
                        '<p class="knowledge-same">'
                        f"gen_{unchanged[0]} → gen_{unchanged[-1]}: unchanged</p>"
                    )
                    unchanged = []
                if before < 0:
                    break
                added = sum(
                    1
                    for line in text.splitlines()
                    if line.startswith("+") and not line.startswith("+++")
                )
                removed = sum(
                    1
                    for line in text.splitlines()
                    if line.startswith("-") and not line.startswith("---")
                )
                said = f": {notes[after]}" if after in notes else ""
                parts.append(
                    f'<details class="knowledge-diff"><summary>gen_{before} → gen_{after} '
                    f"(+{added} −{removed} lines){escape(said)}</summary>"
                    f"{_diff_html(text)}</details>"
                )
            last = r.knowledge[-1]
            parts.append(
                '<details class="knowledge-latest">'
                f"<summary>gen_{last.generation} in full</summary>"
                f'<pre class="obs">{escape(last.text)}</pre></details>'
            )
    return "".join(parts) or "<p>No run in this report stores a guide or a codebook.</p>"


def _headline_html(h: Headline, separations: list[Separation]) -> str:
    """The headline table and how to read it, at the top of the page."""
    head = "".join(f"<th>{escape(c)}</th>" for c in h.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in display_rows(h)
    )
    notes = "".join(f"<li>{escape(n)}</li>" for n in headline_notes(h))
    kept = (
        '<div class="banner progress" id="kept-apart">'
        "<p>Kept apart (different settings, never averaged):</p>"
        "<ul>" + "".join(f"<li>{escape(s.text)}</li>" for s in separations) + "</ul></div>"
        if separations
        else ""
    )
    return (
        f'<section id="headline"><h2>Headline</h2>{kept}'
        '<table id="table-headline" class="headline">'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        '<p class="csv">CSV: tables/headline.csv; every column below, under '
        '<a href="#tables">Tables</a>.</p>'
        f'<ul class="notes">{notes}</ul></section>'
    )


def render(
    groups: list[Group],
    plots: list[Plot],
    tables: list[Table],
    title: str,
    *,
    headline: Headline | None = None,
    separations: list[Separation] | None = None,
) -> str:
    scripted = any(g.scripted for g in groups)
    partial = [r for g in groups for r in g.in_progress]
    banners = []
    if scripted:
        banners.append(
            f'<div class="banner scripted" id="scripted-banner">{escape(SCRIPTED_BANNER)}. '
            "Scripted runs are marked SCRIPTED in every legend, table and episode.</div>"
        )
    weak = [
        r.run.run_id
        for g in groups
        for r in g.runs
        if r.run.summary is not None and r.run.summary.isolation
    ]
    if weak:
        banners.append(
            '<div class="banner scripted" id="isolation-banner">'
            f"WEAK ISOLATION in {escape(', '.join(weak))}: "
            f"{escape(WEAK_ISOLATION_NOTE.removeprefix('WEAK ISOLATION: '))}.</div>"
        )
    if partial:
        names = ", ".join(
            f"{r.run.run_id} ({r.run.status}, "
            f"{len(r.run.metrics)}/{r.run.rollouts_planned} rollouts)"
            for r in partial
        )
        banners.append(
            '<div class="banner progress" id="progress-banner">'
            f"Runs not finished: {escape(names)}. "
            "Their curves are partial (dashed lines).</div>"
        )
    figures = "".join(
        f'<figure id="plot-{escape(p.name)}"{" class=wide" if p.wide else ""}>'
        f'<img alt="{escape(p.title)}" '
        f'src="data:image/png;base64,{base64.b64encode(p.png_bytes).decode()}">'
        f"<figcaption>{escape(p.title)} — plots/{escape(p.name)}.png, .svg</figcaption></figure>"
        for p in plots
        if p.empty is None
    )
    collapsed = "".join(
        f'<li id="plot-{escape(p.name)}">{escape(p.collapsed)}</li>' for p in plots if p.empty
    )
    figures += f'<ul class="collapsed-plots">{collapsed}</ul>' if collapsed else ""
    top = _headline_html(headline, separations or []) if headline is not None else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{escape(title)}</title>
<style>{_asset("report.css")}</style></head>
<body>
<h1>{escape(title)}</h1>
{"".join(banners)}
<nav><a href="#headline">Headline</a><a href="#plots">Plots</a>\
<a href="#tables">Tables (all columns)</a><a href="#viewer">Trajectories</a>\
<a href="#knowledge">Knowledge</a></nav>
{top}
<section id="plots"><h2>Plots</h2>\
<p>Mean over seeds, band ±1 s.d. (sample), n seeds in each legend.</p>{figures}</section>
<section id="tables"><h2>Tables (all columns)</h2>\
{"".join(_table_html(t) for t in tables)}</section>
<section id="viewer"><h2>Trajectories</h2>
<div class="controls"><label>Run <select id="run-select"></select></label>
<label>Episode <select id="episode-select"></select></label>
<button type="button" id="prev-episode">◀ previous</button>\
<button type="button" id="next-episode">next ▶</button>
<span id="episode-note"></span></div>
<div id="episode-view"></div></section>
<section id="knowledge"><h2>Knowledge: how it evolved</h2>{_knowledge_html(groups)}</section>
<script type="application/json" id="report-data">{_data_json(groups)}</script>
<script>{_asset("viewer.js")}</script>
</body></html>
"""
