"""Numbers per run, then mean ± 1 s.d. over seeds per experiment (benchmark, task set, method,
model, and the settings that decide results: ``experiments.py``).

Every value is first computed per run (a *seed-level value*): a curve point is the mean
over one training batch's episodes or one evaluation point; a final value is the run's own
mean. Groups then take the mean and the sample standard deviation (n - 1) over their runs;
with one seed the s.d. is ``None`` (shown as "–"), never a made-up 0. A run still in
progress contributes the points it has, so late points of a curve may have fewer seeds (n
is kept with every point).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from typing import Any

from speedrunner.core.records import EvalEpisode, EvalRow, MetricsRow
from speedrunner.core.reporting.experiments import differing_keys, variant_labels
from speedrunner.core.reporting.knowledge import Generation, generations
from speedrunner.core.reporting.rundata import GroupKey, RunData

CURVES = {
    "eval_progress": "evaluation progress (mean over held-out episodes)",
    "eval_success": "evaluation success rate",
    "cost_per_episode": "cost per training episode, USD (actor + amortised sleep)",
    "output_tokens_per_episode": "output tokens per training episode (actor + amortised sleep)",
    "llm_calls_per_episode": "actor LLM calls per training episode",
    "llm_calls_amortised_per_episode": "LLM calls per training episode (actor + amortised sleep)",
    "skill_calls_per_episode": "skill calls per training episode",
    "actions_per_skill_call": "primitive actions per skill call (training)",
    "within_2_llm_calls_share": "share of training episodes finished in <= 2 LLM calls",
    "dynamic_call_depth": "deepest recorded call nesting in the batch (training)",
    "eval_skill_calls_per_episode": "skill calls per evaluation episode",
    "eval_actions_per_skill_call": "primitive actions per skill call (evaluation)",
    "eval_within_2_llm_calls_share": "share of evaluation episodes finished in <= 2 LLM calls",
}
"""Curve name -> axis label. Training curves have one point per batch (x = rollouts at its end)."""

FINALS = {
    "rollouts_done": "training rollouts done",
    "final_eval_rollout": "rollout of the last evaluation",
    "final_eval_progress": "progress at the last evaluation",
    "final_eval_success": "success at the last evaluation",
    "final_eval_cost_per_episode": "cost per episode at the last evaluation (USD)",
    "cost_per_episode": "training cost per episode (USD, actor + amortised sleep)",
    "output_tokens_per_episode": "training output tokens per episode",
    "llm_calls_per_episode": "training actor LLM calls per episode",
    "llm_calls_amortised_per_episode": "training LLM calls per episode (actor + amortised sleep)",
    "skill_calls_per_episode": "training skill calls per episode",
    "actions_per_skill_call": "training primitive actions per skill call",
    "within_2_llm_calls_share": (
        "share of training episodes finished (success or env end) in <= 2 LLM calls"
    ),
    "final_eval_skill_calls_per_episode": "skill calls per episode at the last evaluation",
    "final_eval_actions_per_skill_call": "primitive actions per skill call at the last evaluation",
    "final_eval_within_2_llm_calls_share": (
        "share of episodes finished in <= 2 LLM calls at the last evaluation"
    ),
    "speedrun_rollout": "rollouts to the speedrun target (runs that reached it)",
}

KNOWLEDGE = (
    "guide_chars",
    "public_functions",
    "private_functions",
    "lines",
    "call_graph_density",
    "max_call_depth",
    "dynamic_max_call_depth",
    "skill_api_tokens",
)


@dataclass(frozen=True)
class Stat:
    """Mean ± sample s.d. over ``n`` seed-level values (``sd`` is None when n < 2)."""

    mean: float
    sd: float | None
    n: int


def stat(values: list[float | None]) -> Stat | None:
    """Aggregate seed-level values; unknown ones (a cost without a price) make the whole unknown."""
    if not values or any(v is None for v in values):
        return None
    vals = [float(v) for v in values if v is not None]
    return Stat(
        statistics.fmean(vals), statistics.stdev(vals) if len(vals) > 1 else None, len(vals)
    )


@dataclass
class RunNumbers:
    """Seed-level numbers of one run."""

    run: RunData
    curves: dict[str, dict[int, float | None]]
    finals: dict[str, float | None]
    knowledge: list[Generation]
    skill_method: bool


@dataclass
class Group:
    """One experiment: its runs (one per seed) and their aggregates."""

    key: GroupKey
    runs: list[RunNumbers]
    index: int = 0
    """Position among the report's experiments (a stable colour and order in every figure)."""
    curves: dict[str, list[tuple[int, Stat]]] = field(default_factory=dict)
    finals: dict[str, Stat | None] = field(default_factory=dict)
    knowledge: list[tuple[int, dict[str, Stat | None]]] = field(default_factory=list)

    @property
    def scripted(self) -> bool:
        return any(r.run.scripted for r in self.runs)

    @property
    def in_progress(self) -> list[RunNumbers]:
        return [r for r in self.runs if r.run.in_progress]

    @property
    def skill_method(self) -> bool:
        return any(r.skill_method for r in self.runs)

    @property
    def label(self) -> str:
        """Legend label: the experiment, its seed count, and what the reader must know."""
        seeds = len({r.run.seed for r in self.runs})
        marks = [f"n={seeds} seed{'s' if seeds != 1 else ''}"]
        if seeds != len(self.runs):  # a rerun of a seed counts as one more value: say so
            marks[0] = f"n={len(self.runs)} runs of {seeds} seed{'s' if seeds != 1 else ''}"
        if self.in_progress:
            marks.append(f"{len(self.in_progress)} in progress")
        if self.scripted:
            marks.append("SCRIPTED")
        return f"{self.key.label} [{', '.join(marks)}]"


