"""The report's caps table: per run, the caps in force and how often each bound.

A cap that binds changes what a run can show (a skill call cut short costs another LLM
call; a rejected edit stops a library growing; a world ended early unlocks fewer
achievements), so the counts sit next to the results. Training counts come from
``metrics.jsonl`` (each batch's sleep once), evaluation counts from ``eval.jsonl``; rows
written before a cap was counted add 0. A cap the run's method does not have is shown as
"n/a", never as 0.
"""

from __future__ import annotations

from typing import Any

from speedrunner.core.records import dump_row
from speedrunner.core.reporting.aggregate import Group
from speedrunner.core.reporting.table import Table, fmt
from speedrunner.core.runtime.caps import (
    CAP_NAMES,
    SKILL_CAPS,
    caps_in_force,
    run_cap_hits,
    sum_skill_hits,
)

NOT_IN_FORCE = "n/a"
_DEFAULT_RULE = {"max_skill_actions": "episode budget", "skill_timeout": "derived"}
"""How a null setting reads (the caps without an entry read "none": no cap)."""


def _in_force(settings: dict[str, Any]) -> str:
    """The run's cap settings as configured (null: the protocol's default rule)."""
    if not settings:
        return "no skills"
    return "; ".join(
        f"{_setting_name(cap)}={_DEFAULT_RULE.get(cap, 'none') if value is None else value}"
        for cap, value in settings.items()
    )


def _setting_name(cap: str) -> str:
    return "skill_timeout_s" if cap == "skill_timeout" else cap


def caps_table(groups: list[Group]) -> Table:
    rows = []
    for g in groups:
        for r in g.runs:
            run = r.run
            settings = caps_in_force(run.config.get("method") or {})
            train = run_cap_hits(dump_row(m) for m in run.train_rows)
            evals = sum_skill_hits(e.cap_hits for e in run.eval_rows)
            rows.append(
                {
                    "benchmark": g.key.benchmark,
                    "task_set": g.key.task_set,
                    "method": g.key.method,
                    "model": g.key.model,
                    "variant": g.key.variant,
                    "seed": str(run.seed),
                    "run_id": run.run_id,
                    "caps_in_force": _in_force(settings),
                    **{
                        f"train_{n}": fmt(train[n]) if n in settings else NOT_IN_FORCE
                        for n in CAP_NAMES
                    },
                    **{
                        f"eval_{n}": fmt(v) if n in settings else NOT_IN_FORCE
                        for n, v in evals.items()
                    },
                }
            )
    columns = [
        "benchmark",
        "task_set",
        "method",
        "model",
        "variant",
        "seed",
        "run_id",
        "caps_in_force",
        *(f"train_{n}" for n in CAP_NAMES),
        *(f"eval_{n}" for n in SKILL_CAPS),
    ]
    notes = {
        "caps_in_force": "episode budget: a skill call may take the episode's remaining env "
        "actions; derived: 60 s + 0.25 s per action of the call's cap; none: no cap; "
        f"{NOT_IN_FORCE}: the method has no such cap",
        "train_max_skill_actions": "training skill calls stopped by the per-call action cap",
        "train_skill_timeout": "training skill calls killed by the per-call wall-clock limit",
        "train_max_iterations_per_world": "Voyager training worlds ended by "
        "method.max_iterations_per_world (stop_reason iteration_end) before their budget",
        "train_max_functions": "codebook edits rejected by method.max_functions (sleep phases)",
        "train_max_codebook_chars": "codebook edits rejected by method.max_codebook_chars "
        "(sleep phases)",
        "train_max_functions_per_episode": "ASI induction answers with more new functions than "
        "method.max_functions_per_episode (the rest ignored)",
        "train_max_inducer_turns": "sleep phases that ran out of method.max_inducer_turns turns",
    }
    return Table(
        "caps", "Caps in force and how often each bound (per run)", columns, rows, [], notes
    )
