"""``speedrunner estimate``: what a run will call and cost, before anything is spent.

Everything comes from the config (no key, no network): the schedule (rollouts, batches,
evaluation points), the budgets (``max_llm_calls``, ``max_env_actions``, the sleep phase's
turn limits), ``max_tokens`` and the prices of the same table the run uses
(``core.llm.prices``).

The worst case is a bound under stated assumptions, counted the way the spending cap counts
a call in flight: every input byte a token, every call uncached, all of ``max_tokens`` as
output, the actor's full history resent on every turn (each earlier turn adds at most
``max_tokens`` of answer and one observation). What the config cannot tell — the size of the
first prompt and of an observation, a codebook without ``max_codebook_chars``, how many calls
an episode of invalid answers takes when only actions are budgeted — is an assumption printed
with the table. The typical case comes from earlier runs (``--from RUN_DIR``): their calls per
episode and per sleep phase, and their tokens per call, priced with today's table.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from speedrunner.core.atomic import iter_jsonl
from speedrunner.core.config.schema import ModelConfig, Prices, RunConfig
from speedrunner.core.llm.prices import resolve_prices

__all__ = ["Estimate", "RoleEstimate", "estimate", "format_estimate"]

# Assumed sizes in bytes (= tokens at most) that the config does not fix. Measured on the
# shipped benchmarks' prompts and observations with generous headroom; printed with every table.
FIRST_PROMPT_BYTES = {"babyai": 6_000, "crafter": 10_000, "scienceworld": 16_000}
OBSERVATION_BYTES = {"babyai": 1_500, "crafter": 3_000, "scienceworld": 8_000}
DEFAULT_FIRST_PROMPT, DEFAULT_OBSERVATION = 16_000, 8_000
CODEBOOK_BYTES_ASSUMED = 60_000
"""A codebook's size when ``max_codebook_chars`` is unset (no cap: the library may grow past it)."""
PROMPT_TEMPLATE_BYTES = 8_000
"""Instructions of a sleep-phase prompt around what it shows (trajectories, guide, codebook)."""


@dataclass
class RoleEstimate:
    """One role's calls over the whole run, and their tokens and dollars."""

    role: str
    model: str
    calls_min: int
    calls_max: int
    input_tokens_max: int
    output_tokens_max: int
    usd_max: float | None
    """None: the model has no price."""
    per: str
    """What the counts are per before scaling (``episode``, ``batch``...), for the notes."""
    typical_calls: float | None = None
    typical_usd: float | None = None


@dataclass
class Estimate:
    config: str
    roles: list[RoleEstimate]
    assumptions: list[str] = field(default_factory=list)
    unknown_prices: list[str] = field(default_factory=list)
    wall_s_min: float = 0.0
    wall_s_max: float = 0.0
    latency_s: float = 0.0
    typical_from: list[str] = field(default_factory=list)

    @property
    def usd_max(self) -> float | None:
        parts = [r.usd_max for r in self.roles]
        return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)

    @property
    def typical_usd(self) -> float | None:
        parts = [r.typical_usd for r in self.roles if r.typical_calls is not None]
        if not parts or any(p is None for p in parts):
            return None
        return sum(p for p in parts if p is not None)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "usd_max": self.usd_max, "typical_usd": self.typical_usd}


@dataclass(frozen=True)
class _Calls:
    """Calls of one role in one unit (an episode, a batch), with their worst-case tokens."""

    role: str
    model: ModelConfig
    per_unit_min: int
    per_unit_max: int
    units: int
    unit: str
    first_input: int
    """Worst-case input tokens of the unit's first call."""
    growth: int
    """Worst-case input tokens each further call of the unit adds (its history)."""


