"""The worst case and the wall time of a run, from its config alone (no key, no network)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from speedrunner.core.config.schema import ModelConfig, Prices, RunConfig
from speedrunner.core.estimate.model import Calls, ContextUse, Estimate, MethodBounds, RoleEstimate
from speedrunner.core.estimate.pilot import typical_case
from speedrunner.core.llm.context_windows import context_bound
from speedrunner.core.llm.prices import resolve_prices
from speedrunner.core.registry import load_entry_point
from speedrunner.core.specs import BENCHMARKS, METHODS

__all__ = ["estimate", "knowledge_bound"]

# Assumed sizes in bytes (= tokens at most) when the benchmark's spec declares none
# (``BenchmarkSpec.prompt_bytes`` / ``observation_bytes``); printed with every table.
DEFAULT_FIRST_PROMPT, DEFAULT_OBSERVATION = 16_000, 8_000
CODEBOOK_BYTES_ASSUMED = 60_000
"""Knowledge shown when nothing caps it (a codebook without ``max_codebook_chars``, a method
that declares no bounds): the library may grow past it."""


def estimate(
    config: RunConfig,
    *,
    source: str = "",
    latency_s: float = 5.0,
    context_tokens: int | None = None,
    pilots: Sequence[Path] = (),
    concurrency: int | None = None,
) -> Estimate:
    """The forecast for ``config``; ``context_tokens`` overrides every model's context window;
    ``pilots`` are earlier run directories for the typical case; ``concurrency`` the calls in
    flight at once (default: what the config allows)."""
    run, bench = config.run, config.benchmark
    out = Estimate(config=source, roles=[], latency_s=latency_s)
    name = bench.name
    spec = BENCHMARKS.get(name)
    first = spec.prompt_bytes or DEFAULT_FIRST_PROMPT
    obs = spec.observation_bytes or DEFAULT_OBSERVATION
    declared = (
        ""
        if spec.prompt_bytes and spec.observation_bytes
        else (
            "; the benchmark declares no sizes (BenchmarkSpec.prompt_bytes, observation_bytes), "
            "so generous ones are assumed"
        )
    )
    out.assumptions.append(
        f"first actor prompt <= {first:,} bytes and one observation <= {obs:,} bytes on {name} "
        f"(not fixed by the config{declared}), plus the knowledge shown"
    )
    bounds = _method_bounds(config, run.rollouts // run.sleep_every)
    knowledge = bounds.knowledge_bytes
    eval_episodes = run.evaluations * run.eval_episodes
    actor_max = _actor_calls_per_episode(config, out.assumptions)
    actor_tokens = config.model.sampling.max_tokens
    calls: list[Calls] = []
    if bounds.actor_plays_training:
        calls.append(
            Calls(
                "actor",
                config.model,
                1,
                actor_max,
                run.rollouts,
                "training episode",
                first + knowledge,
                actor_tokens + obs,
            )
        )
    if eval_episodes:
        calls.append(
            Calls(
                "actor (eval)",
                config.model,
                1,
                actor_max,
                eval_episodes,
                "eval episode",
                first + knowledge,
                actor_tokens + obs,
            )
        )
    calls += bounds.sleep
    out.assumptions.extend(bounds.notes)
    if bounds.episodes_end_early:
        out.assumptions.append(
            "an episode that ends early (success, or the env says done) makes fewer "
            "calls: the minimum counts one actor call per episode"
        )
    calls = [_bounded(c, context_tokens, out) for c in calls]
    for c in calls:
        prices = resolve_prices(c.model)
        if (
            prices is None
            and c.model.provider != "scripted"
            and c.model.name not in out.unknown_prices
        ):
            out.unknown_prices.append(c.model.name)
        inp, outp = _tokens(c)
        out.roles.append(
            RoleEstimate(
                role=c.role,
                model=c.model.name,
                calls_min=c.per_unit_min * c.units,
                calls_max=c.per_unit_max * c.units,
                input_tokens_max=inp,
                output_tokens_max=outp,
                usd_max=_usd(prices, inp, outp, c.model),
                per=c.unit,
            )
        )
    _wall_time(out, config, calls, latency_s, concurrency)
    if pilots:
        typical_case(out, config, calls, pilots)
    return out


def _bounded(c: Calls, override: int | None, out: Estimate) -> Calls:
    """``c`` with its model's context window, noted once per model (a scripted model pays
    nothing)."""
    if c.model.provider == "scripted":
        return c
    bound = context_bound(c.model, override)
    if all(u.model != c.model.name for u in out.context_windows):
        out.context_windows.append(ContextUse.of(c.model.name, bound))
    return Calls(
        c.role,
        c.model,
        c.per_unit_min,
        c.per_unit_max,
        c.units,
        c.unit,
        c.first_input,
        c.growth,
        bound,
    )


def _method_bounds(config: RunConfig, batches: int) -> MethodBounds:
    """The method's declared bounds (``MethodSpec.cost_bounds``), else what its config caps."""
    spec = METHODS.get(config.method.name)
    if spec.cost_bounds is not None:
        return load_entry_point(spec.cost_bounds)(config, batches)
    notes: list[str] = []
    knowledge = knowledge_bound(config, notes)
    notes.append(
        f"method {config.method.name!r} declares no cost bounds (MethodSpec.cost_bounds): its "
        "sleep-phase calls are not estimated"
    )
    return MethodBounds(knowledge, notes=notes, episodes_end_early=spec.uses_skills)


