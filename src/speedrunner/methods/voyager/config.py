"""The ``method`` section of Voyager (Crafter only)."""

from __future__ import annotations

import os
import re
from typing import Literal

from pydantic import Field, field_validator

from speedrunner.core.config.schema import MethodConfig, Prices, Section, SkillCaps
from speedrunner.errors import ConfigError

WARMUP_FIELDS = ("nearby", "facing", "status", "achievements")
"""What the curriculum may be shown beyond the inventory and the task lists, in Voyager's
warm-up manner: each appears once this many tasks are completed."""


class EmbeddingConfig(Section):
    """An OpenAI-compatible ``/embeddings`` endpoint: OpenAI, a vLLM embedding model, or
    Gemini through its OpenAI-compatible base URL
    (``https://generativelanguage.googleapis.com/v1beta/openai/``)."""

    OPERATIONAL = frozenset({"base_url", "api_key_env", "timeout_s"})

    name: str = "text-embedding-3-small"
    """Embedding model name as the endpoint knows it (e.g. gemini-embedding-001)."""
    base_url: str | None = None
    """Endpoint URL; unset: OPENAI_BASE_URL, else the public OpenAI API."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the endpoint's key (GEMINI_API_KEY for Gemini; any set
    variable, e.g. one holding "EMPTY", for a local vLLM server)."""
    timeout_s: float = Field(60.0, gt=0)
    """Per-request timeout."""
    prices: Prices | None = None
    """USD per 1M input tokens (``input``; the others are ignored); null: cost unknown."""

    @field_validator("api_key_env")
    @classmethod
    def _env_var_name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v):
            raise ValueError(
                "api_key_env is the NAME of the environment variable that holds the key, "
                "never the key itself"
            )
        return v


class VoyagerConfig(MethodConfig):
    name: Literal["voyager"] = "voyager"
    """Voyager: curriculum + action agent + critic + skill retrieval (Crafter only)."""
    max_task_attempts: int = Field(4, ge=1)
    """Attempts per proposed task before the curriculum moves on."""
    retrieval_top_k: int = Field(5, ge=0)
    """Skills retrieved (by description similarity) into the action agent's prompt, and shown
    to the actor as callable actions in evaluation (k = min(#skills, this))."""
    max_iterations_per_world: int = Field(10, ge=1)
    """Iterations (curriculum -> skill -> critic) played in one training world before the next
    world starts, unless the world ends first (its env-action or LLM-call budget is spent, or
    the game is over). Bounds a world's LLM calls when its skills take few actions.
    This default binds harder than the Voyager paper, which plays all its iterations in one
    world with no such cap: a world whose 10 skills average under 200 actions ends before
    Crafter's 2,000 (``stop_reason`` ``iteration_end``). Each world it ends is counted as a
    ``max_iterations_per_world`` cap hit; set it to 2000 to let only the world's budgets end it."""
    max_skill_actions: int | None = Field(None, ge=1)
    """Cap on primitive actions one skill execution may take; null (default) = the world's
    remaining budget of env actions, the rule of the codebook methods: the Voyager paper fixes
    no action cap (its programs run until they return or time out)."""
    skill_timeout_s: float | None = Field(None, gt=0)
    """Wall-clock limit of one skill execution in the sandbox; null (default) = 60 s + 0.25 s per
    action it may take (its resolved action cap)."""
    curriculum_warmup: dict[str, int] = Field(
        default_factory=lambda: {"nearby": 0, "facing": 1, "status": 2, "achievements": 3}
    )
    """Completed tasks after which the curriculum prompt also shows each part of the state
    (nearby, facing, status, achievements); the inventory and task lists are always shown."""
    max_curriculum_asks: int = Field(3, ge=1)
    """Curriculum calls per proposal when the answer names no task (then the first achievement
    not yet completed is taken, and the record says so)."""
    max_critic_asks: int = Field(3, ge=1)
    """LLM critic calls per judgement when the answer is not the JSON asked for (then failure)."""
    embedding: EmbeddingConfig | None = None
    """Rank skill descriptions by embeddings from this endpoint; null: BM25 (local, no download)."""
    max_observation_chars: int = Field(3000, ge=200)
    """Cap on the observation and skill output shown to the critic and the action agent."""

    def check_runnable(self) -> None:
        """Before any run directory is made: the embedding endpoint's key is set."""
        if self.embedding is not None and not os.environ.get(self.embedding.api_key_env):
            raise ConfigError(
                f"method.embedding needs an API key in ${self.embedding.api_key_env} (for a local "
                "vLLM server any value, e.g. EMPTY); or remove method.embedding to rank with BM25"
            )

    def check_prices(self) -> None:
        """With a spending cap set: the embedding endpoint, which is paid too, has a price."""
        if self.embedding is not None and self.embedding.prices is None:
            raise ConfigError(
                f"a spending cap is set, but method.embedding {self.embedding.name!r} has no "
                "price; set method.embedding.prices (USD per 1M tokens), or remove "
                "method.embedding to rank with BM25"
            )

    def skill_caps(self) -> SkillCaps:
        return SkillCaps(
            max_skill_actions=self.max_skill_actions, skill_timeout_s=self.skill_timeout_s
        )

    @field_validator("curriculum_warmup")
    @classmethod
    def _known_parts(cls, v: dict[str, int]) -> dict[str, int]:
        unknown = sorted(set(v) - set(WARMUP_FIELDS))
        if unknown:
            raise ValueError(
                f"unknown curriculum_warmup parts {unknown}; known: {list(WARMUP_FIELDS)}"
            )
        if any(n < 0 for n in v.values()):
            raise ValueError("curriculum_warmup values are counts of completed tasks (>= 0)")
        return v
