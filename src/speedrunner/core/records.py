"""The rows a run writes (metrics.jsonl, eval.jsonl), as typed models.

One schema for the writer (the loop dumps these) and every reader (reporting, leaderboard,
sweeps, tracking validate them), so a key is declared once and a renamed or missing field is
an error at the reader rather than a silent ``None``. ``extra="forbid"``: a key written but not
declared here fails the writer's own validation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["EvalEpisode", "EvalRow", "MetricsRow", "RecordError", "SuccessByTask", "TokenCounts",
           "dump_row", "validate_rows"]


Real = int | float
"""A number written as the writer produced it (an int stays an int, so rows dump byte-identical)."""


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
    sleep_output_tokens_share: float = Field(description="The batch's sleep output tokens over its episodes.")
    sleep_llm_calls_share: float = Field(description="The batch's sleep LLM calls over its episodes.")
    cost_episode_usd: Real | None = Field(description="The episode's own dollars; None if unpriced.")
    cost_sleep_share_usd: Real | None = Field(description="Its share of the sleep's dollars; None if unpriced.")
    cost_usd: Real | None = Field(description="Episode plus sleep share; None if either is unknown.")
    wall_time_s: float = Field(description="Wall time of the episode, seconds.")
    scripted: bool = Field(description="Played by the scripted provider: no LLM.")
    skill_calls: int = Field(description="Skill calls the actor made.")
    skill_actions: int = Field(description="Environment actions taken inside skill calls.")
    dynamic_call_depth: int = Field(description="Deepest skill call tree seen at run time.")
    within_2_llm_calls: bool = Field(description="Ended by itself in at most two actor LLM calls.")
    library_public_functions: int | None = Field(description="Public functions in the skill library.")
    library_private_functions: int | None = Field(description="Private (helper) functions in the library.")
    static_call_depth: int | None = Field(description="Longest call chain of the library's call graph.")
    call_graph_density: Real | None = Field(description="Edges over possible edges of the call graph.")
    skill_api_tokens: int | None = Field(description="Estimated tokens of the skill API in the actor prompt.")
    skill_api_chars: int | None = Field(description="Characters of the skill API in the actor prompt.")
    cap_hits: dict[str, int] = Field(description="Episode cap hits by cap name.")
    sleep_cap_hits: dict[str, int] = Field(description="The batch's sleep cap hits by cap name.")
    sandbox_violations: int = Field(description="Skill calls the sandbox stopped.")
    actor_turns: dict[str, int] = Field(description="Actor turns by answer format and effect.")
    run_spent_usd: Real | None = Field(
        default=None, description="The run's spend after the batch; written only with a spending cap.")
    max_cost_usd: Real | None = Field(
        default=None, description="The run's spending cap; written only with a spending cap.")


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
    cost_mean_usd: float | None = Field(description="Mean dollars per episode; None if any is unpriced.")
    per_episode: list[EvalEpisode] = Field(description="Every episode of the evaluation.")
    cap_hits: dict[str, int] = Field(description="Skill cap hits over the episodes.")
    scripted: bool = Field(description="Played by the scripted provider: no LLM.")
    wall_time_s: float = Field(description="Wall time of the evaluation, seconds.")
    skill_calls_mean: float = Field(description="Mean skill calls per episode.")
    actions_per_skill_call: float | None = Field(description="Actions per skill call; None without calls.")
    dynamic_call_depth_max: int = Field(description="Deepest skill call tree over the episodes.")
    within_2_llm_calls_share: float = Field(description="Share ended by itself within two LLM calls.")
    library_public_functions: int | None = Field(description="Public functions in the skill library.")
    library_private_functions: int | None = Field(description="Private (helper) functions in the library.")
    static_call_depth: int | None = Field(description="Longest call chain of the library's call graph.")
    call_graph_density: Real | None = Field(description="Edges over possible edges of the call graph.")
    skill_api_tokens: int | None = Field(description="Estimated tokens of the skill API in the actor prompt.")
    skill_api_chars: int | None = Field(description="Characters of the skill API in the actor prompt.")
    success_by_task: SuccessByTask | None = Field(
        default=None, description="Per-task success; written only when several tasks were evaluated.")
    benchmark_metrics: dict[str, Any] | None = Field(
        default=None, description="The benchmark's own metrics (e.g. Crafter's score); written if any.")


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
            problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'row'}: {err['msg']}"
                                 for err in e.errors()[:3])
            raise RecordError(f"{source} row {line} is not a {model.__name__} row ({problems}); "
                              "the file is damaged or was written by another run format") from None
    return out


def dump_row(row: BaseModel) -> dict[str, Any]:
    """The row as the run writes it: fields written only in some runs are left out when unset."""
    return row.model_dump(exclude_unset=True)