def run_numbers(run: RunData) -> RunNumbers:
    """The seed-level curves and final values of one run."""
    by_batch: dict[int, list[MetricsRow]] = {}
    for row in run.train_rows:
        by_batch.setdefault(row.batch, []).append(row)
    knowledge = generations(run.path)
    skill_method = bool(knowledge) and knowledge[0].kind == "codebook"
    skills = _train_skill_fields(run) if skill_method else {}
    knowledge = _with_recorded(knowledge, run, skills)
    curves: dict[str, dict[int, float | None]] = {name: {} for name in CURVES}
    for _batch, rows in sorted(by_batch.items()):
        x = max(r.rollout for r in rows)
        curves["cost_per_episode"][x] = _mean([r.cost_usd for r in rows])
        curves["output_tokens_per_episode"][x] = _mean([_output_tokens(r) for r in rows])
        curves["llm_calls_per_episode"][x] = _mean([r.llm_calls for r in rows])
        curves["llm_calls_amortised_per_episode"][x] = _mean([_amortised_calls(r) for r in rows])
        curves["within_2_llm_calls_share"][x] = _mean([_within_2(r) for r in rows])
        if skill_method:
            fields = [skills.get(r.index, _NO_SKILLS) for r in rows]
            curves["skill_calls_per_episode"][x] = _mean([f["skill_calls"] for f in fields])
            curves["actions_per_skill_call"][x] = _per_call(fields)
            curves["dynamic_call_depth"][x] = float(max(f["dynamic_call_depth"] for f in fields))
    for e in run.eval_rows:
        x = e.rollout
        curves["eval_progress"][x] = e.progress_mean
        curves["eval_success"][x] = e.success_mean
        curves["eval_within_2_llm_calls_share"][x] = _mean([_within_2(p) for p in e.per_episode])
        if skill_method:
            fields = _eval_skill_fields(e)
            curves["eval_skill_calls_per_episode"][x] = _mean([f["skill_calls"] for f in fields])
            curves["eval_actions_per_skill_call"][x] = _per_call(fields)
        for name, value in _benchmark_metrics(
            e
        ).items():  # e.g. Crafter's score: in the curves table
            curves.setdefault(name, {})[x] = value
    last = run.eval_rows[-1] if run.eval_rows else None
    rows = run.train_rows
    speedrun = run.speedrun or {}
    finals: dict[str, float | None] = {
        "rollouts_done": float(len(rows)),
        "final_eval_rollout": None if last is None else last.rollout,
        "final_eval_progress": None if last is None else last.progress_mean,
        "final_eval_success": None if last is None else last.success_mean,
        "final_eval_cost_per_episode": None if last is None else last.cost_mean_usd,
        "cost_per_episode": _mean([r.cost_usd for r in rows]) if rows else None,
        "output_tokens_per_episode": _mean([_output_tokens(r) for r in rows]) if rows else None,
        "llm_calls_per_episode": _mean([r.llm_calls for r in rows]) if rows else None,
        "llm_calls_amortised_per_episode": _mean([_amortised_calls(r) for r in rows])
        if rows
        else None,
        "skill_calls_per_episode": (
            _mean([skills.get(r.index, _NO_SKILLS)["skill_calls"] for r in rows])
            if rows and skill_method
            else None
        ),
        "actions_per_skill_call": (
            _per_call([skills.get(r.index, _NO_SKILLS) for r in rows])
            if rows and skill_method
            else None
        ),
        "within_2_llm_calls_share": _mean([_within_2(r) for r in rows]) if rows else None,
        "final_eval_within_2_llm_calls_share": (
            None if last is None else _mean([_within_2(p) for p in last.per_episode])
        ),
        "final_eval_skill_calls_per_episode": None,
        "final_eval_actions_per_skill_call": None,
        "speedrun_rollout": speedrun.get("rollout") if speedrun.get("reached") else None,
    }
    if last is not None and skill_method:
        fields = _eval_skill_fields(last)
        finals["final_eval_skill_calls_per_episode"] = _mean([f["skill_calls"] for f in fields])
        finals["final_eval_actions_per_skill_call"] = _per_call(fields)
    # no skill calls at a point: no value there, not a made-up 0
    for name in (
        "eval_skill_calls_per_episode",
        "eval_actions_per_skill_call",
        "actions_per_skill_call",
        "dynamic_call_depth",
    ):
        curves[name] = {x: v for x, v in curves[name].items() if v is not None}
    return RunNumbers(run, curves, finals, knowledge, skill_method)


