"""One wake episode, in the manner of smolagents' ``_run_stream``, readable top to bottom:
check budget, call the model, parse, execute, record the step, repeat.

The env reports only the task's own end; this function decides and records why the
episode stopped (success, env end, LLM-call budget, action budget, wall clock).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from speedrunner.core.benchmark import Budget, EpisodeSpec
from speedrunner.core.env import TextEnv
from speedrunner.core.interrupt import STOP, RunInterrupted
from speedrunner.core.llm.types import Model, Usage
from speedrunner.core.method import Knowledge
from speedrunner.core.runtime.actor import (
    ActorStep,
    first_user_message,
    parse_answer,
    render_actions,
    to_messages,
)
from speedrunner.core.runtime.trajectory import StopReason, Trajectory
from speedrunner.errors import ContextLengthError


@dataclass(frozen=True)
class EpisodeContext:
    """Everything an episode needs besides the env: who acts, under which limits."""

    model: Model
    knowledge: Knowledge
    budget: Budget
    eval_point: int | None = None
    stop: threading.Event | None = None
    """Set when the run stops (another episode failed); checked before every model call,
    like the process-wide ``interrupt.STOP`` that Ctrl-C and SIGTERM set."""


def call_prefix(spec: EpisodeSpec, eval_point: int | None) -> str:
    """Stable call-id prefix: the cache replays by it, so it must not depend on timing."""
    if spec.split == "eval":
        return f"eval/at{eval_point:04d}/{spec.index:04d}"
    return f"train/{spec.index:04d}"


def run_episode(env: TextEnv, spec: EpisodeSpec, ctx: EpisodeContext) -> Trajectory:
    started = time.monotonic()
    observation = env.reset(spec.task, spec.seed)
    free_text = bool(getattr(env, "accepts_free_text", False))
    actions = list(env.actions)
    # Optional env hints: what the prompt lists (ScienceWorld: command templates rather than
    # thousands of concrete commands) and what each action does (BabyAI: "pick up" = in front).
    shown = render_actions(list(getattr(env, "prompt_actions", None) or actions),
                           getattr(env, "action_descriptions", None))
    first_user = first_user_message(env.instruction, shown, ctx.knowledge.prompt_section(), observation.text)
    traj = Trajectory(
        split=spec.split, index=spec.index, task=spec.task, seed=spec.seed,
        knowledge_version=ctx.knowledge.version, instruction=env.instruction, eval_point=ctx.eval_point,
    )
    prefix = call_prefix(spec, ctx.eval_point)
    current = observation.text
    stop: StopReason | None = None
    while stop is None:
        stop = _budget_stop(traj, ctx.budget, started)
        if stop is not None:
            break
        if STOP.is_set() or (ctx.stop is not None and ctx.stop.is_set()):
            raise RunInterrupted(f"{prefix} stopped before call {traj.llm_calls}")
        messages = to_messages(first_user, traj.steps, current if traj.steps else None, actions)
        try:
            completion = ctx.model.complete(messages, purpose="actor", call_id=f"{prefix}/actor/{traj.llm_calls:04d}")
        except ContextLengthError as e:
            # The history no longer fits the model: the episode ends, the run goes on.
            traj.context_error = str(e)
            stop = "context_length"
            break
        traj.llm_calls += 1
        traj.usage = traj.usage + completion.usage
        traj.cost_usd = None if traj.cost_usd is None or completion.cost_usd is None else traj.cost_usd + completion.cost_usd
        traj.scripted = traj.scripted or completion.scripted
        parsed = parse_answer(completion.text, list(env.actions) if free_text else actions, free_text=free_text)
        step = ActorStep(
            index=len(traj.steps), call_id=f"{prefix}/actor/{traj.llm_calls - 1:04d}",
            observation=current, raw_text=completion.text, reasoning=completion.reasoning,
            thought=parsed.thought, parsed_action=parsed.action, raw_action=parsed.raw_action,
            error=parsed.error, usage=completion.usage, cost_usd=completion.cost_usd,
            latency_s=completion.latency_s, cached=completion.cached, finish_reason=completion.finish_reason,
        )
        if step.error is not None and completion.finish_reason == "length":
            step.error += " (the answer was cut off at max_tokens)"
        traj.steps.append(step)
        if parsed.action is None:
            continue
        result = env.step(parsed.action)
        step.executed.append(parsed.action)
        step.reward = result.reward
        traj.final_info = result.info
        traj.env_actions += 1
        current = result.observation.text
        if env.success:
            stop = "success"
        elif result.done:
            stop = "env_done"
    traj.final_observation = current
    traj.stop_reason = stop
    traj.success = bool(env.success)
    traj.progress = float(env.progress())
    traj.wall_time_s = time.monotonic() - started
    return traj


def _budget_stop(traj: Trajectory, budget: Budget, started: float) -> StopReason | None:
    if budget.max_llm_calls is not None and traj.llm_calls >= budget.max_llm_calls:
        return "max_llm_calls"
    if budget.max_env_actions is not None and traj.env_actions >= budget.max_env_actions:
        return "max_env_actions"
    if time.monotonic() - started >= budget.wall_clock_s:
        return "wall_clock"
    return None


def total_usage(trajectories: list[Trajectory]) -> Usage:
    total = Usage()
    for t in trajectories:
        total = total + t.usage
    return total
