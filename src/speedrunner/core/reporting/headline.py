"""The headline comparison: one row per experiment, with bootstrap intervals over seeds.

Final evaluation success (or progress, as the run's ``speedrun.metric`` judges it), its
difference from a baseline method run with the same settings (benchmark, task set, model,
schedule: everything but the method's own), and the
probability of improvement over that baseline; then what it cost: actor LLM calls per
episode (and with the sleep phase amortised), dollars per episode and the runs' total
dollars (``summary.json`` ``spent_usd``).
"""

from __future__ import annotations

from dataclasses import dataclass

from speedrunner.core.reporting.aggregate import Group
from speedrunner.core.reporting.bootstrap import (
    MIN_SEEDS_FOR_IMPROVEMENT,
    RESAMPLES,
    Estimate,
    difference_interval,
    improvement_probability,
    mean_interval,
)
from speedrunner.core.reporting.humanize import NONE, dollars, percent, points, sig3, signed
from speedrunner.core.reporting.table import Table, fmt

DEFAULT_BASELINE = "react"
MODEL_MARKS = {"scripted": "scripted: no LLM", "fake": "fake LLM server"}


@dataclass(frozen=True)
class HeadlineRow:
    """The numbers of one experiment's headline row (None: unknown or not applicable)."""

    group: Group
    metric: str
    final: Estimate | None
    evaluated: int
    """Runs with at least one evaluation (the final value's seeds)."""
    baseline: Group | None
    baseline_note: str
    """Why there is no baseline to compare with ("no react run"); empty when there is one."""
    is_baseline: bool
    difference: Estimate | None
    improvement: Estimate | None
    calls: float | None
    calls_amortised: float | None
    cost_per_episode: float | None
    total_cost: float | None
    total_cost_known: int
    """Runs whose total dollars are known."""
    unknown_spend: float | None
    """Worst case of unanswered attempts that may have been billed, over the runs (not in
    ``total_cost``); ``None`` if such an attempt has no price."""


@dataclass(frozen=True)
class Headline:
    baseline: str
    rows: list[HeadlineRow]

    @property
    def columns(self) -> list[str]:
        return [
            "experiment",
            "seeds",
            "final evaluation",
            "95% interval",
            f"vs {self.baseline}",
            f"P(better than {self.baseline})",
            "actor LLM calls / episode (with sleep)",
            "$ / episode",
            "total $",
        ]


def metric_of(group: Group) -> str:
    """``success`` or ``progress``: what the experiment's speedrun metric is built from."""
    metric = (group.runs[0].run.config.get("speedrun") or {}).get("metric")
    return "progress" if metric == "progress" else "success"


def final_values(group: Group, metric: str) -> list[float]:
    """Each run's value at its last evaluation (runs without one are left out)."""
    values = [r.finals[f"final_eval_{metric}"] for r in group.runs]
    return [float(v) for v in values if v is not None]


def _shared_settings(group: Group) -> dict[str, str]:
    """The settings a comparison must share: all but the method's (and its sleep model's)."""
    return {
        k: v
        for k, v in group.runs[0].run.settings.values.items()
        if not k.startswith(("method.", "inducer."))
    }


def _baseline_of(group: Group, groups: list[Group], baseline: str) -> tuple[Group | None, str]:
    """The baseline experiment on the same benchmark, task set, model and schedule (every
    setting but the method's); else None and why."""
    k = group.key
    named = [
        g
        for g in groups
        if g.key.method == baseline
        and (g.key.benchmark, g.key.task_set, g.key.model) == (k.benchmark, k.task_set, k.model)
    ]
    if not named:
        return None, f"no {baseline} run"
    if group in named:
        return group, ""
    same = [g for g in named if _shared_settings(g) == _shared_settings(group)]
    if len(same) != 1:
        return (
            None,
            f"no {baseline} run with the same settings"
            if not same
            else f"several {baseline} experiments",
        )
    return same[0], ""


def headline(groups: list[Group], baseline: str = DEFAULT_BASELINE) -> Headline:
    rows = []
    for g in groups:
        metric = metric_of(g)
        values = final_values(g, metric)
        base, why = _baseline_of(g, groups, baseline)
        is_base = base is g
        compare = base is not None and not is_base and metric_of(base) == metric
        base_values = final_values(base, metric) if compare and base is not None else []
        costs = [r.run.total_cost_usd for r in g.runs]
        known = [c for c in costs if c is not None]
        calls, amortised, cost = (
            g.finals.get(n)
            for n in (
                "llm_calls_per_episode",
                "llm_calls_amortised_per_episode",
                "cost_per_episode",
            )
        )
        rows.append(
            HeadlineRow(
                group=g,
                metric=metric,
                final=mean_interval(values),
                evaluated=len(values),
                baseline=base,
                baseline_note=why,
                is_baseline=is_base,
                difference=difference_interval(values, base_values) if compare else None,
                improvement=improvement_probability(values, base_values) if compare else None,
                calls=calls.mean if calls else None,
                calls_amortised=amortised.mean if amortised else None,
                cost_per_episode=cost.mean if cost else None,
                total_cost=sum(known) if known and len(known) == len(costs) else None,
                total_cost_known=len(known),
                unknown_spend=_sum_or_none([r.run.unknown_spend_usd for r in g.runs]),
            )
        )
    # Each benchmark's baseline first, the methods compared with it below (otherwise as grouped).
    rows.sort(key=lambda r: (r.group.key.benchmark, r.group.key.task_set, not r.is_baseline))
    return Headline(baseline, rows)


def experiment_text(group: Group) -> str:
    """ "babyai/seq · opo · gpt-5.4-mini" with the model marked fake or scripted where so."""
    k = group.key
    kind = "scripted" if group.scripted else k.model_kind
    model = f"{k.model} ({MODEL_MARKS[kind]})" if kind in MODEL_MARKS else k.model
    return f"{k.benchmark}/{k.task_set} · {k.method} · {model}"


