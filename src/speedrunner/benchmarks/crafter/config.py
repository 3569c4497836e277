"""The ``benchmark`` section for Crafter (text observations, BALROG/SmartPlay style)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from speedrunner.core.config.schema import BenchmarkConfig


class CrafterConfig(BenchmarkConfig):
    name: Literal["crafter"] = "crafter"
    """Benchmark name."""
    task_set: Literal["crafter"] = "crafter"
    """Crafter has one task: unlock as many of the 22 achievements as possible."""
    max_env_actions: int | None = Field(2000, ge=1)
    """Per-episode budget of environment actions (the paper: 2,000)."""
    max_llm_calls: int | None = Field(4000, ge=1)
    """Safety cap on LLM calls: invalid answers take no env action, so without it a model that never
    answers validly would be paid until the wall clock ends the episode."""
    area: list[int] = Field(default_factory=lambda: [64, 64], min_length=2, max_length=2)
    """World size in cells."""
    length: int = Field(10000, ge=1)
    """Crafter's own episode length limit (the action budget usually ends episodes first)."""
