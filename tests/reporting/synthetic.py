"""Run directories written directly, with numbers chosen by the test (no training: fast).

Each has the files the report reads (docs/run-directory.md): ``config.resolved.json`` from
the real config loader (so grouping sees a real resolved config), ``provenance.json``,
``checkpoint.json``, ``summary.json``, ``metrics.jsonl`` and ``eval.jsonl``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from speedrunner.catalog import config_loader
from speedrunner.core.atomic import read_jsonl
from speedrunner.core.rundir import RUN_FORMAT

from ..e2e.harness import REPO

_FORMAT_1 = REPO / "tests" / "fixtures" / "run_format_1" / "react"


def metrics_row(**fields: object) -> dict[str, object]:
    """A complete metrics.jsonl row (a format-1 run's first) with ``fields`` changed."""
    return {**read_jsonl(_FORMAT_1 / "metrics.jsonl")[0], **fields}


def summary_doc(**fields: object) -> dict[str, object]:
    """A complete summary.json (a format-1 run's) with ``fields`` changed."""
    return {**json.loads((_FORMAT_1 / "summary.json").read_text("utf-8")), **fields}


def eval_row(**fields: object) -> dict[str, object]:
    """A complete eval.jsonl row (a format-1 run's first) with ``fields`` changed."""
    return {**read_jsonl(_FORMAT_1 / "eval.jsonl")[0], **fields}


@dataclass
class Spec:
    """One run: its config (file + overrides) and the numbers its files hold."""

    config: str = "react-gpt-seq.yaml"
    seed: int = 0
    overrides: list[str] = field(default_factory=list)
    quick_test: bool = False
    success: float = 0.5
    """Success (and progress) at the last evaluation."""
    llm_calls: int = 30
    sleep_calls_share: float = 0.0
    cost: float | None = 0.01
    """Cost of each training episode (None: unpriced)."""
    spent: float | None = None
    """summary.json ``spent_usd`` (None: a price is unknown)."""
    unknown_spend: float = 0.0
    """summary.json ``unknown_spend_usd``: unanswered attempts that may have been billed."""


def write_run(path: Path, spec: Spec) -> Path:
    loaded = config_loader().load(
        REPO / "configs" / "babyai" / spec.config,
        overrides=[f"run.seed={spec.seed}", *spec.overrides],
        quick_test=spec.quick_test,
    )
    config = loaded.resolved_json()
    path.mkdir(parents=True)
    (path / "config.resolved.json").write_text(json.dumps(config))
    (path / "provenance.json").write_text(
        json.dumps({"run_format": RUN_FORMAT, "run_id": path.name, "quick_test": spec.quick_test})
    )
    (path / "checkpoint.json").write_text(
        json.dumps({"run_id": path.name, "results_config_sha256": "ab" * 32})
    )
    rollouts, every = config["run"]["rollouts"], config["run"]["sleep_every"]
    rows = [
        metrics_row(
            batch=i // every,
            rollout=i + 1,
            index=i,
            llm_calls=spec.llm_calls,
            cost_usd=spec.cost,
            tokens={"input_uncached": 0, "input_cached": 0, "output": 100, "reasoning": 0},
            sleep_output_tokens_share=0.0,
            sleep_llm_calls_share=spec.sleep_calls_share,
            stop_reason="budget",
            within_2_llm_calls=False,
            scripted=False,
        )
        for i in range(rollouts)
    ]
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    evals = [
        eval_row(
            rollout=0,
            success_mean=0.0,
            progress_mean=0.0,
            cost_mean_usd=spec.cost,
            per_episode=[],
            scripted=False,
        ),
        eval_row(
            rollout=rollouts,
            success_mean=spec.success,
            progress_mean=spec.success,
            cost_mean_usd=spec.cost,
            per_episode=[],
            scripted=False,
        ),
    ]
    (path / "eval.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
    summary = summary_doc(
        run_id=path.name,
        status="finished",
        model=config["model"]["name"],
        scripted=config["model"]["provider"] == "scripted",
        spent_usd=spec.spent,
        unknown_spend_usd=spec.unknown_spend,
    )
    (path / "summary.json").write_text(json.dumps(summary))
    return path
