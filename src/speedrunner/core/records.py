"""The rows a run writes (metrics.jsonl, eval.jsonl) and its summary.json, as typed models.

One schema for the writer (the loop dumps these) and every reader (reporting, leaderboard,
sweeps, tracking validate them), so a key is declared once and a renamed or missing field is
an error at the reader rather than a silent ``None``. ``extra="forbid"``: a key written but not
declared here fails the writer's own validation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

__all__ = [
    "SUMMARY_FILE",
    "EvalEpisode",
    "EvalPoint",
    "EvalRow",
    "FinalEval",
    "FormatCounts",
    "MetricsRow",
    "RecordError",
    "RunStatus",
    "RunSummary",
    "SandboxViolations",
    "Spending",
    "SuccessByTask",
    "SummaryError",
    "TokenCounts",
    "TrainingTotals",
    "Unaccounted",
    "dump_row",
    "read_summary",
    "stored_summary",
    "validate_rows",
]

SUMMARY_FILE = "summary.json"
RunStatus = Literal["running", "finished", "interrupted", "failed", "budget_reached"]


Real = int | float
"""A number written as the writer produced it (an int stays an int, so rows dump byte-identical)."""


# The skill library's shape, as a training batch and an evaluation both record it.
PublicFunctions = Annotated[int | None, Field(description="Public functions in the skill library.")]
PrivateFunctions = Annotated[
    int | None, Field(description="Private (helper) functions in the library.")
]
StaticCallDepth = Annotated[
    int | None, Field(description="Longest call chain of the library's call graph.")
]
CallGraphDensity = Annotated[
    Real | None, Field(description="Edges over possible edges of the call graph.")
]
SkillApiTokens = Annotated[
    int | None, Field(description="Estimated tokens of the skill API in the actor prompt.")
]
SkillApiChars = Annotated[
    int | None, Field(description="Characters of the skill API in the actor prompt.")
]


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TokenCounts(_Row):
    """An episode's actor tokens by kind."""

    input_uncached: int = Field(description="Prompt tokens billed at the full input price.")
    input_cached: int = Field(description="Prompt tokens served from the provider's prompt cache.")
    output: int = Field(description="Completion tokens, reasoning included.")
    reasoning: int = Field(description="The reasoning part of the output tokens.")


class MetricsRow(_Row):
    """One training episode: a line of metrics.jsonl, written after its batch's sleep."""

    rollout: int = Field(description="1-based training episode number.")
    index: int = Field(description="0-based training episode number.")
    batch: int = Field(description="The batch (between two sleeps) the episode belongs to.")
    task: str = Field(description="The benchmark's task name.")
    seed: int = Field(description="The environment seed of the episode.")
    knowledge_version: int = Field(description="The knowledge generation the actor played with.")
    success: bool = Field(description="The episode reached its goal.")
    progress: Real = Field(description="Partial progress in [0, 1] (the benchmark's measure).")
    stop_reason: str = Field(description="Why the episode ended (success, env_done, a budget ...).")
    llm_calls: int = Field(description="Actor LLM calls in the episode.")
    env_actions: int = Field(description="Primitive environment actions taken.")
    tokens: TokenCounts = Field(description="The episode's actor tokens.")
    sleep_output_tokens_share: float = Field(
        description="The batch's sleep output tokens over its episodes."
    )
    sleep_llm_calls_share: float = Field(
        description="The batch's sleep LLM calls over its episodes."
    )
    cost_episode_usd: Real | None = Field(
        description="The episode's own dollars; None if unpriced."
    )
    cost_sleep_share_usd: Real | None = Field(
        description="Its share of the sleep's dollars; None if unpriced."
    )
    cost_usd: Real | None = Field(
        description="Episode plus sleep share; None if either is unknown."
    )
    wall_time_s: float = Field(description="Wall time of the episode, seconds.")
    scripted: bool = Field(description="Played by the scripted provider: no LLM.")
    skill_calls: int = Field(description="Skill calls the actor made.")
    skill_actions: int = Field(description="Environment actions taken inside skill calls.")
    dynamic_call_depth: int = Field(description="Deepest skill call tree seen at run time.")
    within_2_llm_calls: bool = Field(description="Ended by itself in at most two actor LLM calls.")
    library_public_functions: PublicFunctions
    library_private_functions: PrivateFunctions
    static_call_depth: StaticCallDepth
    call_graph_density: CallGraphDensity
    skill_api_tokens: SkillApiTokens
    skill_api_chars: SkillApiChars
    cap_hits: dict[str, int] = Field(description="Episode cap hits by cap name.")
    sleep_cap_hits: dict[str, int] = Field(description="The batch's sleep cap hits by cap name.")
    sandbox_violations: int = Field(description="Skill calls the sandbox stopped.")
    actor_turns: dict[str, int] = Field(description="Actor turns by answer format and effect.")
    run_spent_usd: Real | None = Field(
        default=None,
        description="The run's spend after the batch; written only with a spending cap.",
    )
    max_cost_usd: Real | None = Field(
        default=None, description="The run's spending cap; written only with a spending cap."
    )


