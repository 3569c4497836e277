"""The config sections of the corridor benchmark and the tally method."""

from typing import Literal

from pydantic import Field

from speedrunner.core.config.schema import BenchmarkConfig, MethodConfig


class CorridorConfig(BenchmarkConfig):
    name: Literal["corridor"] = "corridor"
    """Corridor: walk to the key, pick it up, walk to the door, open it."""
    task_set: Literal["short", "long"] = "short"
    """short: a corridor of 4 cells; long: 8."""
    max_llm_calls: int | None = Field(20, ge=1)
    """Per-episode budget of LLM calls."""


class TallyConfig(MethodConfig):
    name: Literal["tally"] = "tally"
    """Tally: each sleep appends one line of the batch's statistics to what the actor sees."""
