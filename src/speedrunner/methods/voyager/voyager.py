"""Voyager (Wang et al., 2023) on Crafter: curriculum, action agent, critic, skill manager.

**One training rollout of the run's schedule is one world** (an episode, seeded from the
run seed, the split and the rollout index, like every other method's rollout). As in
Voyager's Minecraft world, tasks follow each other in it: Voyager plays *iterations* in the
world until it ends — its env-action budget (Crafter: 2,000) or LLM-call budget is spent,
the game is over (the player died, or every achievement is unlocked), or
``max_iterations_per_world`` iterations were played (a cap hit: the world's trajectory
counts it) — and the next rollout is a new world.
One iteration:

1. the curriculum agent proposes a task, unless one is in progress (the first task of the
   run is fixed: "collect wood"; it sees the world as it is now, the completed and the
   failed tasks, and more of the state as more tasks are completed);
2. the action agent writes one skill for it (seeing the primitives, the skill API, the
   top-k retrieved skills' code, the previous attempt's code, error and critique);
3. the skill runs in the sandbox from where the world is now (the env stays here), with at
   most ``max_skill_actions`` actions and never more than the world has left, for at most
   ``skill_timeout_s`` (the action agent is told both); a skill stopped by either counts a
   cap hit in the world's trajectory, as the actor's skill calls do in an episode's;
4. the critic decides from the state change when it can, else asks the LLM;
5. a success joins the library with an LLM-written description (skill manager); a task
   failed ``max_task_attempts`` times joins the failed list. A task in progress when its
   world ends carries on in the next world.

The runner's batches, metrics rows (one per world), evaluation and checkpoints stay as for
every method: the batch's worlds replace the actor's episodes (``train_batch``), and each
sleep phase stores the batch's library as the next codebook generation with Voyager's state
(``voyager/state_<g>.json``). In evaluation the actor plays as usual, with the top-k skills
retrieved for the benchmark's instruction shown as callable actions. Each world's
trajectory lists its iterations (``method_info["iterations"]``: run-wide number, number in
the world, task, attempt, skill added); ``voyager/iterations/<world>/<k>.json`` holds each
iteration's full record.

Call ids (stable, so a resumed run replays them from the cache), for iteration ``k`` of
world ``w``: ``train/<w>/<k>/curriculum/<ask>``, ``train/<w>/<k>/action/0000``,
``train/<w>/<k>/critic/<ask>``, ``train/<w>/<k>/description/0000``. A batch killed midway
is re-run from its first world after ``restore``: every world resets from its seed, every
answer comes from the cache and every skill replays deterministically, so it reaches the
same library without paying twice. A run directory from before worlds continued (one fresh
world per iteration, ``voyager/iterations/<i>.json``) is refused on resume.
"""

from __future__ import annotations