class EvalEpisode(_Row):
    """One evaluation episode, inside an eval.jsonl row."""

    index: int = Field(description="0-based episode number within the evaluation.")
    task: str = Field(description="The benchmark's task name.")
    seed: int = Field(description="The environment seed of the episode.")
    success: bool = Field(description="The episode reached its goal.")
    progress: Real = Field(description="Partial progress in [0, 1].")
    llm_calls: int = Field(description="Actor LLM calls in the episode.")
    env_actions: int = Field(description="Primitive environment actions taken.")
    output_tokens: int = Field(description="Actor output tokens.")
    cost_usd: Real | None = Field(description="The episode's dollars; None if unpriced.")
    stop_reason: str = Field(description="Why the episode ended.")
    cap_hits: dict[str, int] = Field(description="Skill cap hits by cap name.")
    sandbox_violations: int = Field(description="Skill calls the sandbox stopped.")
    skill_calls: int = Field(description="Skill calls the actor made.")
    skill_actions: int = Field(description="Environment actions taken inside skill calls.")
    dynamic_call_depth: int = Field(description="Deepest skill call tree seen at run time.")
    within_2_llm_calls: bool = Field(description="Ended by itself in at most two actor LLM calls.")


class SuccessByTask(_Row):
    """Success per task kind of a mixed evaluation (BALROG averages BabyAI per kind)."""

    rates: dict[str, float] = Field(description="Success rate by task.")
    episodes: dict[str, int] = Field(description="Episodes by task.")
    mean_over_tasks: float = Field(description="Unweighted mean of the rates.")


class EvalRow(_Row):
    """One evaluation point: a line of eval.jsonl."""

    rollout: int = Field(description="Training episodes played before this evaluation.")
    knowledge_version: int = Field(description="The knowledge generation evaluated.")
    episodes: int = Field(description="Evaluation episodes played.")
    success_mean: float = Field(description="Mean success over the episodes.")
    progress_mean: float = Field(description="Mean progress over the episodes.")
    llm_calls_mean: float = Field(description="Mean actor LLM calls per episode.")
    output_tokens_mean: float = Field(description="Mean actor output tokens per episode.")
    cost_mean_usd: float | None = Field(
        description="Mean dollars per episode; None if any is unpriced."
    )
    per_episode: list[EvalEpisode] = Field(description="Every episode of the evaluation.")
    cap_hits: dict[str, int] = Field(description="Skill cap hits over the episodes.")
    scripted: bool = Field(description="Played by the scripted provider: no LLM.")
    wall_time_s: float = Field(description="Wall time of the evaluation, seconds.")
    skill_calls_mean: float = Field(description="Mean skill calls per episode.")
    actions_per_skill_call: float | None = Field(
        description="Actions per skill call; None without calls."
    )
    dynamic_call_depth_max: int = Field(description="Deepest skill call tree over the episodes.")
    within_2_llm_calls_share: float = Field(
        description="Share ended by itself within two LLM calls."
    )
    library_public_functions: PublicFunctions
    library_private_functions: PrivateFunctions
    static_call_depth: StaticCallDepth
    call_graph_density: CallGraphDensity
    skill_api_tokens: SkillApiTokens
    skill_api_chars: SkillApiChars
    success_by_task: SuccessByTask | None = Field(
        default=None,
        description="Per-task success; written only when several tasks were evaluated.",
    )
    benchmark_metrics: dict[str, Any] | None = Field(
        default=None,
        description="The benchmark's own metrics (e.g. Crafter's score); written if any.",
    )


FinalEval = (
    create_model(  # one declaration of the eval fields: EvalRow's, per-episode list left out
        "FinalEval",
        __base__=_Row,
        __doc__="summary.json's last evaluation: its eval.jsonl row without ``per_episode``.",
        **{
            name: (f.annotation, f)
            for name, f in EvalRow.model_fields.items()
            if name != "per_episode"
        },
    )
)


