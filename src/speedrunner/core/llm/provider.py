"""What a provider is: one API, one request in, one raw result out — nothing else.

Providers do no retries, no caching, no accounting: ``client.ManagedModel`` wraps every
provider once with those. A provider's only extra duty is to translate its SDK's failures
into :class:`CallFailure`, so the retry layer decides on a status code and a
``Retry-After`` value rather than on each SDK's exception zoo.
"""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from speedrunner.core.llm.conversation import Conversation
from speedrunner.core.llm.types import Purpose, ToolSpec, ToolUse, Usage
from speedrunner.core.redact import register_secret, scrub
from speedrunner.errors import MissingAPIKeyError

__all__ = [
    "CallFailure",
    "Provider",
    "ProviderRequest",
    "ProviderResult",
    "parse_retry_after",
    "require_api_key",
    "split_think",
]


@dataclass(frozen=True)
class ProviderRequest:
    """One attempt of one call, already routed to an endpoint by the wrapper."""

    messages: Conversation
    """The history; ``messages.mapped(encode)`` gives per-message wire forms, each built once."""
    sampling: dict[str, Any]
    """temperature, top_p, max_tokens and seed (None: unset) — always all of them — and
    ``stop`` (a list of strings) when the caller's stop sequences are sent."""
    purpose: Purpose
    call_id: str
    endpoint: str
    timeout_s: float
    tools: tuple[ToolSpec, ...] = ()
    """Native tools offered (empty: the text protocol); only sent to a provider whose
    ``supports_tools`` is true."""


@dataclass(frozen=True)
class ProviderResult:
    """What the API answered, normalised. ``usage.output`` includes ``usage.reasoning``."""

    text: str
    reasoning: str | None
    usage: Usage
    finish_reason: str | None
    extra: dict[str, Any] = field(default_factory=dict)
    tool_calls: tuple[ToolUse, ...] = ()


class CallFailure(Exception):
    """A failed attempt, normalised for the retry layer (internal; never escapes ``client``).

    ``status`` is the HTTP status when there was one; ``kind`` names what happened
    (``http``, ``timeout``, ``connection``, ``malformed``); ``retry_after`` is the server's
    ``Retry-After`` in seconds when it sent one.
    """

    RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        endpoint: str,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(scrub(message))  # a gateway may echo the key back in its error body
        self.kind = kind
        self.endpoint = scrub(endpoint)
        self.status = status
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        """429, 5xx, timeouts, dropped connections and garbled bodies are worth another try;
        400/401/403/404 (our request or our key is wrong) never are."""
        if self.kind in ("timeout", "connection", "malformed"):
            return True
        return self.status is not None and (
            self.status in self.RETRYABLE_STATUS or self.status >= 500
        )

    def describe(self) -> str:
        status = f"HTTP {self.status}" if self.status is not None else self.kind
        return f"{status} from {self.endpoint}: {self}"


class Provider(ABC):
    """One API. ``endpoints`` lists where calls may go (several for vLLM replicas).

    Subclass it: ``call`` is the one required method; the capabilities below default to
    the safe answer (no tools, no stop sequences, ``max_tokens``), so a provider written
    outside this package runs without declaring what it does not support."""

    name: str
    """The provider's name as logged and priced (``openai``, ``vllm``, ...)."""
    model: str
    """The model name as the API knows it."""
    endpoints: list[str]

    supports_tools: ClassVar[bool] = False
    """True: ``request.tools`` is sent and native tool calls come back; False: the wrapper
    only ever passes ``tools=()`` and methods use the text protocol."""

    def accepts_stop(self) -> bool:
        """Whether ``sampling["stop"]`` may be sent for this model and endpoint (default: no)."""
        return False

    def length_param(self, endpoint: str) -> str:
        """The request field ``max_tokens`` is sent as at ``endpoint`` (named in the
        pre-flight's warning when a server ignores it)."""
        return "max_tokens"

    @abstractmethod
    def call(self, request: ProviderRequest) -> ProviderResult:
        """One attempt; raises :class:`CallFailure` for what the retry layer should see."""

    def on_replay(self, purpose: Purpose, call_id: str) -> None:
        """Told when the wrapper answered a call from the cache (stateful scripts advance)."""
        return None


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds form; HTTP dates are ignored)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def require_api_key(env_var: str, provider: str, *, fallbacks: tuple[str, ...] = ()) -> str:
    """The key from ``env_var`` (or a fallback variable); a clear error saying what to do."""
    for var in (env_var, *fallbacks):
        key = os.environ.get(var)
        if key:
            register_secret(key)
            return key
    also = f" (or {', '.join(fallbacks)})" if fallbacks else ""
    raise MissingAPIKeyError(
        f"provider {provider!r} needs an API key in the environment variable {env_var}{also}, "
        f"which is not set. Either export {env_var}=..., point model.api_key_env at the "
        "variable that holds your key, or use provider 'vllm' (a local server, see "
        "scripts/run_server.sh) or provider 'scripted' (offline, no key)."
    )


_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.DOTALL)


def split_think(content: str) -> tuple[str, str | None]:
    """Move Qwen-style ``<think>...</think>`` blocks out of the answer.

    Reasoning must never re-enter the conversation, and the action parser must not see it.
    An unclosed ``<think>`` (truncated output) is all reasoning. A bare ``</think>`` without
    an opening tag (chat templates that pre-fill ``<think>``) splits there.
    """
    if "<think>" not in content and "</think>" in content:
        head, _, tail = content.partition("</think>")
        return tail.strip(), head.strip() or None
    parts = [m.group(1).strip() for m in _THINK.finditer(content)]
    if not parts:
        return content, None
    text = _THINK.sub("", content).strip()
    reasoning = "\n\n".join(p for p in parts if p)
    return text, reasoning or None