def knowledge_bound(config: RunConfig, notes: list[str]) -> int:
    """The codebook's cap (4 UTF-8 bytes a character at most), else an assumed size, noted."""
    cap = vars(config.method).get("max_codebook_chars")
    if cap is not None:
        return int(cap) * 4
    if "max_codebook_chars" in type(config.method).model_fields:
        notes.append(
            f"the codebook shown stays under {CODEBOOK_BYTES_ASSUMED:,} bytes "
            "(method.max_codebook_chars is unset, so nothing caps it: a larger library costs more "
            "per call)"
        )
    else:
        notes.append(
            f"the knowledge shown stays under {CODEBOOK_BYTES_ASSUMED:,} bytes (an assumption: "
            "nothing in the config caps it)"
        )
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
        f"({config.run.episode_wall_clock_s:.0f} s) ends it: set benchmark.max_llm_calls for a "
        "hard bound, and rely on run.max_cost_usd for the money"
    )
    return actions


def _tokens(c: Calls) -> tuple[int, int]:
    """Worst-case input and output tokens of all of ``c``'s calls: each call's input is the
    unit's history so far, but never more than the context window (a longer request is refused)."""
    context = None if c.context is None else c.context.tokens
    per_unit = 0
    for k in range(c.per_unit_max):
        one = c.first_input + k * c.growth
        per_unit += one if context is None else min(one, context)
    return per_unit * c.units, c.per_unit_max * c.model.sampling.max_tokens * c.units


def _usd(prices: Prices | None, inp: int, outp: int, model: ModelConfig) -> float | None:
    if model.provider == "scripted":
        return 0.0
    if prices is None:
        return None
    return (inp * max(prices.input, prices.cached_input) + outp * prices.output) / 1e6


def _wall_time(
    out: Estimate, config: RunConfig, calls: list[Calls], latency: float, concurrency: int | None
) -> None:
    """Model time only (env steps and skill code add to it): a unit's calls are sequential; units
    of one batch or evaluation run side by side up to parallel_episodes and max_concurrency."""
    run = config.run
    lanes = min(
        run.workers(max(run.sleep_every, run.eval_episodes or 1)), config.model.max_concurrency
    )
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
    out.assumptions.append(
        f"wall time counts model calls only, {latency:g} s each, {lanes} episode(s) side by side "
        "(run.parallel_episodes, model.max_concurrency, --concurrency)"
    )
