"""OpenAI chat completions, for the OpenAI API and for any OpenAI-compatible server (vLLM).

The two differ only in key handling, the name of the output-length parameter and extra
request fields, so ``provider_vllm`` subclasses this. The SDK's own retries are off
(``max_retries=0``): ``retry.py`` is the one retry layer.
"""

from __future__ import annotations

import json
import os
import re
import threading
from typing import Any
from urllib.parse import urlsplit

import openai
from openai.types.chat import ChatCompletion

from speedrunner.core.config.schema import ModelConfig
from speedrunner.core.llm.provider import (
    CallFailure,
    Provider,
    ProviderRequest,
    ProviderResult,
    parse_retry_after,
    require_api_key,
    split_think,
)
from speedrunner.core.llm.types import Message, ToolSpec, ToolUse, Usage

__all__ = ["OpenAIChatProvider", "translate_openai_error"]

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
_REASONING_MODEL = re.compile(r"(?:[a-z-]*/)?(?:o\d|gpt-5)")
"""OpenAI's reasoning models (``o3-mini``, ``gpt-5.4-mini``, ...): they refuse ``stop``."""


def translate_openai_error(e: Exception, endpoint: str) -> CallFailure:
    """Map an openai-SDK exception to a :class:`CallFailure` (status, kind, Retry-After)."""
    if isinstance(e, openai.APITimeoutError):
        return CallFailure(f"timed out: {e}", kind="timeout", endpoint=endpoint)
    if isinstance(e, openai.APIConnectionError):
        return CallFailure(f"connection failed: {e}", kind="connection", endpoint=endpoint)
    if isinstance(e, openai.APIStatusError):
        return CallFailure(
            str(e),
            kind="http",
            endpoint=endpoint,
            status=e.status_code,
            retry_after=parse_retry_after(e.response.headers.get("retry-after")),
        )
    if isinstance(e, json.JSONDecodeError | openai.APIResponseValidationError):
        return CallFailure(f"malformed response body: {e}", kind="malformed", endpoint=endpoint)
    raise e