@dataclass(frozen=True)
class Separation:
    """Runs of one name kept apart because their results-deciding settings differ."""

    name: str
    differing: list[str]
    """The dotted settings that differ between the experiments (schedule first)."""
    variants: list[tuple[str, int]]
    """Each experiment's label and its number of runs."""

    @property
    def text(self) -> str:
        keys = ", ".join(self.differing[:6]) + (
            f", +{len(self.differing) - 6} more" if len(self.differing) > 6 else ""
        )
        parts = "; ".join(
            f'"{label}" ({n} run{"s" if n != 1 else ""})' for label, n in self.variants
        )
        return (
            f"{self.name}: {len(self.variants)} experiments kept apart, not averaged — "
            f"their settings differ in {keys}: {parts}"
        )


def experiment_keys(runs: list[RunData]) -> tuple[list[GroupKey], list[Separation]]:
    """Each run's experiment: its name plus its settings (seed aside); runs of one name whose
    settings differ get a variant label saying how, and a note that they were kept apart."""
    settings = [run.settings for run in runs]
    by_name: dict[GroupKey, dict[str, list[int]]] = {}
    for i, run in enumerate(runs):
        by_name.setdefault(run.key, {}).setdefault(settings[i].fingerprint, []).append(i)
    keys: list[GroupKey] = list(run.key for run in runs)
    separations = []
    for name, experiments in by_name.items():
        if len(experiments) < 2:
            continue
        fingerprints = sorted(experiments, key=lambda f: min(experiments[f]))
        firsts = [settings[experiments[f][0]] for f in fingerprints]
        labels = variant_labels(firsts)
        # never one key for two experiments
        labels = [
            label if labels.count(label) == 1 else f"{label} (settings {f[:8]})"
            for f, label in zip(fingerprints, labels, strict=True)
        ]
        for f, label in zip(fingerprints, labels, strict=True):
            for i in experiments[f]:
                keys[i] = replace(name, variant=label)
        separations.append(
            Separation(
                name.name,
                differing_keys(firsts),
                [
                    (label, len(experiments[f]))
                    for f, label in zip(fingerprints, labels, strict=True)
                ],
            )
        )
    return keys, separations


def group_runs(runs: list[RunData]) -> list[Group]:
    """Runs grouped by experiment (name and settings, seed aside), aggregated over seeds."""
    return group_experiments(runs)[0]


