"""One wake episode, in the manner of smolagents' ``_run_stream``, readable top to bottom:
check budget, call the model, parse, execute, record the step, repeat.

The env reports only the task's own end; this function decides and records why the
episode stopped (success, env end, LLM-call budget, action budget, wall clock).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from speedrunner.core.answers import cut_note, truncated
from speedrunner.core.benchmark import Budget, EpisodeSpec
from speedrunner.core.env import TextEnv
from speedrunner.core.interrupt import STOP, RunInterrupted
from speedrunner.core.llm.types import Model
from speedrunner.core.method import Knowledge
from speedrunner.core.runtime.actor import (
    ACTOR_STOP,
    ActorHistory,
    first_user_message,
    parse_answer,
    render_actions,
)
from speedrunner.core.runtime.caps import episode_actions_left, resolve_call_caps, skill_cap_hit
from speedrunner.core.runtime.skill_call import SkillCall, SkillRunner, Skills, outcome_note
from speedrunner.core.trajectory import ActorStep, StopReason, Trajectory
from speedrunner.errors import ContextLengthError, InvalidActionError


@dataclass
class EnvState:
    """What the env showed last, shared by the actor's turn and the skill calls that act in it."""

    text: str
    structured: dict[str, Any]
    done: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The observation a skill (and its caller) gets after each action."""
        return {"text": self.text, "structured": self.structured, "done": self.done}


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
    open_skills: Callable[[Skills], SkillRunner] | None = None
    """Starts the episode's sandbox for skill calls (needed when the knowledge has skills)."""
    max_skill_actions: int | None = None
    """Cap on the primitive actions of one skill call; ``None``: the episode's remaining budget."""
    skill_timeout_s: float | None = None
    """Wall-clock limit of one skill call; ``None``: derived from its action cap
    (``core/runtime/caps.py``)."""


def call_prefix(spec: EpisodeSpec, eval_point: int | None) -> str:
    """Stable call-id prefix: the cache replays by it, so it must not depend on timing."""
    if spec.split == "eval":
        return f"eval/at{eval_point:04d}/{spec.index:04d}"
    return f"train/{spec.index:04d}"


def run_episode(env: TextEnv, spec: EpisodeSpec, ctx: EpisodeContext) -> Trajectory:
    started = time.monotonic()
    observation = env.reset(spec.task, spec.seed)
    free_text = env.accepts_free_text  # declared per env class, verified by check_text_env
    actions = list(env.actions)
    # Optional env hints: what the prompt lists (ScienceWorld: command templates rather than
    # thousands of concrete commands) and what each action does (BabyAI: "pick up" = in front).
    descriptions = env.action_descriptions
    shown = render_actions(list(env.prompt_actions or actions), descriptions)
    first_user = first_user_message(
        env.instruction, shown, ctx.knowledge.prompt_section(), observation.text
    )
    traj = Trajectory(
        split=spec.split,
        index=spec.index,
        task=spec.task,
        seed=spec.seed,
        knowledge_version=ctx.knowledge.version,
        instruction=env.instruction,
        eval_point=ctx.eval_point,
    )
    prefix = call_prefix(spec, ctx.eval_point)
    history = ActorHistory(
        first_user, ctx.knowledge.skills.signatures if ctx.knowledge.skills else None
    )
    current = observation.text
    state = EnvState(observation.text, observation.structured)
    skills = ctx.knowledge.skills
    runner: SkillRunner | None = None
    stop: StopReason | None = None
    try:
        if skills is not None and ctx.open_skills is not None:
            # Opened before the first model call, so the sandbox boots while the model answers
            # rather than after it, on the episode's path (at ten or thirty episodes at once on two
            # CPUs that was most of each episode's overhead); unused if no skill is called.
            runner = ctx.open_skills(skills)
        while stop is None:
            stop = _budget_stop(traj, ctx.budget, started)
            if stop is not None:
                break
            if STOP.is_set() or (ctx.stop is not None and ctx.stop.is_set()):
                raise RunInterrupted(f"{prefix} stopped before call {traj.llm_calls}")
            # What the env accepts *now* (ScienceWorld's valid actions change as the actor moves):
            # the answer is read against it, and an invalid answer's feedback lists it.
            actions = list(env.actions)
            messages = history.sync(traj.steps, current if traj.steps else None, actions)
            try:
                completion = ctx.model.complete(
                    messages,
                    purpose="actor",
                    call_id=f"{prefix}/actor/{traj.llm_calls:04d}",
                    stop=ACTOR_STOP,
                )
            except ContextLengthError as e:
                # The history no longer fits the model: the episode ends, the run goes on.
                traj.context_error = str(e)
                stop = "context_length"
                break
            traj.llm_calls += 1
            traj.usage = traj.usage + completion.usage
            traj.cost_usd = (
                None
                if traj.cost_usd is None or completion.cost_usd is None
                else traj.cost_usd + completion.cost_usd
            )
            traj.scripted = traj.scripted or completion.scripted
            parsed = parse_answer(
                completion.text,
                actions,
                free_text=free_text,
                skills=skills.signatures if skills else None,
                finish_reason=completion.finish_reason,
                descriptions=descriptions,
            )
            step = ActorStep(
                index=len(traj.steps),
                call_id=f"{prefix}/actor/{traj.llm_calls - 1:04d}",
                observation=current,
                raw_text=completion.text,
                reasoning=completion.reasoning,
                thought=parsed.thought,
                parsed_action=parsed.action,
                raw_action=parsed.raw_action,
                error=parsed.error,
                usage=completion.usage,
                cost_usd=completion.cost_usd,
                latency_s=completion.latency_s,
                cached=completion.cached,
                finish_reason=completion.finish_reason,
                answer_format=parsed.format,
            )
            if step.error is not None and truncated(completion.finish_reason):
                step.error += f" ({cut_note(completion.sampling.get('max_tokens'))})"
            traj.steps.append(step)
            step.effect = "refused"
            if parsed.action is None:
                continue
            act = _actor(env, step, traj, state)
            if parsed.skill_call is None:
                act(parsed.action)
                step.effect = "acted" if step.executed else "refused"
                current = state.text
            else:
                step.effect = "skill_call"
                if runner is None:
                    runner = _open_runner(ctx, skills)
                traj.sandbox_tier = runner.tier
                current = _call_skill(
                    runner,
                    parsed.skill_call,
                    act,
                    step,
                    traj,
                    state,
                    ctx,
                    episode_actions_left(env, ctx.budget.max_env_actions, traj.env_actions),
                )
            if env.success:
                stop = "success"
            elif state.done:
                stop = "env_done"
    finally:
        if runner is not None:
            runner.close()
    traj.final_observation = current
    traj.stop_reason = stop
    traj.success = bool(env.success)
    traj.progress = float(env.progress())
    traj.wall_time_s = time.monotonic() - started
    return traj