import importlib
import inspect
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speedrunner.core.answers import (
    FormatTally,
    ReadOutcome,
    cut_note,
    distinct,
    json_fields,
    label_lines,
    label_regex,
    mostly_json,
    outside_json,
    strip_think,
    truncated,
    with_cut_note,
)
from speedrunner.core.atomic import atomic_write_json
from speedrunner.core.benchmark import EpisodeSpec
from speedrunner.core.codebook import (
    Author,
    Edit,
    EditRejected,
    apply_edits,
)
from speedrunner.core.codebook.api_view import caps_lines
from speedrunner.core.codebook.codebook import render_api
from speedrunner.core.codebook.parse import split_module
from speedrunner.core.env import TextEnv
from speedrunner.core.episode_files import save_trajectory
from speedrunner.core.interrupt import STOP, RunInterrupted
from speedrunner.core.llm.accounting import CallLog
from speedrunner.core.llm.client import ManagedModel
from speedrunner.core.llm.types import Completion, Message, Usage
from speedrunner.core.method import Knowledge, Method, MethodContext, SleepResult, TrainingContext
from speedrunner.core.prompts import load_prompts
from speedrunner.core.runtime.caps import resolve_call_caps, skill_cap_hit
from speedrunner.core.runtime.loop import CALLS_FILE
from speedrunner.core.runtime.skill_call import Skills
from speedrunner.core.trajectory import ActorStep, StopReason, Trajectory
from speedrunner.methods.voyager.attempt import (
    FENCE,
    NATIVE_NOTE,
    SUBMIT_SKILL,
    Attempt,
    read_skill_call,
    write_and_run,
)
from speedrunner.methods.voyager.config import VoyagerConfig
from speedrunner.methods.voyager.critic import (
    Verdict,
    clean_task,
    decide_from_state,
    read_critic,
    state_summary,
)
from speedrunner.methods.voyager.retrieval import BM25Ranker, EmbeddingRanker, Ranker, top_k
from speedrunner.methods.voyager.state import (
    STATE_DIR,
    SkillEntry,
    VoyagerState,
    load_state,
    refuse_world_per_iteration_runs,
    save_state,
    state_path,
)
from speedrunner.methods.wake_sleep.codebook_knowledge import (
    TITLE,
    codebook_rules,
    empty_codebook,
    load_generation,
    skill_support,
)

PROMPTS = load_prompts("speedrunner.methods.voyager", "voyager_prompts.yaml")
_TASK_LINE = label_regex(r"(?:next[ \t]+)?task")


_TASK_KEYS = ("task", "next_task")


@dataclass(frozen=True)
class TaskAnswer(ReadOutcome):
    """The curriculum's task ("" when none was read), why not, and what reading it needed."""

    task: str
    problem: str | None = None
    repairs: tuple[str, ...] = ()


def read_task(text: str) -> str:
    """The curriculum's task (:func:`read_task_answer` without the details)."""
    return read_task_answer(text).task


def read_task_answer(text: str, finish_reason: str | None = None) -> TaskAnswer:
    """The curriculum's ``Task:`` line (any markdown or case, ``<think>`` ignored), cleaned;
    none when there is none or two that differ (never chosen between: the curriculum is asked
    again, told what was read). JSON (``{"task": ...}``, or the text answer under ``answer``;
    bare or in a ```` ```json ```` fence) is read from its decoded strings. An answer cut at
    ``max_tokens`` right after its Task line may have cut the task itself: asked again."""
    body, had_think = strip_think(text)
    repairs = ("think block",) if had_think else ()
    fields = json_fields(body, _TASK_KEYS)
    if (
        fields
        and mostly_json(body, fields)
        and not label_lines(outside_json(body, fields), _TASK_LINE, "Task")
    ):
        readings = [
            read_task_answer(f.value) if f.wrapped else TaskAnswer(clean_task(str(f.value)))
            for f in fields
        ]
        tasks = distinct([r.task for r in readings if r.task])
        if len(tasks) > 1:
            return TaskAnswer(
                "",
                f"the answer has {len(tasks)} different tasks in JSON "
                f"({'; '.join(map(repr, tasks))}); propose exactly one",
                (*repairs, "JSON answer"),
            )
        if not tasks:
            return TaskAnswer(
                "",
                readings[0].problem or "the JSON answer holds no task",
                (*repairs, "JSON answer"),
            )
        inner = next(r for r in readings if r.task)
        return TaskAnswer(inner.task, None, (*repairs, "JSON answer", *inner.repairs))
    lines = [line for line in label_lines(body, _TASK_LINE, "Task") if clean_task(line.value)]
    tasks = distinct([clean_task(line.value) for line in lines])
    cut = truncated(finish_reason)
    if len(tasks) > 1:
        return TaskAnswer(
            "",
            f"the answer has {len(tasks)} different Task lines ({'; '.join(map(repr, tasks))}); "
            "propose exactly one",
            repairs,
        )
    if not tasks:
        return TaskAnswer(
            "",
            "the answer has no line 'Task: <the next task>'"
            + (" (it was cut off at max_tokens)" if cut else ""),
            repairs,
        )
    if cut and not body[lines[-1].end :].strip():
        return TaskAnswer(
            "",
            f"the answer was cut off at max_tokens right after its Task line, so the task "
            f"{tasks[0]!r} may be incomplete",
            repairs,
        )
    fixes = list(repairs)
    if not all(line.exact for line in lines):
        fixes.append("marked-up Task label")
    if len(lines) > 1:
        fixes.append("the same Task line repeated")
    if tasks[0] != lines[0].value.strip():
        fixes.append("task cleaned (case, punctuation, markup)")
    return TaskAnswer(tasks[0], None, tuple(fixes))