class OpenAIChatProvider(Provider):
    """``POST {base_url}/chat/completions`` through the official openai SDK."""

    name = "openai"
    supports_tools = True
    #: OpenAI's reasoning models reject ``max_tokens``; OpenAI-compatible servers want it.
    max_tokens_param = "max_completion_tokens"

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.model = config.name
        self.endpoints = self._endpoints(config)
        self._api_key = self._resolve_key(config)
        self._clients: dict[str, openai.OpenAI] = {}
        self._lock = threading.Lock()

    # -- overridable by provider_vllm ----------------------------------------------------------
    def _endpoints(self, config: ModelConfig) -> list[str]:
        """``model.base_url``, else ``OPENAI_BASE_URL``, else the public API (the SDK's own
        order)."""
        url = config.base_url if isinstance(config.base_url, str) else None
        return [url or os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_URL]

    def _resolve_key(self, config: ModelConfig) -> str:
        return require_api_key(config.api_key_env or "OPENAI_API_KEY", self.name)

    def _extra_body(self) -> dict[str, Any] | None:
        return None

    def length_param(self, endpoint: str) -> str:
        """``max_completion_tokens`` for OpenAI's own API (its reasoning models reject
        ``max_tokens``); ``max_tokens`` for any other server the openai provider is pointed
        at: OpenAI-compatible servers (llama.cpp, older vLLM, ...) ignore the newer name, so
        the limit would silently be lost and truncation never detected."""
        if self.max_tokens_param != "max_completion_tokens":
            return self.max_tokens_param
        host = (urlsplit(endpoint).hostname or "").lower()
        official = host == "openai.com" or host.endswith((".openai.com", ".openai.azure.com"))
        return self.max_tokens_param if official else "max_tokens"

    def accepts_stop(self) -> bool:
        """``stop`` sequences are sent to any OpenAI-compatible server, and to OpenAI's own API
        except its reasoning models (o1, o3, o4-mini, gpt-5...), which refuse the request
        (HTTP 400, "Unsupported parameter: 'stop'")."""
        host = (urlsplit(self.endpoints[0]).hostname or "").lower()
        official = host == "openai.com" or host.endswith((".openai.com", ".openai.azure.com"))
        return not (official and _REASONING_MODEL.match(self.model.lower()))

    # -- the call -------------------------------------------------------------------------------
    def _client(self, endpoint: str) -> openai.OpenAI:
        """One SDK client per endpoint, shared by threads (the SDK client is thread-safe)."""
        with self._lock:
            client = self._clients.get(endpoint)
            if client is None:
                client = openai.OpenAI(
                    base_url=endpoint,
                    api_key=self._api_key,
                    max_retries=0,
                    timeout=self.config.timeout_s,
                )
                self._clients[endpoint] = client
            return client

    def request_body(self, request: ProviderRequest) -> dict[str, Any]:
        """The JSON body, key for key and in the order ``chat.completions.create`` sends it
        (the prefix caches of OpenAI and vLLM key on the bytes)."""
        s = request.sampling
        body: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages.mapped(_wire_message),
            self.length_param(request.endpoint): s["max_tokens"],
        }
        if s.get("seed") is not None:
            body["seed"] = s["seed"]
        if s.get("stop"):
            body["stop"] = list(s["stop"])
        body["temperature"] = s["temperature"]
        body["top_p"] = s["top_p"]
        if request.tools:
            body["tools"] = [_wire_tool(t) for t in request.tools]
        body.update(self._extra_body() or {})  # create() merges extra_body last, too
        return body

    def call(self, request: ProviderRequest) -> ProviderResult:
        client = self._client(request.endpoint)
        try:
            # ``client.post`` with ``cast_to`` is the SDK's public low-level call: it keeps
            # the SDK's auth, base URL and environment variables, errors and response types,
            # but skips ``create``'s per-message type transformation, which costs CPU (under
            # the GIL) that grows with the history: 120 ms at 300 messages against 8 ms.
            resp = client.post(
                "/chat/completions",
                body=self.request_body(request),
                cast_to=ChatCompletion,
                options={"timeout": request.timeout_s, "security": {"bearer_auth": True}},
            )
        except Exception as e:  # translated or re-raised unchanged (our own bugs)
            raise translate_openai_error(e, request.endpoint) from e
        if not resp.choices:
            raise CallFailure(
                "response has no choices", kind="malformed", endpoint=request.endpoint
            )
        choice = resp.choices[0]
        message = choice.message
        content = message.content or ""
        text, think = split_think(content)
        extra = message.model_extra or {}
        field_reasoning = extra.get("reasoning_content") or extra.get("reasoning")
        reasoning_parts = [r for r in (field_reasoning, think) if r]
        reasoning = "\n\n".join(reasoning_parts) if reasoning_parts else None
        return ProviderResult(
            text=text,
            reasoning=reasoning,
            usage=_usage(resp.usage),
            finish_reason=choice.finish_reason,
            tool_calls=_tool_uses(message.tool_calls),
        )


def _wire_message(m: Message) -> dict[str, Any]:
    """Chat format; an assistant turn's native calls go back as ``tool_calls`` and each
    result as a ``tool`` message naming its call, as the API requires."""
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content}
    if m.tool_calls:
        return {
            "role": "assistant",
            "content": m.content or None,
            "tool_calls": [
                {
                    "id": t.id,
                    "type": "function",
                    "function": {"name": t.name, "arguments": t.arguments},
                }
                for t in m.tool_calls
            ],
        }
    return {"role": m.role, "content": m.content}


def _wire_tool(t: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
    }


def _tool_uses(calls: Any) -> tuple[ToolUse, ...]:
    """The message's function calls (other kinds, e.g. custom tools, are not offered)."""
    out: list[ToolUse] = []
    for i, c in enumerate(calls or ()):
        fn = getattr(c, "function", None)
        if fn is None:
            continue
        out.append(
            ToolUse(id=c.id or f"call_{i}", name=fn.name or "", arguments=fn.arguments or "")
        )
    return tuple(out)


def _usage(u: Any) -> Usage:
    """OpenAI counts cached tokens inside prompt_tokens and reasoning inside completion_tokens."""
    if u is None:
        return Usage()
    prompt = u.prompt_tokens or 0
    details = getattr(u, "prompt_tokens_details", None)
    cached = (getattr(details, "cached_tokens", None) or 0) if details else 0
    out_details = getattr(u, "completion_tokens_details", None)
    reasoning = (getattr(out_details, "reasoning_tokens", None) or 0) if out_details else 0
    return Usage(
        input_uncached=max(0, prompt - cached),
        input_cached=cached,
        output=u.completion_tokens or 0,
        reasoning=reasoning,
    )