def estimate(config: RunConfig, *, source: str = "", latency_s: float = 5.0,
             context_tokens: int | None = None, pilots: Sequence[Path] = (),
             concurrency: int | None = None) -> Estimate:
    """The forecast for ``config``; ``pilots`` are earlier run directories for the typical case;
    ``concurrency`` the calls in flight at once (default: what the config allows)."""
    run, bench, method = config.run, config.benchmark, config.method
    out = Estimate(config=source, roles=[], latency_s=latency_s)
    name = bench.name
    first = FIRST_PROMPT_BYTES.get(name, DEFAULT_FIRST_PROMPT)
    obs = OBSERVATION_BYTES.get(name, DEFAULT_OBSERVATION)
    out.assumptions.append(
        f"first actor prompt <= {first:,} bytes and one observation <= {obs:,} bytes on {name} "
        "(not fixed by the config), plus the knowledge shown")
    knowledge = _knowledge_bytes(config, out.assumptions)
    batches = run.rollouts // run.sleep_every
    eval_episodes = run.evaluations * run.eval_episodes
    actor_max = _actor_calls_per_episode(config, out.assumptions)
    actor_tokens = config.model.sampling.max_tokens
    calls: list[_Calls] = []
    voyager = method.name == "voyager"
    if not voyager:
        calls.append(_Calls("actor", config.model, 1, actor_max, run.rollouts, "training episode",
                            first + knowledge, actor_tokens + obs))
    if eval_episodes:
        calls.append(_Calls("actor (eval)", config.model, 1, actor_max, eval_episodes, "eval episode",
                            first + knowledge, actor_tokens + obs))
    calls += _sleep_calls(config, batches, knowledge, out.assumptions)
    if method.name in ("speedrunner", "speedrunner_no_cl", "asi", "voyager"):
        out.assumptions.append("an episode that ends early (success, or the env says done) makes fewer "
                               "calls: the minimum counts one actor call per episode")
    for c in calls:
        prices = resolve_prices(c.model)
        if prices is None and c.model.provider != "scripted" and c.model.name not in out.unknown_prices:
            out.unknown_prices.append(c.model.name)
        inp, outp = _tokens(c, context_tokens)
        out.roles.append(RoleEstimate(
            role=c.role, model=c.model.name, calls_min=c.per_unit_min * c.units,
            calls_max=c.per_unit_max * c.units, input_tokens_max=inp, output_tokens_max=outp,
            usd_max=_usd(prices, inp, outp, c.model), per=c.unit))
    if context_tokens is not None:
        out.assumptions.append(f"no call's input exceeds the model's context window of {context_tokens:,} tokens")
    else:
        out.assumptions.append("no context window is assumed, so late turns of long episodes count their whole "
                               "history: pass --context-tokens N (the model's window) for a tighter worst case")
    _wall_time(out, config, calls, latency_s, concurrency)
    if pilots:
        _typical(out, config, calls, pilots)
    return out


def _knowledge_bytes(config: RunConfig, notes: list[str]) -> int:
    method = config.method
    if method.name == "react":
        return 0
    if method.name == "opo":
        return int(method.guide_max_chars) * 4  # type: ignore[attr-defined]  # 4 UTF-8 bytes a char at most
    cap = getattr(method, "max_codebook_chars", None)
    if cap is not None:
        return int(cap) * 4
    notes.append(f"the codebook shown stays under {CODEBOOK_BYTES_ASSUMED:,} bytes (method.max_codebook_chars "
                 "is unset, so nothing caps it: a larger library costs more per call)")
    return CODEBOOK_BYTES_ASSUMED


def _actor_calls_per_episode(config: RunConfig, notes: list[str]) -> int:
    bench = config.benchmark
    if bench.max_llm_calls is not None:
        return bench.max_llm_calls
    actions = bench.max_env_actions or 0
    notes.append(
        f"an actor call takes at least one env action, so at most {actions:,} calls an episode "
        "(benchmark.max_env_actions); an answer that is not a valid action takes none, so a model "
        "answering badly can make more calls until the episode's wall clock "
        f"({config.run.episode_wall_clock_s:.0f} s) ends it: set benchmark.max_llm_calls for a hard "
        "bound, and rely on run.max_cost_usd for the money")
    return actions


