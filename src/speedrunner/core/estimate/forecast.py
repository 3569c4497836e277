"""The worst case and the wall time of a run, from its config alone (no key, no network)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from speedrunner.core.config.schema import ModelConfig, Prices, RunConfig
from speedrunner.core.estimate.model import Calls, ContextUse, Estimate, RoleEstimate
from speedrunner.core.estimate.pilot import typical_case
from speedrunner.core.llm.context_windows import context_bound
from speedrunner.core.llm.prices import resolve_prices

__all__ = ["estimate"]

# Assumed sizes in bytes (= tokens at most) that the config does not fix. Measured on the
# shipped benchmarks' prompts and observations with generous headroom; printed with every table.
FIRST_PROMPT_BYTES = {"babyai": 6_000, "crafter": 10_000, "scienceworld": 16_000}
OBSERVATION_BYTES = {"babyai": 1_500, "crafter": 3_000, "scienceworld": 8_000}
DEFAULT_FIRST_PROMPT, DEFAULT_OBSERVATION = 16_000, 8_000
CODEBOOK_BYTES_ASSUMED = 60_000
"""A codebook's size when ``max_codebook_chars`` is unset (no cap: the library may grow past it)."""
PROMPT_TEMPLATE_BYTES = 8_000
"""Instructions of a sleep-phase prompt around what it shows (trajectories, guide, codebook)."""


def estimate(config: RunConfig, *, source: str = "", latency_s: float = 5.0,
             context_tokens: int | None = None, pilots: Sequence[Path] = (),
             concurrency: int | None = None) -> Estimate:
    """The forecast for ``config``; ``context_tokens`` overrides every model's context window;
    ``pilots`` are earlier run directories for the typical case; ``concurrency`` the calls in
    flight at once (default: what the config allows)."""
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
    calls: list[Calls] = []
    if method.name != "voyager":
        calls.append(Calls("actor", config.model, 1, actor_max, run.rollouts, "training episode",
                           first + knowledge, actor_tokens + obs))
    if eval_episodes:
        calls.append(Calls("actor (eval)", config.model, 1, actor_max, eval_episodes, "eval episode",
                           first + knowledge, actor_tokens + obs))
    calls += _sleep_calls(config, batches, knowledge, out.assumptions)
    if method.name in ("speedrunner", "speedrunner_no_cl", "asi", "voyager"):
        out.assumptions.append("an episode that ends early (success, or the env says done) makes fewer "
                               "calls: the minimum counts one actor call per episode")
    calls = [_bounded(c, context_tokens, out) for c in calls]
    for c in calls:
        prices = resolve_prices(c.model)
        if prices is None and c.model.provider != "scripted" and c.model.name not in out.unknown_prices:
            out.unknown_prices.append(c.model.name)
        inp, outp = _tokens(c)
        out.roles.append(RoleEstimate(
            role=c.role, model=c.model.name, calls_min=c.per_unit_min * c.units,
            calls_max=c.per_unit_max * c.units, input_tokens_max=inp, output_tokens_max=outp,
            usd_max=_usd(prices, inp, outp, c.model), per=c.unit))
    _wall_time(out, config, calls, latency_s, concurrency)
    if pilots:
        typical_case(out, config, calls, pilots)
    return out


def _bounded(c: Calls, override: int | None, out: Estimate) -> Calls:
    """``c`` with its model's context window, noted once per model (a scripted model pays nothing)."""
    if c.model.provider == "scripted":
        return c
    bound = context_bound(c.model, override)
    if all(u.model != c.model.name for u in out.context_windows):
        out.context_windows.append(ContextUse.of(c.model.name, bound))
    return Calls(c.role, c.model, c.per_unit_min, c.per_unit_max, c.units, c.unit, c.first_input,
                 c.growth, bound)


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


def _sleep_calls(config: RunConfig, batches: int, knowledge: int, notes: list[str]) -> list[Calls]:
    method, model = config.method, config.inducer_model
    out_tokens = model.sampling.max_tokens
    name = method.name
    if name == "opo":
        shown = int(method.max_batch_chars) * 4 + knowledge + PROMPT_TEMPLATE_BYTES  # type: ignore[attr-defined]
        return [Calls("guide", model, 1, 1, batches, "sleep phase", shown, 0)]
    if name in ("speedrunner", "speedrunner_no_cl"):
        turns = int(method.max_inducer_turns)  # type: ignore[attr-defined]
        tool = int(method.max_tool_output_chars) * 4  # type: ignore[attr-defined]
        shown = int(method.max_trajectory_chars) * 4  # type: ignore[attr-defined]
        return [Calls("inducer", model, 1, turns, batches, "sleep phase",
                      knowledge + PROMPT_TEMPLATE_BYTES + shown, out_tokens + max(tool, shown))]
    if name == "asi":
        shown = int(method.max_trajectory_chars) * 4 + knowledge + PROMPT_TEMPLATE_BYTES  # type: ignore[attr-defined]
        return [Calls("inducer", model, 0, config.run.sleep_every, batches, "sleep phase", shown, 0)]
    if name == "voyager":
        iters = int(method.max_iterations_per_world)  # type: ignore[attr-defined]
        observation = int(method.max_observation_chars) * 4  # type: ignore[attr-defined]
        shown = knowledge + PROMPT_TEMPLATE_BYTES + 2 * observation
        notes.append("Voyager: per training world at most max_iterations_per_world iterations, each a "
                     "curriculum proposal (max_curriculum_asks), one action-agent answer, a critic "
                     "(max_critic_asks) and one skill description; embeddings are not counted")
        units = config.run.rollouts
        return [
            Calls("curriculum", model, 0, iters * int(method.max_curriculum_asks), units,  # type: ignore[attr-defined]
                  "training world", shown, 0),
            Calls("action agent", model, 1, iters, units, "training world", shown, 0),
            Calls("critic", model, 0, iters * int(method.max_critic_asks), units,  # type: ignore[attr-defined]
                  "training world", shown, 0),
            Calls("description", model, 0, iters, units, "training world", knowledge + PROMPT_TEMPLATE_BYTES, 0),
        ]
    if name != "react":
        notes.append(f"method {name!r}: its sleep-phase calls are not estimated")
    return []


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


def _wall_time(out: Estimate, config: RunConfig, calls: list[Calls], latency: float,
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
