"""The forecast on the terminal (a table and its notes, or JSON) and its command-line flags."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from speedrunner.core.config.schema import RunConfig
from speedrunner.core.estimate.forecast import estimate
from speedrunner.core.estimate.model import ContextUse, Estimate, PilotUse

__all__ = ["add_estimate_flags", "estimate_json", "format_estimate", "print_estimate"]

ORIGINS = {"flag": "--context-tokens", "config": "model.context_tokens", "table": "built-in table"}
NOT_AN_LLM = {
    "fake": "the fake LLM server, not an LLM",
    "scripted": "the scripted model, no LLM",
}


def format_estimate(e: Estimate) -> str:
    """The table and its notes, for the terminal."""
    lines = [
        f"estimate for {e.config}" if e.config else "estimate",
        f"{'role':<14} {'model':<24} {'calls':>17} {'input tok (max)':>16} "
        f"{'output tok (max)':>17} "
        f"{'USD (max)':>12} {'USD (typical)':>14}",
    ]
    for r in e.roles:
        usd = "no price" if r.usd_max is None else f"${r.usd_max:,.2f}"
        typical = (
            "-"
            if r.typical_calls is None
            else ("no price" if r.typical_usd is None else f"${r.typical_usd:,.2f}")
        )
        lines.append(
            f"{r.role:<14} {r.model[:24]:<24} {f'{r.calls_min:,}-{r.calls_max:,}':>17} "
            f"{r.input_tokens_max:>16,} {r.output_tokens_max:>17,} {usd:>12} {typical:>14}"
        )
    total = "unknown (a model has no price)" if e.usd_max is None else f"${e.usd_max:,.2f}"
    lines.append(f"worst case: {total}")
    lines += [f"  {_context_line(u)}" for u in e.context_windows]
    if e.typical_from:
        typical = (
            "unknown (a model has no price)" if e.typical_usd is None else f"${e.typical_usd:,.2f}"
        )
        labels = sorted({p.label for p in e.pilots if p.label})
        tag = f" [{' and '.join(labels).upper()} pilot: not an LLM's tokens]" if labels else ""
        lines.append(f"typical (from {', '.join(e.typical_from)}): {typical}{tag}")
        here = ", ".join(dict.fromkeys(r.model for r in e.roles))
        for p in e.pilots:
            lines += _pilot_lines(p, here)
    else:
        lines.append(
            "typical: not known without earlier runs; point at a pilot run with --from RUN_DIR"
        )
    lines.append(
        f"wall time (model calls only, {e.latency_s:g} s a call): "
        f"{_duration(e.wall_s_min)} to {_duration(e.wall_s_max)}"
    )
    for name in e.unknown_prices:
        lines.append(
            f"no price for model {name!r}: its cost is unknown. Set one in the config "
            f"(model.prices: {{input: ..., cached_input: ..., output: ...}}, USD per 1M tokens) "
            "or add it to speedrunner/data/prices.yaml"
        )
    lines.append("assumptions:")
    lines += [f"  - {a}" for a in e.assumptions]
    lines.append(
        "a spending cap makes the worst case irrelevant to your bill: "
        "run.max_cost_usd (docs/spending.md)"
    )
    return "\n".join(lines)


def _context_line(u: ContextUse) -> str:
    if u.tokens is None:
        return (
            f"UNBOUNDED for {u.model}: its context window is unknown, so late turns of long "
            "episodes count their whole history; set model.context_tokens: N in the config (its "
            "window; for a vLLM server its --max-model-len), or pass --context-tokens N"
        )
    return (
        f"bounded by {u.model}'s context window of {u.tokens:,} tokens "
        f"({ORIGINS.get(u.origin or '', '?')}" + (f": {u.source}" if u.source else "") + ")"
    )


def _pilot_lines(p: PilotUse, here: str) -> list[str]:
    models = ", ".join(p.models)
    lines = [
        f"  pilot {p.path}: "
        + (
            "a run of this very config (same results fingerprint)"
            if p.same_config
            else f"model {models}" + ("" if models == here else f" (this config: {here})")
        )
    ]
    if p.label:
        lines.append(
            f"    {p.label.upper()}: its model is {NOT_AN_LLM[p.label]}: its calls and token "
            "counts are not an LLM's, only priced at this config's prices"
        )
    lines += [f"    scaled: {s}" for s in p.scaled]
    if p.not_scaled:
        lines.append(
            "    differs, not scaled (assumed to change no call count or size): "
            + "; ".join(p.not_scaled)
        )
    return lines


def _duration(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def estimate_json(e: Estimate) -> str:
    return json.dumps(e.to_json(), indent=2)


def add_estimate_flags(parser: argparse.ArgumentParser) -> None:
    """Flags shared by ``speedrunner estimate`` and ``speedrunner sweep --estimate``."""
    parser.add_argument(
        "--from",
        dest="pilots",
        action="append",
        default=[],
        metavar="RUN_DIR",
        help="an earlier run of the same benchmark, task set, method and model (e.g. a pilot) "
        "for the typical case, scaled to this config's budgets (repeatable)",
    )
    parser.add_argument(
        "--latency",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds per model call for the wall-time range (default 5)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        metavar="N",
        help="calls in flight at once for the wall-time range (default: run.parallel_episodes "
        "and model.max_concurrency)",
    )
    parser.add_argument(
        "--context-tokens",
        type=_positive,
        default=None,
        metavar="N",
        help="every model's context window, over model.context_tokens and the built-in table: "
        "no call's input exceeds it",
    )
    parser.add_argument("--json", action="store_true", help="print the estimate as JSON")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of tokens") from None
    if value < 1:
        raise argparse.ArgumentTypeError("a context window holds at least 1 token")
    return value


def print_estimate(config: RunConfig, source: str, args: argparse.Namespace) -> Estimate:
    """Estimate ``config`` with the flags of ``add_estimate_flags`` and print it (table or JSON)."""
    e = estimate(
        config,
        source=source,
        latency_s=args.latency,
        context_tokens=args.context_tokens,
        pilots=[Path(p) for p in args.pilots],
        concurrency=args.concurrency,
    )
    print(estimate_json(e) if args.json else format_estimate(e))
    return e