class EvalPoint(_Row):
    """One evaluation point of summary.json's curve (``eval``)."""

    rollout: int = Field(description="Training episodes played before this evaluation.")
    success_mean: float = Field(description="Mean success over the episodes.")
    progress_mean: float = Field(description="Mean progress over the episodes.")
    cost_mean_usd: float | None = Field(
        description="Mean dollars per episode; None if any is unpriced."
    )
    benchmark_metrics: dict[str, Any] | None = Field(
        description="The benchmark's own metrics (e.g. Crafter's score); None if it has none."
    )


class TrainingTotals(_Row):
    """summary.json's ``training``: the last checkpoint's totals (evaluation left out)."""

    episodes: int = Field(description="Training episodes played.")
    successes: int = Field(description="Training episodes that reached their goal.")
    llm_calls: int = Field(description="LLM calls of training episodes and sleep phases.")
    output_tokens: int = Field(description="Output tokens of training episodes and sleep phases.")
    cost_usd: Real | None = Field(
        description="Dollars of training episodes and sleep phases; None if unpriced."
    )
    episode_and_sleep_time_s: float = Field(
        description=(
            "Sum of episode and sleep durations; above elapsed_s when episodes run in parallel."
        )
    )


class Unaccounted(_Row):
    """summary.json's ``unaccounted``: requests on the wire when a process was killed."""

    calls_in_flight_at_kills: int = Field(
        description="Requests found in flight at kills, over the run's life."
    )
    max_usd: Real | None = Field(
        description="Their worst-case dollars; None if a price is unknown."
    )
    note: str | None = Field(
        default=None, description="What max_usd counts; written once the run has a cache."
    )


class Spending(_Row):
    """summary.json's ``spending``: the spend against the caps (written only with a cap)."""

    spent_usd: Real | None = Field(
        description="The run's spend (the same figure as the top-level spent_usd)."
    )
    max_cost_usd: Real | None = Field(description="The run's spending cap (run.max_cost_usd).")
    reached: bool = Field(description="A cap stopped the run.")
    in_flight_usd: Real | None = Field(
        description="Worst case of calls on the wire when written, under a cap."
    )
    over_reservation_usd: Real = Field(
        description="What replies cost beyond their worst case (last process)."
    )
    sweep_max_cost_usd: Real | None = Field(
        default=None,
        description="The sweep's spending cap; written only for a run of a capped sweep.",
    )


class FormatCounts(_Row):
    """One role's turns in summary.json's ``format`` (docs/answers.md)."""

    turns: int = Field(description="Turns read.")
    ok: int = Field(description="Read in the exact format.")
    repaired: int = Field(description="Read only thanks to tolerance.")
    lost: int = Field(description="No meaning could be read from the answer's form.")
    truncated: int = Field(description="Cut at max_tokens.")
    dropped_calls: int = Field(description="Tool calls written after a turn's first.")
    acted: int | None = Field(default=None, description="Turns that made the env act; actor only.")
    refused: int | None = Field(
        default=None, description="Turns after which nothing ran; actor only."
    )
    skill_calls: int | None = Field(
        default=None, description="Turns that called a skill; actor only."
    )


class SandboxViolations(_Row):
    """summary.json's ``sandbox_violations``: protocol violations by where they happened."""

    total: int = Field(description="All of them.")
    train: int = Field(description="In training episodes' skill calls.")
    eval: int = Field(description="In evaluation episodes' skill calls.")
    sleep: int = Field(description="In sleep phases' analysis code.")


