"""Data that crosses the LLM boundary. Providers return these; the runtime stores them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant"]
Purpose = Literal["actor", "inducer", "guide", "curriculum", "critic", "description"]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True)
class Usage:
    """Token counts of one call. ``output`` includes ``reasoning`` (both are billed as output)."""

    input_uncached: int = 0
    input_cached: int = 0
    output: int = 0
    reasoning: int = 0

    @property
    def input_total(self) -> int:
        return self.input_uncached + self.input_cached

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_uncached + other.input_uncached,
            self.input_cached + other.input_cached,
            self.output + other.output,
            self.reasoning + other.reasoning,
        )


@dataclass(frozen=True)
class Completion:
    """One finished model call.

    ``reasoning`` (Qwen ``<think>``, vLLM's reasoning field, Gemini thoughts) is kept apart
    from ``text`` and never goes back into a conversation. ``cost_usd`` is ``None`` when the
    model's price is unknown — never silently zero. ``scripted`` marks output that no LLM
    produced. ``cached`` is true when the response was replayed instead of paid for.
    """

    text: str
    reasoning: str | None = None
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    cached: bool = False
    finish_reason: str | None = None
    provider: str = ""
    model: str = ""
    scripted: bool = False
    cost_usd: float | None = None
    request_hash: str = ""
    sampling: dict[str, Any] = field(default_factory=dict)


class Model(Protocol):
    """What the runtime and methods call. ``call_id`` is stable across runs and resumes
    (e.g. ``"train/000012/actor/0003"``) so the response cache can replay it exactly.
    ``messages`` is any sequence; a ``Conversation`` grown turn by turn is the cheap one."""

    def complete(
        self,
        messages: Sequence[Message],
        *,
        purpose: Purpose,
        call_id: str,
        **sampling: Any,
    ) -> Completion: ...
