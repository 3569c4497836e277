"""The online wake/sleep loop: the schedule every method runs on (docs/loop.md).

    for each batch of ``sleep_every`` training rollouts:
        evaluate first if this rollout count is an evaluation point
        wake:  play the batch's episodes concurrently, one knowledge version
        sleep: method.sleep(batch) -> next knowledge version (cost amortised over the batch)
        write the batch's metrics rows, then the checkpoint
    evaluate at the end if due

Results are ordered and seeded by episode index, never by completion order, so a run
with the scripted model is reproducible bit for bit, parallel or not, killed or not.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from speedrunner.core.answer_counts import FormatCounter, actor_turn_counts, not_acting_warning
from speedrunner.core.atomic import append_jsonl, read_jsonl, repair_jsonl
from speedrunner.core.benchmark import Benchmark, Budget, EpisodeSpec
from speedrunner.core.config.schema import RunConfig, results_view
from speedrunner.core.env import TextEnv
from speedrunner.core.episode_files import episode_path, load_or_quarantine, save_trajectory
from speedrunner.core.interrupt import RunInterrupted
from speedrunner.core.llm.journal import unaccounted
from speedrunner.core.llm.spend_cap import SpendCap, SpendCapReached
from speedrunner.core.llm.spent import CallLogTotals, usd
from speedrunner.core.llm.types import Model
from speedrunner.core.method import Knowledge, Method, SkillSupport, SleepResult, TrainingContext
from speedrunner.core.records import (
    SUMMARY_FILE,
    EvalPoint,
    EvalRow,
    FinalEval,
    MetricsRow,
    RunStatus,
    RunSummary,
    dump_row,
    read_summary,
    validate_rows,
)
from speedrunner.core.runtime import skill_metrics
from speedrunner.core.runtime.caps import (
    count_caps,
    episode_hits,
    run_cap_hits,
    skill_hits,
    sum_skill_hits,
)
from speedrunner.core.runtime.checkpoint import (
    Checkpoint,
    load_checkpoint,
    save_checkpoint,
    trim_jsonl,
)
from speedrunner.core.runtime.episode import EpisodeContext, call_prefix, run_episode
from speedrunner.core.runtime.progress import ProgressReporter
from speedrunner.core.runtime.run_summary import write_summary
from speedrunner.core.runtime.speedrun import SpeedrunTracker
from speedrunner.core.runtime.trust import count_violations
from speedrunner.core.sandbox.tiers import sandbox_summary
from speedrunner.core.trajectory import Trajectory
from speedrunner.errors import EnvError

METRICS_FILE = "metrics.jsonl"
EVAL_FILE = "eval.jsonl"
CALLS_FILE = "llm_calls.jsonl"
CACHE_FILE = "llm_cache.sqlite"
ENV_RESTARTS_FILE = "env_restarts.jsonl"


def config_fingerprint(config: RunConfig) -> str:
    """Hash of what decides results; endpoints, timeouts and parallelism may change on resume."""
    return hashlib.sha256(json.dumps(results_view(config), sort_keys=True).encode()).hexdigest()


class EnvPool:
    """Envs reused across episodes (a ScienceWorld env owns a JVM). One is made only when none
    is free, so at most ``run.peak_parallel_episodes`` exist.

    An env is only ever used by one thread at a time, and ``close`` never closes an env while
    an episode thread still holds it (closing a connection or a JVM under a running request is
    what turned Ctrl-C into tracebacks): it closes the free envs, waits a moment for the held
    ones to come back, and leaves any still held to their thread, which closes it on return.
    """

    RETURN_WAIT_S = 2.0
    """How long ``close`` waits for episode threads to hand their envs back. They stop before
    their next model call; one waiting on a request already on the wire is not waited for."""

    def __init__(self, make_env: Callable[[], TextEnv]) -> None:
        self._make_env = make_env
        self._free: list[TextEnv] = []
        self._held = 0
        self._closed = False
        self._cond = threading.Condition()

    @contextmanager
    def env(self) -> Iterator[TextEnv]:
        with self._cond:
            if self._closed:
                raise RunInterrupted("stopping: the env pool is closed")
            env = self._free.pop() if self._free else None
            self._held += 1
        try:
            if env is None:
                env = self._make_env()
        except BaseException:
            self._give_back(None)
            raise
        try:
            yield env
        finally:
            self._give_back(env)

    def _give_back(self, env: TextEnv | None) -> None:
        with self._cond:
            self._held -= 1
            closed = self._closed
            if env is not None and not closed:
                self._free.append(env)
            self._cond.notify_all()
        if env is not None and closed:
            _close_quietly(env)

    def close(self, wait_s: float | None = None) -> None:
        """Close every env; held ones once their thread hands them back (see the class)."""
        deadline = time.monotonic() + (self.RETURN_WAIT_S if wait_s is None else wait_s)
        with self._cond:
            self._closed = True
            free, self._free = self._free, []
        for env in free:
            _close_quietly(env)
        with self._cond:
            while self._held and (left := deadline - time.monotonic()) > 0:
                self._cond.wait(left)


def _close_quietly(env: TextEnv) -> None:
    """Close an env on shutdown; a failure to close is not worth a traceback over the result."""
    with contextlib.suppress(Exception):  # the env's backend may already be gone
        env.close()


@dataclass
class RunResult:
    run_dir: Path
    checkpoint: Checkpoint
    summary: RunSummary


def _require_base(obj: object, base: type, kind: str, doc: str) -> None:
    """The runner calls the base class's optional hooks directly: a plug-in's object must
    subclass it."""
    if not isinstance(obj, base):
        raise TypeError(
            f"the {kind} {type(obj).__module__}.{type(obj).__qualname__} does not subclass "
            f"{base.__module__}.{base.__qualname__}: subclass it (its optional hooks have "
            f"defaults the runner calls), see {doc}"
        )


class Runner:
    """Runs (or resumes) one run in ``run_dir``; built by ``speedrunner.train_cli``."""

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        *,
        benchmark: Benchmark,
        method: Method,
        actor: Model,
        run_id: str,
        scripted: bool,
        skill_support: SkillSupport | None = None,
        spend_cap: SpendCap | None = None,
        env_pool: EnvPool | None = None,
    ) -> None:
        _require_base(benchmark, Benchmark, "benchmark", "docs/add-benchmark.md")
        _require_base(method, Method, "method", "docs/add-method.md")
        self.config = config
        self.spend_cap = spend_cap
        """The spending cap the models check (its figures go to the progress line and the
        records)."""
        self.run_dir = run_dir
        self.benchmark = benchmark
        self.method = method
        self.actor = actor
        self.run_id = run_id
        self.scripted = scripted
        self.pool = env_pool if env_pool is not None else EnvPool(benchmark.make_env)
        """The run's envs, shared with ``skill_support`` (replays, first observations); closed
        at the end of ``run``."""
        b = config.benchmark
        self.budget = Budget(b.max_llm_calls, b.max_env_actions, config.run.episode_wall_clock_s)
        self.skill_support = skill_support
        self.speedrun = SpeedrunTracker(config, run_dir, run_id=run_id, scripted=scripted)
        self._stop = threading.Event()
        self.after_save: Callable[[Checkpoint], None] | None = None
        """Called after every checkpoint (experiment tracking follows the run's files from
        there)."""
        self._process_started = time.monotonic()
        self._elapsed_before = (
            0.0  # real time of earlier processes on this run (from the checkpoint)
        )
        self._calls = CallLogTotals(run_dir / CALLS_FILE)
        """The run's spend and calls, read from its log as it grows (``core.llm.spent``)."""
        self._stored: Checkpoint | None = None
        """The checkpoint as last stored (or resumed from): what every summary.json reports."""
        self._formats = FormatCounter(run_dir)

    # ------------------------------------------------------------------ the loop
    def run(self) -> RunResult:
        run = self.config.run
        checkpoint = self._resume_point()
        self._stored = checkpoint.model_copy(deep=True)
        self.write_summary("running")
        self.benchmark.start_run(
            f"{self.run_id}-{hashlib.sha256(str(self.run_dir.resolve()).encode()).hexdigest()[:12]}",
            self.run_dir,
        )
        batches = run.rollouts // run.sleep_every
        metric = self.config.speedrun.episode_metric
        progress = ProgressReporter(
            run.rollouts,
            scripted=self.scripted,
            totals=checkpoint.totals,
            version=checkpoint.knowledge_version,
            metric=metric,
            metric_sum=sum(float(r[metric]) for r in read_jsonl(self.run_dir / METRICS_FILE)),
            spend=self.spend_text,
        )
        try:
            for batch in range(checkpoint.completed_batches, batches):
                start = batch * run.sleep_every
                self._maybe_evaluate(start, checkpoint, progress)
                progress.batch_started()
                progress.phase(f"wake: batch {batch + 1}/{batches}")
                knowledge = self.method.knowledge()
                specs = [
                    self.benchmark.train_episode(run.seed, i)
                    for i in range(start, start + run.sleep_every)
                ]
                trajectories = (
                    self.method.train_batch(  # its own training phase (Voyager)
                        specs,
                        TrainingContext(
                            self.pool.env,
                            self.budget,
                            self._stop,
                            lambda t: progress.training_episode(
                                t.success, t.progress, index=t.index, actor=actor_turns(t)
                            ),
                        ),
                    )
                    if self.method.own_training
                    else self._play(specs, knowledge, None, progress)
                )
                progress.phase(
                    f"sleep: batch {batch + 1}/{batches} "
                    f"(learning from knowledge v{knowledge.version})"
                )
                sleep_started = time.monotonic()
                self._prepare_sandboxes(batch, knowledge)
                result = self.method.sleep(trajectories, batch_index=batch)
                self._write_batch(
                    checkpoint,
                    batch,
                    trajectories,
                    result,
                    time.monotonic() - sleep_started,
                    knowledge,
                )
                progress.batch_finished(result.knowledge.version)
            self._maybe_evaluate(run.rollouts, checkpoint, progress, final=True)
        finally:
            progress.close()
            self.pool.close()
        summary = self.write_summary("finished")
        if summary.actor_warning:
            print(f"WARNING: {summary.actor_warning}", file=sys.stderr, flush=True)
        return RunResult(self.run_dir, checkpoint, summary)

    def _prepare_sandboxes(self, batch: int, knowledge: Knowledge) -> None:
        """Boot the skill sandboxes of the episodes the next phase starts at once while this
        sleep waits for its model (``SkillSupport.prepare``). Only when the knowledge already has
        skills: the sleep rarely removes them all (then they are killed unused when the run
        ends)."""
        if (
            self.skill_support is None
            or self.skill_support.prepare is None
            or knowledge.skills is None
        ):
            return
        run = self.config.run
        following = (batch + 1) * run.sleep_every
        if self._eval_due(following):
            episodes = run.eval_episodes
        elif following < run.rollouts and not self.method.own_training:
            episodes = run.sleep_every
        else:
            return
        self.skill_support.prepare(run.workers(episodes))

    # ---------------------------------------------------------------- resume
    def _resume_point(self) -> Checkpoint:
        fingerprint = config_fingerprint(self.config)
        checkpoint = load_checkpoint(
            self.run_dir, run_id=self.run_id, results_config_sha256=fingerprint
        )
        if checkpoint is None:
            checkpoint = Checkpoint(
                run_id=self.run_id, results_config_sha256=fingerprint, started_at=_now()
            )
        self._elapsed_before = checkpoint.elapsed_s
        trim_jsonl(self.run_dir / METRICS_FILE, checkpoint.metrics_rows)
        trim_jsonl(self.run_dir / EVAL_FILE, checkpoint.eval_rows)
        repair_jsonl(self.run_dir / CALLS_FILE)  # a kill may have torn its last line
        self.method.restore(checkpoint.knowledge_version)
        return checkpoint

    # ------------------------------------------------------------------ wake
    def _play(
        self,
        specs: list[EpisodeSpec],
        knowledge: Knowledge,
        eval_point: int | None,
        progress: ProgressReporter | None,
    ) -> list[Trajectory]:
        """Play episodes concurrently; episodes already on disk are loaded, not replayed."""
        ctx = EpisodeContext(self.actor, knowledge, self.budget, eval_point, self._stop)
        if self.skill_support is not None:
            caps = self.config.method.skill_caps()
            ctx = replace(
                ctx,
                open_skills=self.skill_support.open_skills,
                max_skill_actions=caps.max_skill_actions,
                skill_timeout_s=caps.skill_timeout_s,
            )
        results: dict[int, Trajectory] = {}
        todo = []
        for spec in specs:
            path = episode_path(self.run_dir, spec.split, spec.index, eval_point)
            # a corrupt file is moved aside
            stored = load_or_quarantine(path) if path.exists() else None
            if stored is not None:
                results[spec.index] = stored
            else:
                todo.append(spec)

        def play(spec: EpisodeSpec) -> Trajectory:
            trajectory = self._play_one(spec, ctx)
            save_trajectory(self.run_dir, trajectory)
            # display only: completion order is fine
            if progress is not None and eval_point is None:
                progress.training_episode(
                    trajectory.success,
                    trajectory.progress,
                    index=trajectory.index,
                    actor=actor_turns(trajectory),
                )
            return trajectory

        executor = ThreadPoolExecutor(
            max_workers=self.config.run.workers(len(todo)), thread_name_prefix="speedrunner-episode"
        )
        futures = {spec.index: executor.submit(play, spec) for spec in todo}
        try:
            for index, future in futures.items():
                results[index] = future.result()
        except BaseException:
            # Ctrl-C, SIGTERM or a failed episode: running episodes stop before their next
            # paid call, and nobody waits for a request already on the wire.
            self._stop.set()
            executor.shutdown(wait=False, cancel_futures=True)
            raise
        executor.shutdown()
        # loaded from disk: finished before a resume
        if progress is not None and eval_point is None:
            for index in sorted(set(results) - set(futures)):
                t = results[index]
                progress.training_episode(
                    t.success, t.progress, index=t.index, actor=actor_turns(t)
                )
        return [results[spec.index] for spec in specs]

    def _play_one(self, spec: EpisodeSpec, ctx: EpisodeContext) -> Trajectory:
        """One episode; replayed from its seed when the benchmark repaired a failed backend.

        A replay costs no paid call: the episode is deterministic from (task, seed) and its
        LLM calls have the same ids and prompts, so they come from the response cache.
        """
        while True:
            try:
                with self.pool.env() as env:
                    return run_episode(env, spec, ctx)
            except EnvError as e:
                if not self.benchmark.recover(e):
                    raise
                append_jsonl(
                    self.run_dir / ENV_RESTARTS_FILE,
                    {
                        "ts": time.time(),
                        "episode": call_prefix(spec, ctx.eval_point),
                        "error": str(e),
                    },
                )

    # ------------------------------------------------------------------ sleep
    def _write_batch(
        self,
        checkpoint: Checkpoint,
        batch: int,
        trajectories: list[Trajectory],
        result: SleepResult,
        sleep_wall_s: float,
        knowledge: Knowledge,
    ) -> None:
        sleep_cost = _sum_cost([c.cost_usd for c in result.completions])
        share = None if sleep_cost is None else sleep_cost / len(trajectories)
        sleep_output = sum(c.usage.output for c in result.completions)
        totals = checkpoint.totals
        # what they played
        library = skill_metrics.library_fields(knowledge, self.skill_support is not None)
        for t in trajectories:
            cost = None if t.cost_usd is None or share is None else t.cost_usd + share
            append_jsonl(
                self.run_dir / METRICS_FILE,
                dump_row(
                    MetricsRow(
                        **{
                            "rollout": t.index + 1,
                            "index": t.index,
                            "batch": batch,
                            "task": t.task,
                            "seed": t.seed,
                            "knowledge_version": t.knowledge_version,
                            "success": t.success,
                            "progress": t.progress,
                            "stop_reason": t.stop_reason,
                            "llm_calls": t.llm_calls,
                            "env_actions": t.env_actions,
                            "tokens": {
                                "input_uncached": t.usage.input_uncached,
                                "input_cached": t.usage.input_cached,
                                "output": t.usage.output,
                                "reasoning": t.usage.reasoning,
                            },
                            "sleep_output_tokens_share": sleep_output / len(trajectories),
                            "sleep_llm_calls_share": len(result.completions) / len(trajectories),
                            "cost_episode_usd": t.cost_usd,
                            "cost_sleep_share_usd": share,
                            "cost_usd": cost,
                            "wall_time_s": round(t.wall_time_s, 3),
                            "scripted": t.scripted,
                            **skill_metrics.episode_fields(t),
                            **library,
                            "cap_hits": episode_hits(t.cap_hits),
                            "sleep_cap_hits": count_caps([]) | result.cap_hits,
                            "sandbox_violations": t.sandbox_violations,
                            "actor_turns": actor_turns(t),
                            **self._spend_fields(),
                        }
                    )
                ),
            )
            totals.episodes += 1
            totals.successes += int(t.success)
            totals.llm_calls += t.llm_calls
            totals.output_tokens += t.usage.output
            totals.cost_usd = (
                None if totals.cost_usd is None or cost is None else totals.cost_usd + cost
            )
            totals.episode_and_sleep_time_s += t.wall_time_s
        totals.llm_calls += len(result.completions)
        totals.output_tokens += sleep_output
        totals.episode_and_sleep_time_s += sleep_wall_s
        checkpoint.metrics_rows += len(trajectories)
        checkpoint.completed_batches = batch + 1
        checkpoint.knowledge_version = result.knowledge.version
        self.speedrun.record_batch(checkpoint, elapsed_s=self._elapsed())
        self._save(checkpoint)

    # ------------------------------------------------------------------ eval
    def _eval_due(self, rollout: int, *, final: bool = False) -> bool:
        """Evaluations run at rollout 0, every ``eval_every`` rollouts, and always at the end."""
        run = self.config.run
        return run.eval_episodes > 0 and (
            final or rollout % run.eval_every == 0 or rollout >= run.rollouts
        )

    def _maybe_evaluate(
        self,
        rollout: int,
        checkpoint: Checkpoint,
        progress: ProgressReporter,
        *,
        final: bool = False,
    ) -> None:
        if not self._eval_due(rollout, final=final) or rollout in checkpoint.eval_points_done:
            return
        run = self.config.run
        progress.phase(f"eval at rollout {rollout}")
        started = time.monotonic()
        knowledge = self.method.knowledge()
        trajectories = self._play(
            self.benchmark.eval_episodes(run.eval_seed), knowledge, rollout, None
        )
        n = len(trajectories)
        costs = [t.cost_usd for t in trajectories]
        row = {
            "rollout": rollout,
            "knowledge_version": knowledge.version,
            "episodes": n,
            "success_mean": sum(t.success for t in trajectories) / n,
            "progress_mean": sum(t.progress for t in trajectories) / n,
            "llm_calls_mean": sum(t.llm_calls for t in trajectories) / n,
            "output_tokens_mean": sum(t.usage.output for t in trajectories) / n,
            "cost_mean_usd": None if _sum_cost(costs) is None else _sum_cost(costs) / n,
            "per_episode": [
                {
                    "index": t.index,
                    "task": t.task,
                    "seed": t.seed,
                    "success": t.success,
                    "progress": t.progress,
                    "llm_calls": t.llm_calls,
                    "env_actions": t.env_actions,
                    "output_tokens": t.usage.output,
                    "cost_usd": t.cost_usd,
                    "stop_reason": t.stop_reason,
                    "cap_hits": skill_hits(t.cap_hits),
                    "sandbox_violations": t.sandbox_violations,
                    **skill_metrics.episode_fields(t),
                }
                for t in trajectories
            ],
            "cap_hits": sum_skill_hits(t.cap_hits for t in trajectories),
            "scripted": any(t.scripted for t in trajectories),
            "wall_time_s": round(time.monotonic() - started, 3),
            **skill_metrics.eval_fields(trajectories, knowledge, self.skill_support is not None),
        }
        if len({t.task for t in trajectories}) > 1:  # e.g. BabyAI mixed: BALROG averages per kind
            row["success_by_task"] = _success_by_task(trajectories)
        # e.g. Crafter's score
        extra_metrics = self.benchmark.eval_metrics([t.final_info for t in trajectories])
        if extra_metrics is not None:
            row["benchmark_metrics"] = extra_metrics
        append_jsonl(self.run_dir / EVAL_FILE, dump_row(EvalRow(**row)))
        checkpoint.eval_rows += 1
        checkpoint.eval_points_done.append(rollout)
        self.speedrun.record_eval(checkpoint, row, elapsed_s=self._elapsed())
        self._save(checkpoint)
        metric = f"{self.config.speedrun.episode_metric}_mean"
        progress.phase(f"eval at rollout {rollout}: {metric} {row[metric]:.3f} over {n} episodes")

    # ---------------------------------------------------------------- records
    def _spend_fields(self) -> dict[str, Any]:
        """Money spent on the run so far (all processes) and its cap, for metrics rows: written
        after the batch's sleep, so every row of a batch carries the same figures."""
        if self.spend_cap is None:
            return {}
        return {"run_spent_usd": self._calls.read().spent_usd, "max_cost_usd": self.spend_cap.cap}

    def spend_text(self) -> str:
        """The progress line's money: the run's spend, against its caps when set."""
        spent = self._calls.read().spent_usd
        return f"spent {usd(spent)}" if self.spend_cap is None else self.spend_cap.describe(spent)

    def _elapsed(self) -> float:
        """Real time on this run: earlier processes (to their last checkpoint) plus this one."""
        return self._elapsed_before + time.monotonic() - self._process_started

    def _save(self, checkpoint: Checkpoint) -> None:
        checkpoint.elapsed_s = round(self._elapsed(), 3)
        save_checkpoint(self.run_dir, checkpoint)
        self._stored = checkpoint.model_copy(deep=True)
        self.write_summary("running")
        if self.after_save is not None:
            self.after_save(checkpoint)

    @property
    def started(self) -> bool:
        """``run`` has loaded the checkpoint: :meth:`summary` can be built."""
        return self._stored is not None

    def write_summary(
        self,
        status: RunStatus,
        reason: str | None = None,
        *,
        cap_reached: SpendCapReached | None = None,
    ) -> RunSummary:
        """Build summary.json (:meth:`summary`) and write it; returns what it wrote."""
        summary = self.summary(status, reason, cap_reached=cap_reached)
        write_summary(self.run_dir, summary)
        return summary

    def summary(
        self,
        status: RunStatus,
        reason: str | None = None,
        *,
        cap_reached: SpendCapReached | None = None,
    ) -> RunSummary:
        """summary.json, from what the run stored: the last checkpoint's totals and evaluations,
        the call log's spend, the spending cap. Written when the run starts, after every
        checkpoint and at every stop, so it is true whenever the run ends (a SIGKILL leaves the
        last checkpoint's). A spending-cap stop's reason names the spend this summary holds."""
        checkpoint = self._stored
        assert checkpoint is not None, "summary() before run() loaded the checkpoint"
        rows = read_jsonl(self.run_dir / EVAL_FILE)[: checkpoint.eval_rows]
        evals = validate_rows(EvalRow, rows, self.run_dir / EVAL_FILE)
        finished = status == "finished"
        if finished:
            self.speedrun.finish(checkpoint, rows)
        calls = self._calls.read()
        spent = calls.spent_usd
        cap = None if self.spend_cap is None else self.spend_cap.snapshot()
        if cap_reached is not None:
            reason = cap_reached.stopped(spent, None if cap is None else cap["in_flight_usd"])
        answers = self._formats.counts()
        return RunSummary.model_validate(
            {
                "run_id": self.run_id,
                "method": self.config.method.name,
                "benchmark": self.config.benchmark.name,
                "task_set": self.config.benchmark.task_set,
                "seed": self.config.run.seed,
                "model": self.config.model.name,
                "scripted": self.scripted,
                "note": "SCRIPTED MODEL: these numbers come from no LLM" if self.scripted else None,
                "status": status,
                "status_reason": reason,
                "started_at": checkpoint.started_at,
                "ended_at": None if status == "running" else _now(),
                "elapsed_s": round(self._elapsed(), 3) if finished else checkpoint.elapsed_s,
                "spent_usd": spent,
                # may have been billed with no answer seen (timeouts, kills): at its worst case,
                # not in spent_usd
                "unknown_spend_usd": calls.unknown_usd,
                "training": checkpoint.totals.model_dump(),
                "knowledge_version": checkpoint.knowledge_version,
                "eval": [
                    EvalPoint(
                        rollout=e.rollout,
                        success_mean=e.success_mean,
                        progress_mean=e.progress_mean,
                        cost_mean_usd=e.cost_mean_usd,
                        benchmark_metrics=e.benchmark_metrics,
                    )
                    for e in evals
                ],
                "final_eval": None
                if not evals or not finished
                else FinalEval.model_validate(
                    {k: v for k, v in dump_row(evals[-1]).items() if k != "per_episode"}
                ),
                "speedrun_reached_at": checkpoint.speedrun_reached_at,
                "unaccounted": unaccounted(self.run_dir / CACHE_FILE, self.run_id),
                "spending": None if cap is None else {"spent_usd": spent, **cap},
                "env_restarts": len(read_jsonl(self.run_dir / ENV_RESTARTS_FILE)),
                "format": answers,
                "actor_warning": not_acting_warning(answers.get("actor")),
                "cap_hits": run_cap_hits(
                    read_jsonl(self.run_dir / METRICS_FILE)[: checkpoint.metrics_rows]
                ),
                "eval_cap_hits": sum_skill_hits(e.cap_hits for e in evals),
                **sandbox_summary(self.skill_support),
                "sandbox_violations": count_violations(self.run_dir),
            }
        )