def seeds_text(row: HeadlineRow) -> str:
    g = row.group
    seeds = len({r.run.seed for r in g.runs})
    text = str(seeds)
    if len(g.runs) != seeds:
        text += f" ({len(g.runs)} runs)"
    if row.evaluated != len(g.runs):
        text += f", {row.evaluated} evaluated"
    if g.in_progress:
        text += f", {len(g.in_progress)} in progress"
    return text


def _interval(e: Estimate | None, show, why: str) -> str:
    if e is None:
        return NONE
    if not e.has_interval:
        return f"{NONE} ({why})"
    return f"[{show(e.low)}, {show(e.high)}]"


def display_rows(h: Headline) -> list[list[str]]:
    """The headline's cells as people read them (HTML and Markdown show the same)."""
    out = []
    for r in h.rows:
        final = NONE if r.final is None else f"{percent(r.final.value)} {r.metric}"
        if r.is_baseline:
            diff = improvement = "baseline"
        elif r.baseline is None:
            diff = improvement = f"{NONE} ({r.baseline_note})"
        elif r.difference is None:
            diff = improvement = NONE
        else:
            diff = f"{points(r.difference.value)} {_interval(r.difference, signed, '1 seed')}"
            improvement = (
                f"{sig3(r.improvement.value)} {_interval(r.improvement, sig3, '')}"
                if r.improvement is not None
                else f"{NONE} (< {MIN_SEEDS_FOR_IMPROVEMENT} seeds)"
            )
        calls = (
            NONE
            if r.calls is None
            else sig3(r.calls)
            + (f" ({sig3(r.calls_amortised)})" if r.calls_amortised is not None else "")
        )
        cost = dollars(r.cost_per_episode) if r.cost_per_episode is not None else "unknown"
        if r.total_cost is not None:
            total = dollars(r.total_cost)
            if r.unknown_spend is None:
                total += " (+ unanswered attempts of unknown price, may have been billed)"
            elif r.unknown_spend > 0:
                total += f" (+ up to {dollars(r.unknown_spend)} unanswered, may have been billed)"
        else:
            total = (
                f"{NONE} (unknown in every run)"
                if r.total_cost_known == 0
                else f"{NONE} (unknown in some runs)"
            )
        label = experiment_text(r.group) + (
            f" — {r.group.key.variant}" if r.group.key.variant else ""
        )
        out.append(
            [
                label,
                seeds_text(r),
                final,
                _interval(r.final, percent, "1 seed"),
                diff,
                improvement,
                calls,
                cost,
                total,
            ]
        )
    return out


def headline_notes(h: Headline) -> list[str]:
    """What the reader needs to read the headline's numbers."""
    return [
        f"Intervals: 95% percentile bootstrap over seeds ({RESAMPLES:,} resamples, fixed seed); "
        "one value per run. With one seed there is no interval (–); with 3 seeds intervals are "
        "wide.",
        f"vs {h.baseline}: difference of the mean final evaluation from the {h.baseline} "
        "experiment with the same settings (benchmark, task set, model, schedule; all but the "
        f"method's own), in percentage points. P(better than {h.baseline}): probability that a "
        f"seed of this experiment beats a seed of {h.baseline} (ties count half), over all seed "
        f"pairs (Agarwal et al. 2021), shown with >= {MIN_SEEDS_FOR_IMPROVEMENT} seeds on both "
        "sides.",
        "Actor LLM calls per training episode; in brackets with the sleep phase's calls amortised "
        "over the batch. "
        "$ / episode: training cost per episode (actor + amortised sleep); unknown when a price "
        "is unknown. "
        "Total $: every LLM call of the runs (training, sleep, evaluation; summary.json "
        "spent_usd); attempts that went unanswered (timed out, connection lost) may have been "
        "billed too: their worst case is shown beside it, never added in (summary.json "
        "unknown_spend_usd).",
    ]


def headline_table(h: Headline) -> Table:
    """``tables/headline.csv``: the same rows as numbers (six significant digits)."""
    rows = []
    for r in h.rows:
        k = r.group.key

        def est(name: str, e: Estimate | None) -> dict[str, str]:
            return {
                name: fmt(e.value if e else None),
                f"{name}_ci_low": fmt(e.low if e else None),
                f"{name}_ci_high": fmt(e.high if e else None),
            }

        rows.append(
            {
                "benchmark": k.benchmark,
                "task_set": k.task_set,
                "method": k.method,
                "model": k.model,
                "variant": k.variant,
                "model_kind": "scripted" if r.group.scripted else k.model_kind,
                "seeds": str(len({x.run.seed for x in r.group.runs})),
                "runs": str(len(r.group.runs)),
                "evaluated_runs": str(r.evaluated),
                "in_progress": str(len(r.group.in_progress)),
                "metric": r.metric,
                **est("final", r.final),
                "baseline": "" if r.baseline is None else r.baseline.key.label,
                **est("difference", r.difference),
                **est("improvement_probability", r.improvement),
                "llm_calls_per_episode": fmt(r.calls),
                "llm_calls_amortised_per_episode": fmt(r.calls_amortised),
                "cost_per_episode_usd": fmt(r.cost_per_episode),
                "total_cost_usd": fmt(r.total_cost),
                "unknown_spend_usd": fmt(r.unknown_spend),
            }
        )
    columns = list(rows[0]) if rows else ["benchmark", "task_set", "method", "model", "variant"]
    return Table("headline", "Headline", columns, rows, [])


def _sum_or_none(values: list[float | None]) -> float | None:
    """The sum, or ``None`` when any part is unknown."""
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)
