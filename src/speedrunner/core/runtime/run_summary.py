"""summary.json's writer, and the one line every run ends with: episodes, success, LLM calls,
tokens, spend, wall time.

It is read from what the run stored (``checkpoint.json``, ``summary.json``,
``llm_calls.jsonl``), not from the process's memory, so a run that was resumed, stopped or
failed reports its whole history the same way. The spend is summary.json's ``spent_usd``
(``core.llm.spent``), so the line, the file and a budget message show one figure. A spend
that cannot be computed says why and how to fix it instead of a bare "unknown".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from speedrunner.core.atomic import atomic_write_json
from speedrunner.core.config.schema import ModelConfig, RunConfig
from speedrunner.core.llm.spent import CallLogTotals, usd
from speedrunner.core.records import SUMMARY_FILE, RunSummary, dump_row, stored_summary
from speedrunner.core.runtime.checkpoint import CHECKPOINT_FILE

CALLS_FILE = "llm_calls.jsonl"


def write_summary(run_dir: Path, summary: RunSummary) -> None:
    """``summary`` as ``run_dir``'s summary.json, atomically (fields written only in some runs
    stay out when unset, so the file is key for key what the run built)."""
    atomic_write_json(run_dir / SUMMARY_FILE, dump_row(summary))


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _count(n: float) -> str:
    """12, 3.4k, 1.23M."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.3g}M"
    if n >= 1_000:
        return f"{n / 1_000:.3g}k"
    return f"{n:g}"


def _section_of(model: str, config: RunConfig) -> tuple[str, ModelConfig]:
    """Which config section names ``model`` (the actor's first: it is what most calls use)."""
    if config.model.name == model or config.inducer is None:
        return "model", config.model
    return "inducer", config.inducer


def _unknown_cost_reason(models: list[str], config: RunConfig) -> str:
    parts = []
    for model in models:
        section, _ = _section_of(model, config)
        parts.append(
            f"no price for model {model!r} in speedrunner/data/prices.yaml; set {section}.prices "
            f"(USD per 1M tokens), e.g. --set '{section}.prices="
            "{input: 0.25, cached_input: 0.025, output: 2.0}'"
        )
    return "; ".join(parts)


def summary_line(
    run_dir: Path, config: RunConfig, *, status: str = "finished", summary: RunSummary | None = None
) -> str:
    """``run_dir``'s totals in one line; ``status`` says how this process ended it. ``summary``
    is the summary.json just built (default: the file; the log's spend when there is none yet),
    whose ``spent_usd`` the line shows."""
    checkpoint = _read_json(run_dir / CHECKPOINT_FILE)
    summary = stored_summary(run_dir) if summary is None else summary
    totals = checkpoint.get("totals") or {}
    episodes = int(totals.get("episodes") or 0)
    successes = int(totals.get("successes") or 0)
    success = (
        f"training success {successes / episodes:.3f}" if episodes else "no training episode yet"
    )
    if summary is not None and summary.final_eval is not None:
        success += f", final eval success {summary.final_eval.success_mean:.3f}"

    calls = CallLogTotals(run_dir / CALLS_FILE).read()
    spent = (
        calls.spent_usd if summary is None else summary.spent_usd
    )  # killed before its first summary: the log
    if calls.calls and calls.scripted == calls.calls:
        cost = "spent $0 (the scripted model, not an LLM)"
    elif spent is None:
        cost = "spent unknown" + (
            f" ({_unknown_cost_reason(list(calls.unpriced), config)})" if calls.unpriced else ""
        )
    else:
        replays = calls.replays
        cost = f"spent {usd(spent)}" + (
            f" ({replays} replayed from the cache, not paid again)" if replays else ""
        )

    elapsed = float(
        checkpoint.get("elapsed_s") or (summary.elapsed_s if summary is not None else 0.0)
    )
    ended = "" if status == "finished" else f" [{status}]"
    tokens_in, tokens_out = calls.tokens_in, calls.tokens_out
    return (
        f"run summary{ended}: {episodes} training episodes, {success} | {calls.calls} LLM calls, "
        f"{_count(tokens_in + tokens_out)} tokens ({_count(tokens_in)} in, "
        f"{_count(tokens_out)} out) | {cost} | wall time {elapsed:.0f} s"
    )
