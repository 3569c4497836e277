"""The report's tables, as CSV (one file per table) and Markdown (``report.md``), same numbers.

Both are written from the same rows of already formatted strings (``fmt``: six
significant digits), so a value in ``report.md`` is character for character the one in the
CSV. A mean and its s.d. are separate CSV columns and one ``mean ± sd`` Markdown cell.
"""

from __future__ import annotations

from speedrunner.core.answer_counts import COUNT_KEYS as ANSWER_COUNTS
from speedrunner.core.reporting.aggregate import FINALS, KNOWLEDGE, Group, Stat
from speedrunner.core.reporting.caps_table import caps_table
from speedrunner.core.reporting.table import Table, fmt

NAME_COLUMNS = ["benchmark", "task_set", "method", "model"]
KEY_COLUMNS = [*NAME_COLUMNS, "variant"]
"""An experiment: its name and what sets it apart from others of that name (per-run tables
that name the run may leave the variant out)."""


def _stat_cells(name: str, s: Stat | None) -> dict[str, str]:
    if s is None:
        return {f"{name}_mean": "", f"{name}_sd": ""}
    return {f"{name}_mean": fmt(s.mean), f"{name}_sd": fmt(s.sd)}


def _key_cells(group: Group) -> dict[str, str]:
    k = group.key
    return {
        "benchmark": k.benchmark,
        "task_set": k.task_set,
        "method": k.method,
        "model": k.model,
        "variant": k.variant,
    }


def _target(speedrun: dict | None, config: dict) -> str:
    target = speedrun if speedrun and "target" in speedrun else config.get("speedrun", {})
    return f"{target.get('metric', '?')} >= {fmt(target.get('target'))}"


def summary_table(groups: list[Group]) -> Table:
    rows = []
    for g in groups:
        reached = sum(1 for r in g.runs if (r.run.speedrun or {}).get("reached"))
        targets = sorted({_target(r.run.speedrun, r.run.config) for r in g.runs})
        row = {
            **_key_cells(g),
            "seeds": str(len({r.run.seed for r in g.runs})),
            "runs": str(len(g.runs)),
            "in_progress": str(len(g.in_progress)),
            "scripted": fmt(g.scripted),
            "speedrun_target": "; ".join(targets),
            "speedrun_reached": f"{reached}/{len(g.runs)}",
        }
        for name in FINALS:
            row.update(_stat_cells(name, g.finals.get(name)))
        rows.append(row)
    columns = [
        *KEY_COLUMNS,
        "seeds",
        "runs",
        "in_progress",
        "scripted",
        *FINALS,
        "speedrun_target",
        "speedrun_reached",
    ]
    notes = {
        "seeds": "distinct seeds; runs: run directories (a rerun of a seed is one more value)",
        "in_progress": "runs not finished (running, interrupted or failed): "
        "their numbers are partial",
        **FINALS,
    }
    return Table(
        "summary", "Experiments (mean ± 1 s.d. over seeds)", columns, rows, list(FINALS), notes
    )


