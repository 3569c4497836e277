"""What a forecast holds, shared by the worst case, the typical case and their printing."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from speedrunner.core.config.schema import ModelConfig
from speedrunner.core.llm.context_windows import ContextBound

__all__ = [
    "PROMPT_TEMPLATE_BYTES",
    "Calls",
    "ContextUse",
    "Estimate",
    "MethodBounds",
    "PilotUse",
    "RoleEstimate",
]

PROMPT_TEMPLATE_BYTES = 8_000
"""Instructions of a sleep-phase prompt around what it shows (trajectories, guide, codebook)."""


@dataclass
class RoleEstimate:
    """One role's calls over the whole run, and their tokens and dollars."""

    role: str
    model: str
    calls_min: int
    calls_max: int
    input_tokens_max: int
    output_tokens_max: int
    usd_max: float | None
    """None: the model has no price."""
    per: str
    """What the counts are per before scaling (``episode``, ``batch``...), for the notes."""
    typical_calls: float | None = None
    typical_usd: float | None = None


@dataclass
class ContextUse:
    """Whether a model's calls were bounded by a context window, and by which."""

    model: str
    tokens: int | None
    """None: the window is unknown, so that model's worst case is unbounded."""
    origin: str | None
    """``flag`` (--context-tokens), ``config`` (model.context_tokens), ``table``, or None."""
    source: str = ""

    @classmethod
    def of(cls, model: str, bound: ContextBound | None) -> ContextUse:
        if bound is None:
            return cls(model, None, None)
        return cls(model, bound.tokens, bound.origin, bound.source)


@dataclass
class PilotUse:
    """One ``--from`` run as the typical case used it."""

    path: str
    models: list[str]
    label: str | None
    """``fake`` or ``scripted`` when its model is not an LLM (its tokens are not an LLM's)."""
    same_config: bool
    """The pilot's results fingerprint is this config's: nothing needed scaling."""
    scaled: list[str] = field(default_factory=list)
    """What was scaled to this config, in words."""
    not_scaled: list[str] = field(default_factory=list)
    """Settings that differ and that the typical case assumes change nothing."""


@dataclass
class Estimate:
    config: str
    roles: list[RoleEstimate]
    assumptions: list[str] = field(default_factory=list)
    unknown_prices: list[str] = field(default_factory=list)
    wall_s_min: float = 0.0
    wall_s_max: float = 0.0
    latency_s: float = 0.0
    typical_from: list[str] = field(default_factory=list)
    context_windows: list[ContextUse] = field(default_factory=list)
    pilots: list[PilotUse] = field(default_factory=list)

    @property
    def usd_max(self) -> float | None:
        parts = [r.usd_max for r in self.roles]
        return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)

    @property
    def typical_usd(self) -> float | None:
        parts = [r.typical_usd for r in self.roles if r.typical_calls is not None]
        if not parts or any(p is None for p in parts):
            return None
        return sum(p for p in parts if p is not None)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "usd_max": self.usd_max, "typical_usd": self.typical_usd}


@dataclass(frozen=True)
class Calls:
    """Calls of one role in one unit (an episode, a batch), with their worst-case tokens."""

    role: str
    model: ModelConfig
    per_unit_min: int
    per_unit_max: int
    units: int
    unit: str
    first_input: int
    """Worst-case input tokens of the unit's first call."""
    growth: int
    """Worst-case input tokens each further call of the unit adds (its history)."""
    context: ContextBound | None = None
    """The window no call's input exceeds (None: unknown, unbounded)."""


@dataclass
class MethodBounds:
    """What a method adds to a run's worst case, as its ``MethodSpec.cost_bounds`` declares it."""

    knowledge_bytes: int
    """The most knowledge the actor's prompt shows (guide, codebook API, notes), in bytes."""
    sleep: list[Calls] = field(default_factory=list)
    """The method's own calls (sleep phases, or its own training phase)."""
    actor_plays_training: bool = True
    """The actor plays the training episodes (``False``: the method has its own training phase)."""
    episodes_end_early: bool = False
    """Skills can end an episode in fewer actor calls than its budget (the minimum is one)."""
    notes: list[str] = field(default_factory=list)
    """Assumptions behind these bounds, printed with the table."""