@dataclass(frozen=True)
class VoyagerWorld:
    """What Voyager needs to know about its benchmark (given by the benchmark's factory)."""

    achievements: tuple[str, ...]
    """Achievement names in curriculum order (``collect_wood``, ...): tasks phrase them."""
    first_task: str
    """The task of the very first iteration (Voyager: fixed)."""
    eval_query: str
    """What retrieval ranks skills against for evaluation (the benchmark's instruction)."""


@dataclass(frozen=True)
class _Now:
    """Where the world is: what the next skill starts from."""

    text: str
    structured: dict[str, Any]
    done: bool = False


@dataclass
class _WorldLog:
    """What one world's iterations add up to (its trajectory)."""

    steps: list[ActorStep] = field(default_factory=list)
    calls: list[Completion] = field(default_factory=list)
    iterations: list[dict[str, Any]] = field(default_factory=list)
    actions: int = 0
    info: dict[str, Any] = field(default_factory=dict)
    tier: str | None = None
    cap_hits: dict[str, int] = field(default_factory=dict)
    """Skills stopped by a per-call cap (``max_skill_actions``, ``skill_timeout``) -> count."""

    def add(
        self,
        step: ActorStep,
        calls: list[Completion],
        attempt: Attempt,
        summary: dict[str, Any],
        cap_hit: str | None,
    ) -> None:
        if cap_hit is not None:
            self.cap_hits[cap_hit] = self.cap_hits.get(cap_hit, 0) + 1
        self.steps.append(step)
        self.calls += calls
        self.iterations.append(summary)
        self.actions += len(attempt.executed)
        self.info = attempt.info or self.info
        self.tier = attempt.tier or self.tier