def _sleep_calls(config: RunConfig, batches: int, knowledge: int, notes: list[str]) -> list[_Calls]:
    method, model = config.method, config.inducer_model
    out_tokens = model.sampling.max_tokens
    name = method.name
    if name == "opo":
        shown = int(method.max_batch_chars) * 4 + knowledge + PROMPT_TEMPLATE_BYTES  # type: ignore[attr-defined]
        return [_Calls("guide", model, 1, 1, batches, "sleep phase", shown, 0)]
    if name in ("speedrunner", "speedrunner_no_cl"):
        turns = int(method.max_inducer_turns)  # type: ignore[attr-defined]
        tool = int(method.max_tool_output_chars) * 4  # type: ignore[attr-defined]
        shown = int(method.max_trajectory_chars) * 4  # type: ignore[attr-defined]
        return [_Calls("inducer", model, 1, turns, batches, "sleep phase",
                       knowledge + PROMPT_TEMPLATE_BYTES + shown, out_tokens + max(tool, shown))]
    if name == "asi":
        shown = int(method.max_trajectory_chars) * 4 + knowledge + PROMPT_TEMPLATE_BYTES  # type: ignore[attr-defined]
        return [_Calls("inducer", model, 0, config.run.sleep_every, batches, "sleep phase", shown, 0)]
    if name == "voyager":
        iters = int(method.max_iterations_per_world)  # type: ignore[attr-defined]
        observation = int(method.max_observation_chars) * 4  # type: ignore[attr-defined]
        shown = knowledge + PROMPT_TEMPLATE_BYTES + 2 * observation
        notes.append("Voyager: per training world at most max_iterations_per_world iterations, each a "
                     "curriculum proposal (max_curriculum_asks), one action-agent answer, a critic "
                     "(max_critic_asks) and one skill description; embeddings are not counted")
        units = config.run.rollouts
        return [
            _Calls("curriculum", model, 0, iters * int(method.max_curriculum_asks), units,  # type: ignore[attr-defined]
                   "training world", shown, 0),
            _Calls("action agent", model, 1, iters, units, "training world", shown, 0),
            _Calls("critic", model, 0, iters * int(method.max_critic_asks), units,  # type: ignore[attr-defined]
                   "training world", shown, 0),
            _Calls("description", model, 0, iters, units, "training world", knowledge + PROMPT_TEMPLATE_BYTES, 0),
        ]
    if name != "react":
        notes.append(f"method {name!r}: its sleep-phase calls are not estimated")
    return []


def _tokens(c: _Calls, context: int | None) -> tuple[int, int]:
    """Worst-case input and output tokens of all of ``c``'s calls."""
    n = c.per_unit_max
    per_unit = 0
    for k in range(n):
        one = c.first_input + k * c.growth
        per_unit += one if context is None else min(one, context)
    return per_unit * c.units, n * c.model.sampling.max_tokens * c.units


def _usd(prices: Prices | None, inp: int, outp: int, model: ModelConfig) -> float | None:
    if model.provider == "scripted":
        return 0.0
    if prices is None:
        return None
    return (inp * max(prices.input, prices.cached_input) + outp * prices.output) / 1e6


def _wall_time(out: Estimate, config: RunConfig, calls: list[_Calls], latency: float,
               concurrency: int | None) -> None:
    """Model time only (env steps and skill code add to it): a unit's calls are sequential; units
    of one batch or evaluation run side by side up to parallel_episodes and max_concurrency."""
    run = config.run
    lanes = min(run.workers(max(run.sleep_every, run.eval_episodes or 1)), config.model.max_concurrency)
    if concurrency is not None:
        lanes = max(1, min(lanes, concurrency))
    lo = hi = 0.0
    for c in calls:
        parallel = c.unit in ("training episode", "eval episode", "training world")
        width = lanes if parallel else 1
        rounds = math.ceil(c.units / width)
        lo += rounds * c.per_unit_min * latency
        hi += rounds * c.per_unit_max * latency
    out.wall_s_min, out.wall_s_max = lo, hi
    out.assumptions.append(f"wall time counts model calls only, {latency:g} s each, "
                           f"{lanes} episode(s) side by side (run.parallel_episodes, model.max_concurrency, --concurrency)")


def _typical(out: Estimate, config: RunConfig, calls: list[_Calls], pilots: Sequence[Path]) -> None:
    """Calls per unit and tokens per call as the pilot runs had them, scaled to this schedule."""
    units = {"training episode": 0, "eval episode": 0, "sleep phase": 0, "training world": 0}
    rows: list[dict[str, Any]] = []
    for d in pilots:
        calls_file = Path(d) / "llm_calls.jsonl"
        if not calls_file.is_file():
            from speedrunner.errors import ReportInputError

            raise ReportInputError(f"{d}: no llm_calls.jsonl; --from takes run directories of earlier runs")
        out.typical_from.append(str(d))
        rows += [r for r in iter_jsonl(calls_file) if r.get("error") is None]
        metrics = list(iter_jsonl(Path(d) / "metrics.jsonl"))
        units["training episode"] += len(metrics)
        units["training world"] += len(metrics)
        units["sleep phase"] += len({m.get("batch") for m in metrics})
        units["eval episode"] += sum(int(e.get("episodes", 0)) for e in iter_jsonl(Path(d) / "eval.jsonl"))
    by_role: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_role.setdefault(_role_of(r), []).append(r)
    for role, c in zip(out.roles, calls, strict=True):
        seen = by_role.get(role.role, [])
        have = units.get(c.unit, 0)
        if not have:
            continue
        per_unit = len(seen) / have
        role.typical_calls = per_unit * c.units
        prices = resolve_prices(c.model)
        if not seen:
            role.typical_usd = 0.0
        elif prices is None:
            role.typical_usd = None
        else:
            u = [r.get("usage") or {} for r in seen]
            cost = sum(prices.input * x.get("input_uncached", 0) + prices.cached_input * x.get("input_cached", 0)
                       + prices.output * x.get("output", 0) for x in u) / 1e6
            role.typical_usd = cost / len(seen) * role.typical_calls
    out.assumptions.append("typical: calls per episode / sleep phase and tokens per call as in "
                           f"{len(out.typical_from)} earlier run(s), priced with today's table")