def runs_table(groups: list[Group]) -> Table:
    rows = []
    for g in groups:
        for r in g.runs:
            run = r.run
            rows.append(
                {
                    **_key_cells(g),
                    "seed": str(run.seed),
                    "run_id": run.run_id,
                    "status": run.status,
                    "resumes": str(run.resumes),
                    "scripted": fmt(run.scripted),
                    "rollouts": f"{len(run.metrics)}/{run.rollouts_planned}",
                    "final_eval_progress": fmt(r.finals["final_eval_progress"]),
                    "final_eval_success": fmt(r.finals["final_eval_success"]),
                    "total_cost_usd": fmt(run.total_cost_usd),
                    "unknown_spend_usd": fmt(run.unknown_spend_usd),
                    "sandbox_violations": fmt(run.sandbox_violations),
                    "experiment": run.settings.fingerprint[:12],
                    "results_config_sha256": (run.recorded_fingerprint or "")[:12],
                    "path": str(run.path),
                }
            )
    columns = [
        *KEY_COLUMNS,
        "seed",
        "run_id",
        "status",
        "resumes",
        "scripted",
        "rollouts",
        "final_eval_progress",
        "final_eval_success",
        "total_cost_usd",
        "unknown_spend_usd",
        "sandbox_violations",
        "experiment",
        "results_config_sha256",
        "path",
    ]
    notes = {
        "variant": "what sets the experiment apart from others of the same name "
        "(empty: nothing does)",
        "total_cost_usd": "dollars of every LLM call of the run: training, sleep and evaluation "
        "(summary.json spent_usd); empty when a price is unknown or the run did not record it",
        "unknown_spend_usd": "worst case of attempts that went unanswered (timed out, "
        "connection lost) and may have been billed; not in total_cost_usd "
        "(summary.json unknown_spend_usd)",
        "experiment": "hash of the settings that decide results, seed aside: runs alike in it "
        "are one experiment",
        "results_config_sha256": "the run's own fingerprint of those settings, seed included "
        "(checkpoint.json)",
        "sandbox_violations": "messages from a sandbox that broke the protocol (forged, out of "
        "step or oversized): each ended one skill call or analysis turn and restarted that "
        "sandbox; summary.json has them by train/eval/sleep",
    }
    return Table("runs", "Runs", columns, rows, [], notes)


def curves_table(groups: list[Group]) -> Table:
    rows = []
    for g in groups:
        for name, points in g.curves.items():
            for x, s in points:
                rows.append(
                    {
                        **_key_cells(g),
                        "curve": name,
                        "rollout": str(x),
                        **_stat_cells("value", s),
                        "n": str(s.n),
                    }
                )
    return Table(
        "curves",
        "Curves (one point per batch or evaluation; n = seeds with that point)",
        [*KEY_COLUMNS, "curve", "rollout", "value", "n"],
        rows,
        ["value"],
    )


def knowledge_table(groups: list[Group]) -> Table:
    rows = []
    for g in groups:
        for gen, stats in g.knowledge:
            n = max((s.n for s in stats.values() if s is not None), default=0)
            row = {**_key_cells(g), "generation": str(gen), "n": str(n)}
            for name in KNOWLEDGE:
                row.update(_stat_cells(name, stats[name]))
            rows.append(row)
    return Table(
        "knowledge",
        "Knowledge per generation",
        [*KEY_COLUMNS, "generation", "n", *KNOWLEDGE],
        rows,
        list(KNOWLEDGE),
    )


def answers_table(groups: list[Group]) -> Table:
    """How each run's answers were read, per role (``summary.json`` ``format``)."""
    rows = []
    for g in groups:
        for r in g.runs:
            formats = {} if r.run.summary is None else r.run.summary.format
            for role, counts in sorted(formats.items()):
                cells = counts.model_dump()
                rows.append(
                    {
                        **_key_cells(g),
                        "seed": str(r.run.seed),
                        "run_id": r.run.run_id,
                        "role": role,
                        **{k: fmt(cells[k]) for k in ANSWER_COUNTS},
                    }
                )
    notes = {
        "ok": "turns read in the exact format asked for",
        "repaired": "turns read only thanks to the tolerant parsers (markdown, <think>, JSON, ...)",
        "lost": "turns whose form yielded no meaning (no action or tool call, or two "
        "different ones)",
        "truncated": "turns cut off at max_tokens (finish_reason 'length')",
        "dropped_calls": "tool calls written after a turn's first one; only the first ran "
        "(the turn is repaired)",
        "acted": "actor turns whose action the env took (format and effect are apart: an ok "
        "answer may act on nothing)",
        "refused": "actor turns that changed nothing: no action read, or one the env does not know",
        "skill_calls": "actor turns that called a skill",
    }
    return Table(
        "answers",
        "How answers were read (turns per role)",
        [*NAME_COLUMNS, "seed", "run_id", "role", *ANSWER_COUNTS],
        rows,
        [],
        notes,
    )


def all_tables(groups: list[Group]) -> list[Table]:
    return [
        summary_table(groups),
        runs_table(groups),
        curves_table(groups),
        knowledge_table(groups),
        answers_table(groups),
        caps_table(groups),
    ]