class VoyagerMethod(Method):
    name = "voyager"
    own_training = True  # a world per rollout replaces the actor's episodes (``train_batch``)

    def __init__(self, config: VoyagerConfig, ctx: MethodContext, world: VoyagerWorld) -> None:
        self.config = config
        self.model = ctx.inducer
        self.run_dir = Path(ctx.run_dir)
        self.support = skill_support(self.name, ctx)
        self.rules = codebook_rules(self.support)
        self.world = world
        self.ranker = self._ranker()
        self.title = ctx.knowledge_title or self.name
        self.base = empty_codebook(self.title)
        self.state = VoyagerState()
        self._reset_batch()

    def _ranker(self) -> Ranker:
        e = self.config.embedding
        if e is None:
            return BM25Ranker()
        # embedding requests are paid calls of the run: its cap and cache namespace apply to them
        managed = self.model if isinstance(self.model, ManagedModel) else None
        return EmbeddingRanker(
            model=e.name,
            base_url=e.base_url,
            api_key_env=e.api_key_env,
            timeout_s=e.timeout_s,
            price_per_million=None if e.prices is None else e.prices.input,
            store_dir=self.run_dir / STATE_DIR,
            calls_log=CallLog(self.run_dir / CALLS_FILE),
            namespace=managed.namespace if managed else self.run_dir.name,
            spend_cap=managed.spend_cap if managed else None,
        )

    def _reset_batch(self) -> None:
        """The batch starts from the stored generation and state (also after a kill)."""
        self.draft = self.base
        self.batch_edits: list[Edit] = []
        self.work = self.state.model_copy(deep=True)

    def knowledge(self) -> Knowledge:
        """The top-k skills retrieved for the benchmark's instruction, callable by the actor."""
        names = set(
            top_k(
                self.ranker, self.world.eval_query, self.state.active(), self.config.retrieval_top_k
            )
        )
        if not names:
            return Knowledge(self.base.generation)
        shown = [f for f in self.base.functions if f.name in names]
        signatures = {n: s for n, s in self.base.signatures().items() if n in names}
        skills = Skills(self.base.generation, self.base.source, signatures, self.support.api_module)
        return Knowledge(self.base.generation, TITLE, render_api(shown), skills=skills)

    def train_batch(self, specs: list[EpisodeSpec], ctx: TrainingContext) -> list[Trajectory]:
        """Voyager's worlds, one per rollout of the batch, in order (each needs the last)."""
        self._reset_batch()
        trajectories = []
        for spec in specs:
            if STOP.is_set() or ctx.stop.is_set():
                raise RunInterrupted(f"train/{spec.index:04d} stopped before its first call")
            with ctx.env() as env:
                trajectory = self._world(env, spec, ctx)
            save_trajectory(self.run_dir, trajectory)
            ctx.on_episode(trajectory)
            trajectories.append(trajectory)
        return trajectories

    def sleep(self, batch: list[Trajectory], *, batch_index: int) -> SleepResult:
        """Store the batch's library as the next generation, with Voyager's state. No LLM call:
        the iterations' calls are already in their own rollouts' costs."""
        author = Author(
            method=self.name, batch_index=batch_index, scripted=any(t.scripted for t in batch)
        )
        final = apply_edits(
            self.base.record_usage(batch), self.batch_edits, author, rules=self.rules
        )
        if isinstance(final, EditRejected):  # each addition was validated with every earlier one
            raise RuntimeError(
                f"Voyager's accepted skills no longer validate together:\n{final.message}"
            )
        self.base = final.commit(self.run_dir)
        save_state(self.run_dir, self.base.generation, self.work)
        self.state = self.work
        self._reset_batch()
        return SleepResult(self.knowledge())

    # ------------------------------------------------------------ one world
    def _world(self, env: TextEnv, spec: EpisodeSpec, ctx: TrainingContext) -> Trajectory:
        """Iterations in one world until it ends (see the module docstring)."""
        started = time.monotonic()
        observation = env.reset(spec.task, spec.seed)
        now = _Now(observation.text, observation.structured)
        budget = ctx.budget
        world = _WorldLog()
        stop: StopReason
        while True:
            if env.success:
                stop = "success"
            elif now.done:
                stop = "env_done"
            elif budget.max_env_actions is not None and world.actions >= budget.max_env_actions:
                stop = "max_env_actions"
            elif budget.max_llm_calls is not None and len(world.calls) >= budget.max_llm_calls:
                stop = "max_llm_calls"
            elif time.monotonic() - started > budget.wall_clock_s:
                stop = "wall_clock"
            elif len(world.steps) >= self.config.max_iterations_per_world:
                stop = "iteration_end"
            else:
                if STOP.is_set() or ctx.stop.is_set():
                    raise RunInterrupted(f"train/{spec.index:04d} stopped between two iterations")
                left = (
                    None
                    if budget.max_env_actions is None
                    else budget.max_env_actions - world.actions
                )
                now = self._iteration(env, spec, len(world.steps), now, left, world)
                continue
            break
        return self._trajectory(spec, env, now, world, stop, started)

    def _iteration(
        self,
        env: TextEnv,
        spec: EpisodeSpec,
        k: int,
        now: _Now,
        actions_left: int | None,
        world: _WorldLog,
    ) -> _Now:
        """Iteration ``k`` of this world, from where the world is now; returns where it is after."""
        prefix = f"train/{spec.index:04d}/{k:04d}"
        start = now.structured
        calls: list[Completion] = []
        work = self.work
        number = work.iterations
        work.iterations += 1
        record: dict[str, Any] = {
            "iteration": number,
            "world": spec.index,
            "in_world": k,
            "world_seed": spec.seed,
            "generation": self.base.generation,
            "actions_left": actions_left,
        }
        reading = FormatTally("action_agent")
        # ALGO LOGIC: the curriculum proposes a task; the skill library is retrieved for it
        if work.task is None:
            work.task, record["curriculum"] = self._propose(
                prefix, k, now, actions_left, calls, reading
            )
        task, attempt_no = work.task, work.attempts + 1
        retrieved = top_k(
            self.ranker,
            task,
            work.active(),
            self.config.retrieval_top_k,
            charge_to=f"train/{spec.index:04d}",
        )
        record.update(task=task, attempt=attempt_no, retrieved=retrieved)

        # ALGO LOGIC: the action agent writes a skill, which runs in the world
        native = self.model.native_tools  # model.tool_protocol: native
        messages = [
            Message("system", self._action_system() + (NATIVE_NOTE if native else "")),
            Message(
                "user", self._action_prompt(task, attempt_no, retrieved, now.text, actions_left)
            ),
        ]
        answer = self.model.complete(
            messages,
            purpose="inducer",
            call_id=f"{prefix}/action/0000",
            **({"tools": (SUBMIT_SKILL,)} if native else {}),
        )
        calls.append(answer)
        code = read_skill_call(answer.text, answer.tool_calls)
        caps = resolve_call_caps(
            self.config.max_skill_actions, self.config.skill_timeout_s, actions_left
        )
        if truncated(answer.finish_reason):
            # Never run a cut answer: its last function may be a helper, its code incomplete.
            attempt = Attempt(
                code=code.code or "",
                plan=code.plan,
                end=start,
                end_text=now.text,
                error=f"{cut_note(answer.sampling.get('max_tokens'))}; the code was not run "
                "(an incomplete skill never runs)",
            )
            form = "lost"
        else:
            attempt = write_and_run(
                code,
                env,
                now.text,
                start,
                base=self.base,
                draft=self.draft,
                earlier=self.batch_edits,
                rules=self.rules,
                support=self.support,
                max_actions=caps.max_actions,
                timeout_s=caps.timeout_s,
            )
            form = code.format
        reading.add(form, answer, dropped_calls=code.dropped_calls)
        cap_hit = None if attempt.stopped_by is None else skill_cap_hit(attempt.stopped_by, caps)
        record["cap_hit"] = cap_hit
        # ALGO LOGIC: the critic judges the attempt; a success adds the skill, failures retry
        # the task
        if attempt.error is not None:
            verdict = Verdict(False, f"The skill could not run: {attempt.error}", "execution_error")
        else:
            verdict = decide_from_state(
                task, start, attempt.end, self.world.achievements
            ) or self._llm_critic(prefix, task, attempt_no, start, attempt, calls, reading)
        record.update(
            code=attempt.code,
            main=attempt.main,
            error=attempt.error,
            verdict={
                "success": verdict.success,
                "decided_by": verdict.decided_by,
                "reasoning": verdict.reasoning,
                "critique": verdict.critique,
            },
        )
        if verdict.success and attempt.main is not None and attempt.codebook is not None:
            description = self._describe(prefix, attempt, calls)
            self.batch_edits += attempt.edits
            self.draft = attempt.codebook
            work.add_skill(
                attempt.main,
                SkillEntry(description=description, task=task, iteration=number, world=spec.index),
                attempt.retired_as if attempt.main in work.skills else None,
            )
            work.complete(task)
            record.update(
                skill_added=attempt.main, retired_as=attempt.retired_as, description=description
            )
        else:
            work.attempts, work.last_code = attempt_no, attempt.code
            work.last_error, work.last_critique = attempt.error, verdict.critique
            if attempt_no >= self.config.max_task_attempts:
                work.fail(task)
        work.last_end = {
            "inventory": attempt.end.get("inventory", {}),
            "achievements": attempt.end.get("achievements", []),
        }
        work.scripted = work.scripted or any(c.scripted for c in calls)
        record.update(
            completed=list(work.completed),
            failed=list(work.failed),
            env_actions=len(attempt.executed),
            scripted=any(c.scripted for c in calls),
            finish_reason=answer.finish_reason,
            tool_protocol="native" if native else "text",
            **reading.record(),
        )
        atomic_write_json(
            self.run_dir / STATE_DIR / "iterations" / f"{spec.index:04d}" / f"{k:04d}.json", record
        )
        world.add(
            self._step(k, prefix, now.text, answer, attempt, form),
            calls,
            attempt,
            {
                key: record.get(key)
                for key in (
                    "iteration",
                    "in_world",
                    "task",
                    "attempt",
                    "main",
                    "error",
                    "skill_added",
                    "cap_hit",
                )
            }
            | {"success": verdict.success, "decided_by": verdict.decided_by},
            cap_hit,
        )
        return _Now(attempt.end_text, attempt.end, now.done or attempt.done)

    # ------------------------------------------------------------ the agents
    def _propose(
        self,
        prefix: str,
        k: int,
        now: _Now,
        actions_left: int | None,
        calls: list[Completion],
        reading: FormatTally,
    ) -> tuple[str, dict[str, Any]]:
        work = self.work
        if not work.completed and not work.failed:
            return self.world.first_task, {"fixed": True}
        messages = [
            Message(
                "system",
                PROMPTS.render(
                    "curriculum_system",
                    achievements="\n".join(
                        f"{i}. {a.replace('_', ' ')}"
                        for i, a in enumerate(self.world.achievements, 1)
                    ),
                ),
            ),
            Message(
                "user",
                PROMPTS.render(
                    "curriculum",
                    state=self._curriculum_state(now.structured, k, actions_left),
                    completed=", ".join(work.completed) or "none",
                    failed=", ".join(work.failed) or "none",
                ),
            ),
        ]
        answers = []
        for ask in range(self.config.max_curriculum_asks):
            completion = self.model.complete(
                messages, purpose="curriculum", call_id=f"{prefix}/curriculum/{ask:04d}"
            )
            calls.append(completion)
            answers.append(completion.text)
            proposed = read_task_answer(completion.text, completion.finish_reason)
            reading.add(proposed.format, completion, role="curriculum")
            if proposed.task:
                return proposed.task, {"answers": answers, "fallback": False}
            problem = with_cut_note(proposed.problem or "no task was read", completion)
            messages += [
                Message("assistant", completion.text),
                Message("user", PROMPTS.render("curriculum_reask", problem=problem)),
            ]
        phrased = [a.replace("_", " ") for a in self.world.achievements]
        fresh = [t for t in phrased if t not in work.completed and t not in work.failed] or phrased
        return fresh[0], {"answers": answers, "fallback": True}

    def _curriculum_state(self, start: dict[str, Any], k: int, actions_left: int | None) -> str:
        """The world as it is now, warming up: each part appears once enough tasks are completed."""
        done, warm = len(self.work.completed), self.config.curriculum_warmup
        show = {part for part, after in warm.items() if done >= after}
        left = "" if actions_left is None else f"; {actions_left} env actions left in this world"
        where = "a new world" if k == 0 else f"the same world, after {k} task attempt(s) in it"
        lines = [f"Where my next skill starts: {where}{left}."]
        if "nearby" in show:
            seen = ", ".join(
                f"{o['name']} {o['distance']} steps {o['direction']}"
                for o in sorted(start.get("nearby", []), key=lambda o: o["distance"])
            )
            lines.append(f"- nearby: {seen or 'nothing'}")
        if "facing" in show:
            lines.append(f"- facing: {start.get('facing', {}).get('name', 'nothing')}")
        if "status" in show:
            lines.append(
                "- status: " + ", ".join(f"{k} {v}/9" for k, v in start.get("status", {}).items())
            )
        inventory = ", ".join(f"{k}: {v}" for k, v in sorted(start.get("inventory", {}).items()))
        lines.append(f"- inventory: {inventory or 'nothing'}")
        if "achievements" in show:
            lines.append(
                "- achievements unlocked in this world: "
                f"{', '.join(start.get('achievements', [])) or 'none'}"
            )
        return "\n".join(lines)

    def _action_system(self) -> str:
        api = importlib.import_module(self.support.api_module)
        lines = []
        for name in sorted(self.rules.api_names):
            obj = getattr(api, name, None)
            if inspect.isfunction(obj) and not name.startswith("local_"):
                doc = (inspect.getdoc(obj) or "").splitlines()
                lines.append(f"    - `{name}{inspect.signature(obj)}`: {doc[0] if doc else ''}")
        caps = caps_lines(
            self.rules, self.config, at_cap="the critic judges what it did", episode="world"
        )
        return PROMPTS.render(
            "action_system",
            primitives=", ".join(self.support.primitives),
            skill_api="\n".join(lines),
            api_module=self.support.api_module,
            caps="\n".join(caps),
        )

    def _action_prompt(
        self,
        task: str,
        attempt: int,
        retrieved: list[str],
        observation: str,
        actions_left: int | None,
    ) -> str:
        sources = {f.name: f.text.strip() for f in split_module(self.draft.source).functions}
        shown = "\n\n".join(f"```python\n{sources[n]}\n```" for n in retrieved if n in sources)
        work = self.work
        if work.last_code is None and work.last_error is None:
            previous = "This is the first attempt at this task."
        else:
            previous = (
                f"Code from the last attempt:\n```python\n{(work.last_code or '').strip()}\n```\n"
                f"Execution error: {work.last_error or 'none'}\n"
                f"Critique: {work.last_critique or 'none'}"
            )
        context = f"attempt {attempt} of {self.config.max_task_attempts}"
        if actions_left is not None:
            context += f"; {actions_left} env actions left in this world"
        return PROMPTS.render(
            "action",
            task=task,
            context=context,
            retrieved=shown or "(none yet)",
            previous=previous,
            observation=observation[: self.config.max_observation_chars],
        )

    def _llm_critic(
        self,
        prefix: str,
        task: str,
        attempt_no: int,
        start: dict[str, Any],
        attempt: Attempt,
        calls: list[Completion],
        reading: FormatTally,
    ) -> Verdict:
        messages = [
            Message("system", PROMPTS.render("critic_system")),
            Message(
                "user",
                PROMPTS.render(
                    "critic",
                    task=task,
                    context=f"attempt {attempt_no} of {self.config.max_task_attempts}",
                    before=state_summary(start),
                    after=state_summary(attempt.end),
                    returned=repr(attempt.returned)[:500],
                    observation=attempt.end_text[: self.config.max_observation_chars],
                ),
            ),
        ]
        for ask in range(self.config.max_critic_asks):
            completion = self.model.complete(
                messages, purpose="critic", call_id=f"{prefix}/critic/{ask:04d}"
            )
            calls.append(completion)
            judged = read_critic(completion.text)
            reading.add(judged.format, completion, role="critic")
            if judged.verdict is not None:
                return judged.verdict
            problem = with_cut_note(judged.problem or "no verdict", completion)
            messages += [
                Message("assistant", completion.text),
                Message("user", PROMPTS.render("critic_reask", problem=problem)),
            ]
        return Verdict(
            False,
            "The critic gave no usable judgement; try a more direct skill.",
            "llm_unparseable",
        )

    def _describe(self, prefix: str, attempt: Attempt, calls: list[Completion]) -> str:
        if attempt.main is None or attempt.codebook is None:
            raise RuntimeError("a skill was described before it was validated")  # our bug
        source = next(
            f.text
            for f in split_module(attempt.codebook.source).functions
            if f.name == attempt.main
        )
        completion = self.model.complete(
            [
                Message("system", PROMPTS.render("description_system")),
                Message("user", PROMPTS.render("description", code=source.strip())),
            ],
            purpose="description",
            call_id=f"{prefix}/description/0000",
        )
        calls.append(completion)
        body = strip_think(completion.text)[0]
        fields = json_fields(body, ("description",))
        if fields and mostly_json(body, fields) and isinstance(fields[0].value, str):
            body = fields[0].value  # written as JSON: the description is its string, not the JSON
        text = FENCE.sub("", body).strip()
        text = re.sub(
            rf"`?\b{re.escape(attempt.main)}\b`?", "this skill", text
        )  # no function name in it
        return (
            " ".join(text.split())[:1200] or f"A skill that completes the task: {self.work.task}."
        )

    # ------------------------------------------------------------ records
    @staticmethod
    def _step(
        k: int, call_id: str, first_text: str, answer: Completion, attempt: Attempt, form: str
    ) -> ActorStep:
        return ActorStep(
            index=k,
            call_id=f"{call_id}/action/0000",
            observation=first_text,
            raw_text=answer.text,
            reasoning=answer.reasoning,
            thought=attempt.plan,
            raw_action=attempt.code,
            parsed_action=f"{attempt.main}()" if attempt.tree is not None else None,
            executed=list(attempt.executed),
            error=attempt.error if attempt.tree is None else None,
            usage=answer.usage,
            cost_usd=answer.cost_usd,
            latency_s=answer.latency_s,
            cached=answer.cached,
            finish_reason=answer.finish_reason,
            skill_call=attempt.tree,
            answer_format=form,
        )

    def _trajectory(
        self,
        spec: EpisodeSpec,
        env: TextEnv,
        now: _Now,
        world: _WorldLog,
        stop: StopReason,
        started: float,
    ) -> Trajectory:
        usage, cost = Usage(), self.ranker.cost_for(f"train/{spec.index:04d}")  # embeddings, if any
        for c in world.calls:
            usage = usage + c.usage
            cost = None if cost is None or c.cost_usd is None else cost + c.cost_usd
        tasks = list(dict.fromkeys(i["task"] for i in world.iterations))
        cap_hits = dict(world.cap_hits)
        if stop == "iteration_end":  # the world had actions, calls and time left: the cap ended it
            cap_hits["max_iterations_per_world"] = 1
        return Trajectory(
            split=spec.split,
            index=spec.index,
            task=spec.task,
            seed=spec.seed,
            knowledge_version=self.base.generation,
            instruction=f"Voyager tasks in this world: {'; '.join(tasks) or 'none'}",
            steps=world.steps,
            final_observation=now.text,
            stop_reason=stop,
            success=bool(env.success),
            progress=float(env.progress()),
            llm_calls=len(world.calls),
            env_actions=world.actions,
            usage=usage,
            cost_usd=cost,
            wall_time_s=time.monotonic() - started,
            scripted=any(c.scripted for c in world.calls),
            final_info=world.info or {"achievements": list(now.structured.get("achievements", []))},
            sandbox_tier=world.tier,
            method_info={"iterations": world.iterations},
            cap_hits=cap_hits,
        )

    # ------------------------------------------------- TRY NOT TO MODIFY
    def restore(self, version: int) -> None:
        refuse_world_per_iteration_runs(self.run_dir)
        self.base = load_generation(self.run_dir, version, self.title)
        self.state = load_state(self.run_dir, version)
        if version == 0 and not state_path(self.run_dir, 0).exists():
            save_state(self.run_dir, 0, self.state)
        self._reset_batch()
