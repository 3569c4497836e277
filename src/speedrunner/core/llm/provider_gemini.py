"""Gemini through google-genai: ``Client(...).models.generate_content``.

System messages become ``system_instruction``; assistant turns become role ``model``.
Thought parts are captured (``include_thoughts``) when a thinking level is configured; Gemini
reports thoughts apart from candidates, and both are billed as output, so
``usage.output = candidates + thoughts``. The SDK's own retries are off (``attempts=1``).
``base_url`` (for tests: the fake server's root) goes through ``HttpOptions``.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from typing import Any

import httpx2
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as gt

from speedrunner.core.config.schema import ModelConfig
from speedrunner.core.llm.provider import (
    CallFailure,
    Provider,
    ProviderRequest,
    ProviderResult,
    parse_retry_after,
    require_api_key,
)
from speedrunner.core.llm.types import Message, ToolUse, Usage

__all__ = ["GeminiProvider"]

GEMINI_DEFAULT_URL = "https://generativelanguage.googleapis.com"
_FINISH = {"STOP": "stop", "MAX_TOKENS": "length"}


class GeminiProvider(Provider):
    """Gemini API (AI Studio keys: GOOGLE_API_KEY, else GEMINI_API_KEY, as google-genai reads
    them)."""

    name = "gemini"
    supports_tools = True

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.model = config.name
        # The SDK's own order: model.base_url, else GOOGLE_GEMINI_BASE_URL, else the public API;
        # the key from model.api_key_env, else GOOGLE_API_KEY, else GEMINI_API_KEY.
        url = config.base_url if isinstance(config.base_url, str) else None
        self.endpoints = [url or os.environ.get("GOOGLE_GEMINI_BASE_URL") or GEMINI_DEFAULT_URL]
        if config.api_key_env:
            self._api_key = require_api_key(config.api_key_env, self.name)
        else:
            self._api_key = require_api_key(
                "GOOGLE_API_KEY", self.name, fallbacks=("GEMINI_API_KEY",)
            )
        self._clients: dict[tuple[str, float], genai.Client] = {}
        self._lock = threading.Lock()

    def accepts_stop(self) -> bool:
        """``generationConfig.stopSequences`` (up to 5) on every Gemini model."""
        return True

    def length_param(self, endpoint: str) -> str:
        """Gemini's name for the output limit (``generationConfig.maxOutputTokens``)."""
        return "max_output_tokens"

    def _client(self, endpoint: str, timeout_s: float) -> genai.Client:
        with self._lock:
            key = (endpoint, timeout_s)
            client = self._clients.get(key)
            if client is None:
                options = gt.HttpOptions(
                    timeout=int(timeout_s * 1000),  # milliseconds
                    retry_options=gt.HttpRetryOptions(attempts=1),
                    base_url=None if endpoint == GEMINI_DEFAULT_URL else endpoint,
                )
                client = genai.Client(api_key=self._api_key, http_options=options)
                self._clients[key] = client
            return client

    def generate_config(
        self, request: ProviderRequest, contents: list[dict[str, Any]] | None = None
    ) -> gt.GenerateContentConfig:
        """Sampling always explicit; thinking level only when configured.

        ``contents`` (plain JSON, see ``call``) rides in ``http_options.extra_body``; automatic
        function calling is off: we run tools ourselves (native protocol), and its loop
        deep-copies the config (with the whole history in it) on every call.
        """
        s = request.sampling
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        thinking = None
        if self.config.thinking_level is not None:
            thinking = gt.ThinkingConfig(
                thinking_level=self.config.thinking_level.upper(), include_thoughts=True
            )
        return gt.GenerateContentConfig(
            system_instruction=system or None,
            temperature=s["temperature"],
            top_p=s["top_p"],
            max_output_tokens=s["max_tokens"],
            seed=s.get("seed"),
            stop_sequences=list(s["stop"]) if s.get("stop") else None,
            thinking_config=thinking,
            tools=[
                gt.Tool(
                    function_declarations=[
                        gt.FunctionDeclaration(
                            name=t.name,
                            description=t.description,
                            parameters_json_schema=t.parameters,
                        )
                        for t in request.tools
                    ]
                )
            ]
            if request.tools
            else None,
            automatic_function_calling=gt.AutomaticFunctionCallingConfig(disable=True),
            http_options=gt.HttpOptions(extra_body={"contents": contents}) if contents else None,
        )

    def call(self, request: ProviderRequest) -> ProviderResult:
        client = self._client(request.endpoint, request.timeout_s)
        # google-genai validates every message into its pydantic types and converts it back
        # to JSON: CPU under the GIL that grows with the history (~600 ms a call at 3,000
        # messages). So the SDK gets the first message only (it builds the rest of the body:
        # system instruction, generation config, URL, auth) and the documented
        # ``HttpOptions.extra_body`` puts the whole history, as plain JSON built once per
        # message, in its place; the bytes on the wire are what the SDK itself would send.
        contents = _merge_function_responses(
            [c for c in request.messages.mapped(_content) if c is not None]
        )
        try:
            resp = client.models.generate_content(
                model=self.model,
                contents=contents[:1],
                config=self.generate_config(request, contents),
            )
        except Exception as e:
            raise _translate(e, request.endpoint) from e
        text_parts: list[str] = []
        thought_parts: list[str] = []
        calls: list[ToolUse] = []
        finish: str | None = None
        if resp.candidates:
            cand = resp.candidates[0]
            if cand.finish_reason is not None:
                raw = getattr(cand.finish_reason, "value", str(cand.finish_reason))
                finish = _FINISH.get(raw, raw.lower())
            for part in (cand.content.parts or []) if cand.content else []:
                if part.function_call is not None:
                    calls.append(_tool_use(part, len(calls)))
                    continue
                if part.text is None:
                    continue
                (thought_parts if part.thought else text_parts).append(part.text)
        return ProviderResult(
            text="".join(text_parts).strip(),
            reasoning="\n\n".join(thought_parts) or None,
            usage=_usage(resp.usage_metadata),
            finish_reason="tool_calls" if calls and finish == "stop" else finish,
            tool_calls=tuple(calls),
        )