def _actor(
    env: TextEnv, step: ActorStep, traj: Trajectory, state: EnvState
) -> Callable[[str], dict[str, Any]]:
    """Take one primitive action for this turn: the one budget and record every action goes
    through."""

    def act(action: str) -> dict[str, Any]:
        if state.done:
            return {"error": f"the episode is over; {action!r} was not taken"}
        try:
            result = env.step(action)
        except InvalidActionError as e:  # a skill asked for something the env refuses
            return {"error": str(e)}
        step.executed.append(action)
        step.reward += result.reward
        traj.final_info = result.info
        traj.env_actions += 1
        state.text, state.structured, state.done = (
            result.observation.text,
            result.observation.structured,
            result.done,
        )
        return state.as_dict()

    return act


def _open_runner(ctx: EpisodeContext, skills: Skills | None) -> SkillRunner:
    if skills is None or ctx.open_skills is None:
        # our bug, not the model's
        raise RuntimeError("a skill was called but the run has no skill sandbox")
    return ctx.open_skills(skills)


def _call_skill(
    runner: SkillRunner,
    call: SkillCall,
    act: Callable[[str], dict[str, Any]],
    step: ActorStep,
    traj: Trajectory,
    state: EnvState,
    ctx: EpisodeContext,
    actions_left: int | None,
) -> str:
    """Run one skill call in the sandbox under its resolved caps; return what the actor sees
    next."""
    caps = resolve_call_caps(ctx.max_skill_actions, ctx.skill_timeout_s, actions_left)
    outcome = runner.call(
        call,
        step=act,
        observation=state.as_dict(),
        max_actions=caps.max_actions,
        timeout_s=caps.timeout_s,
    )
    # a skill's own error stays in the tree and the note, not in step.error
    step.skill_call = outcome.tree
    hit = skill_cap_hit(outcome.stopped_by, caps)
    if hit is not None:
        traj.cap_hits[hit] = traj.cap_hits.get(hit, 0) + 1
    traj.sandbox_violations += "sandbox_violation" in outcome.tree
    return (
        f"{state.text}\n"
        f"{outcome_note(call, outcome, len(step.executed), per_call_cap=caps.per_call_cap)}"
    )


def _budget_stop(traj: Trajectory, budget: Budget, started: float) -> StopReason | None:
    if budget.max_llm_calls is not None and traj.llm_calls >= budget.max_llm_calls:
        return "max_llm_calls"
    if budget.max_env_actions is not None and traj.env_actions >= budget.max_env_actions:
        return "max_env_actions"
    if time.monotonic() - started >= budget.wall_clock_s:
        return "wall_clock"
    return None