def _role_of(row: dict[str, Any]) -> str:
    purpose = str(row.get("purpose"))
    call_id = str(row.get("call_id", ""))
    if purpose == "actor":
        return "actor (eval)" if call_id.startswith("eval") else "actor"
    if purpose == "inducer" and "/action/" in call_id:
        return "action agent"
    return purpose


def format_estimate(e: Estimate) -> str:
    """The table and its notes, for the terminal."""
    lines = [f"estimate for {e.config}" if e.config else "estimate",
             f"{'role':<14} {'model':<24} {'calls':>17} {'input tok (max)':>16} {'output tok (max)':>17} "
             f"{'USD (max)':>12} {'USD (typical)':>14}"]
    for r in e.roles:
        usd = "no price" if r.usd_max is None else f"${r.usd_max:,.2f}"
        typical = "-" if r.typical_calls is None else (
            "no price" if r.typical_usd is None else f"${r.typical_usd:,.2f}")
        lines.append(f"{r.role:<14} {r.model[:24]:<24} {f'{r.calls_min:,}-{r.calls_max:,}':>17} "
                     f"{r.input_tokens_max:>16,} {r.output_tokens_max:>17,} {usd:>12} {typical:>14}")
    total = "unknown (a model has no price)" if e.usd_max is None else f"${e.usd_max:,.2f}"
    lines.append(f"worst case: {total}")
    if e.typical_from:
        typical = "unknown (a model has no price)" if e.typical_usd is None else f"${e.typical_usd:,.2f}"
        lines.append(f"typical (from {', '.join(e.typical_from)}): {typical}")
    else:
        lines.append("typical: not known without earlier runs; point at a pilot run with --from RUN_DIR")
    lines.append(f"wall time (model calls only, {e.latency_s:g} s a call): "
                 f"{_duration(e.wall_s_min)} to {_duration(e.wall_s_max)}")
    for name in e.unknown_prices:
        lines.append(f"no price for model {name!r}: its cost is unknown. Set one in the config "
                     f"(model.prices: {{input: ..., cached_input: ..., output: ...}}, USD per 1M tokens) "
                     "or add it to speedrunner/data/prices.yaml")
    lines.append("assumptions:")
    lines += [f"  - {a}" for a in e.assumptions]
    lines.append("a spending cap makes the worst case irrelevant to your bill: run.max_cost_usd (docs/spending.md)")
    return "\n".join(lines)


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
    parser.add_argument("--from", dest="pilots", action="append", default=[], metavar="RUN_DIR",
                        help="an earlier run of the same experiment (e.g. a pilot) for the typical case (repeatable)")
    parser.add_argument("--latency", type=float, default=5.0, metavar="S",
                        help="seconds per model call for the wall-time range (default 5)")
    parser.add_argument("--concurrency", type=int, default=None, metavar="N",
                        help="calls in flight at once for the wall-time range (default: run.parallel_episodes "
                             "and model.max_concurrency)")
    parser.add_argument("--context-tokens", type=int, default=None, metavar="N",
                        help="the model's context window: no call's input exceeds it (tightens the worst case)")
    parser.add_argument("--json", action="store_true", help="print the estimate as JSON")


def print_estimate(config: object, source: str, args: argparse.Namespace) -> object:
    """Estimate ``config`` with the flags of ``add_estimate_flags`` and print it (table or JSON)."""
    e = estimate(config, source=source, latency_s=args.latency,  # type: ignore[arg-type]
                 context_tokens=args.context_tokens, pilots=[Path(p) for p in args.pilots],
                 concurrency=args.concurrency)
    print(estimate_json(e) if args.json else format_estimate(e))
    return e