def _content(m: Message) -> dict[str, Any] | None:
    """One message as Gemini's JSON ``Content`` (keys in the SDK's order); system: None.
    Native calls go back as ``functionCall`` parts (with their thought signature), a tool's
    result as a user ``functionResponse`` part."""
    if m.role == "system":
        return None
    if m.role == "tool":
        return {
            "parts": [
                {"functionResponse": {"name": m.tool_name or "", "response": {"result": m.content}}}
            ],
            "role": "user",
        }
    parts: list[dict[str, Any]] = [{"text": m.content}] if m.content or not m.tool_calls else []
    for t in m.tool_calls:
        part: dict[str, Any] = {"functionCall": {"args": _args(t.arguments), "name": t.name}}
        if t.signature:
            part["thoughtSignature"] = t.signature
        parts.append(part)
    return {"parts": parts, "role": "model" if m.role == "assistant" else "user"}


def _args(arguments: str) -> dict[str, Any]:
    """A call's arguments as the object Gemini wants back (a non-object was answered with
    feedback already; it goes back empty rather than failing the request)."""
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _merge_function_responses(contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The results of one turn's calls go back in one user content, as Gemini expects."""
    out: list[dict[str, Any]] = []
    for c in contents:
        if out and _is_response(c) and _is_response(out[-1]):
            out[-1] = {"parts": [*out[-1]["parts"], *c["parts"]], "role": "user"}
        else:
            out.append(c)
    return out


def _is_response(c: dict[str, Any]) -> bool:
    return c["role"] == "user" and all("functionResponse" in p for p in c["parts"])


def _tool_use(part: Any, index: int) -> ToolUse:
    fc = part.function_call
    signature = part.thought_signature
    return ToolUse(
        id=fc.id or f"call_{index}",
        name=fc.name or "",
        arguments=json.dumps(fc.args or {}, ensure_ascii=False),
        signature=base64.b64encode(signature).decode() if signature else "",
    )


def _usage(meta: Any) -> Usage:
    """prompt_token_count includes cached tokens; thoughts are billed as output."""
    if meta is None:
        return Usage()
    prompt = meta.prompt_token_count or 0
    cached = meta.cached_content_token_count or 0
    thoughts = meta.thoughts_token_count or 0
    return Usage(
        input_uncached=max(0, prompt - cached),
        input_cached=cached,
        output=(meta.candidates_token_count or 0) + thoughts,
        reasoning=thoughts,
    )


def _translate(e: Exception, endpoint: str) -> CallFailure:
    if isinstance(e, genai_errors.APIError):
        headers = getattr(getattr(e, "response", None), "headers", None) or {}
        return CallFailure(
            str(e),
            kind="http",
            endpoint=endpoint,
            status=e.code,
            retry_after=parse_retry_after(headers.get("retry-after")),
        )
    if isinstance(e, httpx2.TimeoutException):
        return CallFailure(f"timed out: {e}", kind="timeout", endpoint=endpoint)
    if isinstance(e, httpx2.TransportError):
        return CallFailure(f"connection failed: {e}", kind="connection", endpoint=endpoint)
    if isinstance(e, json.JSONDecodeError):
        return CallFailure(f"malformed response body: {e}", kind="malformed", endpoint=endpoint)
    raise e