def group_experiments(runs: list[RunData]) -> tuple[list[Group], list[Separation]]:
    """``group_runs`` and the notes on runs of one name kept apart."""
    keys, separations = experiment_keys(runs)
    by_key: dict[GroupKey, list[RunNumbers]] = {}
    for run, key in zip(runs, keys, strict=True):
        by_key.setdefault(key, []).append(run_numbers(run))
    groups = []
    for key in sorted(by_key, key=lambda k: k.label):
        group = Group(key, by_key[key], index=len(groups))
        for name in list(CURVES) + sorted({n for r in group.runs for n in r.curves} - set(CURVES)):
            xs = sorted({x for r in group.runs for x in r.curves.get(name, {})})
            points = []
            for x in xs:
                s = stat([r.curves[name][x] for r in group.runs if x in r.curves.get(name, {})])
                if s is not None:
                    points.append((x, s))
            group.curves[name] = points
        for name in FINALS:
            values = [r.finals[name] for r in group.runs]
            if name == "speedrun_rollout":  # over the runs that reached the target
                values = [v for v in values if v is not None]
            group.finals[name] = stat(values)
        gens = sorted({g.generation for r in group.runs for g in r.knowledge})
        for g in gens:
            at = [k for r in group.runs for k in r.knowledge if k.generation == g]
            group.knowledge.append((g, {m: stat([getattr(k, m) for k in at]) for m in KNOWLEDGE}))
        groups.append(group)
    return groups, separations


def _benchmark_metrics(row: EvalRow) -> dict[str, float]:
    """A benchmark's own numbers of one evaluation: ``benchmark_metrics`` (Crafter:
    ``crafter_score``) and BALROG's BabyAI headline ``success_by_task.mean_over_tasks`` (task set
    ``mixed``)."""
    out = {
        f"eval_{k}": float(v)
        for k, v in (row.benchmark_metrics or {}).items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
    if row.success_by_task is not None:
        out["eval_success_mean_over_tasks"] = float(row.success_by_task.mean_over_tasks)
    return out


def _output_tokens(row: MetricsRow) -> float:
    return float(row.tokens.output) + float(row.sleep_output_tokens_share)


def _mean(values: list[Any]) -> float | None:
    if not values or any(v is None for v in values):
        return None
    return statistics.fmean(float(v) for v in values)


_NO_SKILLS = {"skill_calls": 0, "skill_actions": 0, "dynamic_call_depth": 0}


def _skill_fields(source: MetricsRow | EvalEpisode) -> dict[str, int]:
    """The per-episode skill fields of a metrics row or a ``per_episode`` entry."""
    return {
        "skill_calls": source.skill_calls,
        "skill_actions": source.skill_actions,
        "dynamic_call_depth": source.dynamic_call_depth,
    }


def _train_skill_fields(run: RunData) -> dict[int, dict[str, int]]:
    """Training episode index -> its skill fields (metrics.jsonl)."""
    return {row.index: _skill_fields(row) for row in run.train_rows}


def _eval_skill_fields(row: EvalRow) -> list[dict[str, int]]:
    """The skill fields of one evaluation's episodes (eval.jsonl)."""
    return [_skill_fields(p) for p in row.per_episode]


def _per_call(fields: list[dict[str, int]]) -> float | None:
    """Primitive actions per skill call over episodes (None without a skill call)."""
    calls = sum(f["skill_calls"] for f in fields)
    return sum(f["skill_actions"] for f in fields) / calls if calls else None


def _within_2(row: MetricsRow | EvalEpisode) -> float:
    """1.0 when the episode finished (success or env end) after at most two actor LLM calls."""
    return float(row.within_2_llm_calls)


def _amortised_calls(row: MetricsRow) -> float:
    """Actor calls plus the episode's share of its batch's sleep calls."""
    return float(row.llm_calls) + float(row.sleep_llm_calls_share)


def _with_recorded(
    knowledge: list[Generation], run: RunData, skills: dict[int, dict[str, int]]
) -> list[Generation]:
    """Codebook generations with what only the run's records know: the deepest recorded nesting
    in the training episodes that played each one, and the actor prompt's skill-API tokens."""
    if not knowledge or knowledge[0].kind != "codebook":
        return knowledge
    depth: dict[int, int] = {}
    tokens: dict[int, int] = {}
    rows: list[MetricsRow | EvalRow] = [*run.train_rows, *run.eval_rows]
    for row in rows:
        version = row.knowledge_version
        if row.skill_api_tokens is not None:
            tokens[version] = row.skill_api_tokens
        fields = skills.get(row.index) if isinstance(row, MetricsRow) else None
        if fields is not None:
            depth[version] = max(depth.get(version, 0), fields["dynamic_call_depth"])
    return [
        replace(
            g,
            dynamic_max_call_depth=depth.get(g.generation),
            skill_api_tokens=tokens.get(g.generation),
        )
        for g in knowledge
    ]
