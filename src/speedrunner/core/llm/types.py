"""Data that crosses the LLM boundary. Providers return these; the runtime stores them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
Purpose = Literal["actor", "inducer", "guide", "curriculum", "critic", "description"]


@dataclass(frozen=True)
class ToolUse:
    """One native tool call the model made (OpenAI ``tool_calls``, Gemini ``functionCall``).

    ``arguments`` is the JSON text as the model wrote it — possibly not valid JSON: the method
    that reads it answers a bad one with feedback, so nothing is lost or guessed here.
    """

    id: str
    name: str
    arguments: str
    signature: str = ""
    """Gemini's ``thoughtSignature`` of the call (base64), sent back with it as Gemini 3
    requires."""


@dataclass(frozen=True)
class ToolSpec:
    """One tool offered to the model natively: a name, what it does, a JSON schema of its
    arguments. Sent as OpenAI ``tools`` / Gemini function declarations; part of the cache key."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class Message:
    """One chat message. ``tool_calls`` (assistant) and ``tool_call_id``/``tool_name`` (role
    ``tool``: a tool's result) are set only under the native tool protocol; a message without
    them is hashed, logged and sent exactly as before they existed."""

    role: Role
    content: str
    tool_calls: tuple[ToolUse, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None


@dataclass(frozen=True)
class Usage:
    """Token counts of one call. ``output`` includes ``reasoning`` (both are billed as output)."""

    input_uncached: int = 0
    input_cached: int = 0
    output: int = 0
    reasoning: int = 0

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
    tool_calls: tuple[ToolUse, ...] = ()
    """Native tool calls in this answer (empty under the text protocol); ``finish_reason`` is
    then usually ``"tool_calls"``."""


class Model(ABC):
    """What the runtime and methods call. ``call_id`` is stable across runs and resumes
    (e.g. ``"train/000012/actor/0003"``) so the response cache can replay it exactly.
    ``messages`` is any sequence; a ``Conversation`` grown turn by turn is the cheap one.
    Subclass it: ``complete`` is required, the capabilities have defaults."""

    @property
    def native_tools(self) -> bool:
        """Whether ``complete`` may be offered ``tools`` (native tool calls); methods that can
        use them check this and otherwise use the text protocol (default: no)."""
        return False

    @abstractmethod
    def complete(
        self,
        messages: Sequence[Message],
        *,
        purpose: Purpose,
        call_id: str,
        tools: Sequence[ToolSpec] | None = None,
        **sampling: Any,
    ) -> Completion: ...