def actor_turns(t: Trajectory) -> dict[str, int]:
    """The episode's actor turns by answer format and by what they did to the env."""
    return actor_turn_counts(
        [
            {
                "call_id": s.call_id,
                "answer_format": s.answer_format,
                "finish_reason": s.finish_reason,
                "effect": s.effect,
                "executed": s.executed,
                "skill_call": s.skill_call,
            }
            for s in t.steps
        ]
    )


def _success_by_task(trajectories: list[Trajectory]) -> dict[str, Any]:
    """Success rate per task kind, and their unweighted mean (BALROG's BabyAI headline)."""
    by_task: dict[str, list[bool]] = {}
    for t in trajectories:
        by_task.setdefault(t.task, []).append(t.success)
    rates = {task: sum(s) / len(s) for task, s in sorted(by_task.items())}
    return {
        "rates": rates,
        "episodes": {task: len(s) for task, s in sorted(by_task.items())},
        "mean_over_tasks": sum(rates.values()) / len(rates),
    }


def mark_run_status(run_dir: Path, status: RunStatus, reason: str | None = None) -> None:
    """Record how a run ended when it stopped before its ``Runner`` existed (e.g. a benchmark
    that failed to start on a resume): summary.json keeps the totals an earlier process wrote
    at its last checkpoint or stop; the status and the spend (read from the log) are brought up
    to date. A run with no summary yet keeps none (it has nothing to sum up). Once a ``Runner``
    exists, ``Runner.write_summary`` records every stop instead."""
    if not (run_dir / SUMMARY_FILE).exists():
        return
    summary = read_summary(run_dir)
    spent = CallLogTotals(run_dir / CALLS_FILE).read().spent_usd
    spending = (
        None
        if summary.spending is None
        else summary.spending.model_copy(update={"spent_usd": spent})
    )
    write_summary(
        run_dir,
        summary.model_copy(
            update={
                "status": status,
                "status_reason": reason,
                "ended_at": _now(),
                "spent_usd": spent,
                "spending": spending,
            }
        ),
    )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _sum_cost(costs: list[float | None]) -> float | None:
    """Sum of costs; unknown (None) if any part is unknown — never silently zero."""
    total = 0.0
    for c in costs:
        if c is None:
            return None
        total += c
    return total