class RunSummary(_Row):
    """summary.json: a run's status, timing, totals, spend and evaluation curve, rewritten when the
    run starts, after every checkpoint and at every stop."""

    run_id: str = Field(description="The run's id (its directory name).")
    method: str = Field(description="The method's name.")
    benchmark: str = Field(description="The benchmark's name.")
    task_set: str = Field(description="The benchmark's task set.")
    seed: int = Field(description="The run's seed.")
    model: str = Field(description="The actor model's name (scripted for the scripted provider).")
    scripted: bool = Field(description="Played by the scripted provider: no LLM.")
    note: str | None = Field(description="The scripted model's warning; None for a model.")
    status: RunStatus = Field(
        description="running, finished, interrupted, budget_reached or failed."
    )
    status_reason: str | None = Field(
        description="Ctrl-C, SIGTERM, the cap's message or the error; None if none."
    )
    started_at: str = Field(description="When the run first started (ISO 8601, UTC).")
    ended_at: str | None = Field(description="When it stopped (ISO 8601, UTC); None while running.")
    elapsed_s: Real = Field(
        description="Real time of every process on the run, to its last checkpoint."
    )
    spent_usd: Real | None = Field(
        description="Dollars of every LLM call of the run; None if a price is unknown."
    )
    unknown_spend_usd: Real | None = Field(
        description=(
            "Worst case of attempts that may have been billed with no answer seen; "
            "not in spent_usd. None if such an attempt's price is unknown."
        )
    )
    training: TrainingTotals = Field(description="The last checkpoint's training totals.")
    knowledge_version: int = Field(description="The knowledge generation reached.")
    eval: list[EvalPoint] = Field(description="The evaluation points so far.")
    final_eval: FinalEval | None = Field(  # type: ignore[valid-type]
        description="The last evaluation of a finished run; None before."
    )
    speedrun_reached_at: int | None = Field(
        description="Rollout the speedrun target was reached at; None if not."
    )
    unaccounted: Unaccounted = Field(description="Calls in flight when a process was killed.")
    spending: Spending | None = Field(description="The spend against the caps; None without a cap.")
    env_restarts: int = Field(description="Environment server restarts.")
    format: dict[str, FormatCounts] = Field(description="How answers were read, per role.")
    actor_warning: str | None = Field(
        description="The warning for an actor that mostly did nothing; None if fine."
    )
    cap_hits: dict[str, int] = Field(description="Training and sleep cap hits by cap name.")
    eval_cap_hits: dict[str, int] = Field(description="Evaluation skill cap hits by cap name.")
    sandbox_tier: str | None = Field(
        description="Where LLM-written code ran; None for methods without any."
    )
    isolation: str | None = Field(
        description="A WEAK ISOLATION note under the rlimits tier; None otherwise."
    )
    sandbox_violations: SandboxViolations = Field(
        description="Sandbox protocol violations by place."
    )


class RecordError(ValueError):
    """A stored row does not match its schema (a damaged file or another run format)."""


R = TypeVar("R", bound=BaseModel)


def validate_rows(model: type[R], rows: list[dict[str, Any]], source: Path | str) -> list[R]:
    """``rows`` as ``model``; a row that does not fit is a :class:`RecordError` naming the file,
    the line and the field."""
    out = []
    for line, row in enumerate(rows, 1):
        try:
            out.append(model.model_validate(row))
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(map(str, err['loc'])) or 'row'}: {err['msg']}" for err in e.errors()[:3]
            )
            raise RecordError(
                f"{source} row {line} is not a {model.__name__} row ({problems}); "
                "the file is damaged or was written by another run format"
            ) from None
    return out


def dump_row(row: BaseModel) -> dict[str, Any]:
    """The row as the run writes it: fields written only in some runs are left out when unset."""
    return row.model_dump(exclude_unset=True)


class SummaryError(RecordError):
    """A run's summary.json is missing, not JSON, or not a :class:`RunSummary`."""


def stored_summary(run_dir: Path) -> RunSummary | None:
    """``run_dir``'s summary.json, or ``None`` when the run has written none yet (it was killed
    before its first); a damaged one is a :class:`SummaryError`."""
    if not (run_dir / SUMMARY_FILE).exists():
        return None
    return read_summary(run_dir)


def read_summary(run_dir: Path) -> RunSummary:
    """``run_dir``'s summary.json; missing or malformed is a :class:`SummaryError` naming the
    file."""
    path = run_dir / SUMMARY_FILE
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise SummaryError(
            f"{path} is missing: the run was killed before it wrote its first summary, "
            "or this is not a run directory; resume the run (--resume) to write it"
        ) from None
    except (OSError, ValueError, RecursionError) as e:
        raise SummaryError(
            f"{path} cannot be read ({e}); the file is damaged: resume the run "
            "(--resume), which rewrites it from the run's checkpoint"
        ) from None
    try:
        return RunSummary.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(map(str, err['loc'])) or 'summary'}: {err['msg']}" for err in e.errors()[:3]
        )
        raise SummaryError(
            f"{path} is not a run summary ({problems}); the file is damaged or was written "
            "by another run format: resume the run (--resume) to rewrite it"
        ) from None
