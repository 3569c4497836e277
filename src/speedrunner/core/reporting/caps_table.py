"""The report's caps table: per run, the caps in force and how often each bound.

A cap that binds changes what a run can show (a skill call cut short costs another LLM
call; a rejected edit stops a library growing), so the counts sit next to the results.
Training counts come from ``metrics.jsonl`` (each batch's sleep once), evaluation counts
from ``eval.jsonl``; rows written before caps were counted add 0.
"""

from __future__ import annotations

from typing import Any

from speedrunner.core.reporting.aggregate import Group
from speedrunner.core.reporting.tables import Table, fmt
from speedrunner.core.runtime.caps import CAP_NAMES, run_cap_hits, sum_skill_hits


def _in_force(method: dict[str, Any]) -> str:
    """The run's cap settings as configured (null: the protocol's default)."""
    if "max_skill_actions" not in method:
        return "no skills"
    shown = {
        "max_skill_actions": "episode budget" if method.get("max_skill_actions") is None else method["max_skill_actions"],
        "skill_timeout_s": "derived" if method.get("skill_timeout_s") is None else method["skill_timeout_s"],
    }
    for name in ("max_functions", "max_codebook_chars"):
        if name in method:
            shown[name] = "none" if method[name] is None else method[name]
    return "; ".join(f"{k}={v}" for k, v in shown.items())


def caps_table(groups: list[Group]) -> Table:
    rows = []
    for g in groups:
        for r in g.runs:
            run = r.run
            train = run_cap_hits(run.metrics)
            evals = sum_skill_hits(e.get("cap_hits") for e in run.evals)
            rows.append({"benchmark": g.key.benchmark, "task_set": g.key.task_set, "method": g.key.method,
                         "model": g.key.model, "seed": str(run.seed), "run_id": run.run_id,
                         "caps_in_force": _in_force(run.config.get("method") or {}),
                         **{f"train_{n}": fmt(train[n]) for n in CAP_NAMES},
                         **{f"eval_{n}": fmt(v) for n, v in evals.items()}})
    columns = ["benchmark", "task_set", "method", "model", "seed", "run_id", "caps_in_force",
               *(f"train_{n}" for n in CAP_NAMES), "eval_max_skill_actions", "eval_skill_timeout"]
    notes = {"caps_in_force": "episode budget: a skill call may take the episode's remaining env actions; "
                              "derived: 60 s + 0.25 s per action of the call's cap; none: no library cap",
             "train_max_skill_actions": "training skill calls stopped by the per-call action cap",
             "train_skill_timeout": "training skill calls killed by the per-call wall-clock limit",
             "train_max_functions": "codebook edits rejected by method.max_functions (sleep phases)",
             "train_max_codebook_chars": "codebook edits rejected by method.max_codebook_chars (sleep phases)"}
    return Table("caps", "Caps in force and how often each bound (per run)", columns, rows, [], notes)
