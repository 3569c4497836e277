"""``build_model``: the one place a ``ModelConfig`` becomes a callable, accounted ``Model``.

Providers are registered by entry-point string and imported on first use, so importing
``speedrunner.core.llm`` does not import the openai or google-genai SDKs.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from speedrunner.core.config.schema import ModelConfig
from speedrunner.core.llm.accounting import CallLog
from speedrunner.core.llm.cache import ResponseCache
from speedrunner.core.llm.client import ManagedModel
from speedrunner.core.llm.prices import resolve_prices
from speedrunner.core.llm.provider import Provider
from speedrunner.core.llm.retry import Backoff
from speedrunner.core.llm.spend_cap import SpendCap
from speedrunner.errors import UnknownNameError

__all__ = ["PROVIDERS", "build_model", "make_provider"]

PROVIDERS: dict[str, str] = {
    "openai": "speedrunner.core.llm.provider_openai:OpenAIChatProvider",
    "vllm": "speedrunner.core.llm.provider_vllm:VLLMProvider",
    "gemini": "speedrunner.core.llm.provider_gemini:GeminiProvider",
    "scripted": "speedrunner.core.llm.provider_scripted:ScriptedProvider",
}


def make_provider(config: ModelConfig) -> Provider:
    """The bare provider for ``config.provider`` (no retries, cache or accounting)."""
    target = PROVIDERS.get(config.provider)
    if target is None:
        raise UnknownNameError(
            f"unknown LLM provider {config.provider!r}; known: {', '.join(sorted(PROVIDERS))}"
        )
    module, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module), attr)
    provider: Provider = cls(config)
    return provider


def build_model(
    config: ModelConfig,
    *,
    namespace: str,
    cache_path: str | Path | None = None,
    calls_log_path: str | Path | None = None,
    backoff: Backoff | None = None,
    log_full_messages: bool = False,
    spend_cap: SpendCap | None = None,
) -> ManagedModel:
    """Provider + retries + cache/replay + accounting, wrapped once.

    ``namespace`` is the run id (replay only ever crosses resumes of the same run).
    ``cache_path`` is the SQLite file (None: no cache, no replay). ``calls_log_path`` is the
    run's ``llm_calls.jsonl`` (None: no log). ``backoff`` tunes retry waits (tests pass tiny
    values). ``log_full_messages`` puts every full prompt in the log (large: O(history^2)).
    ``spend_cap`` is the cap every paid call is checked against (``core.llm.spend_cap``).
    Raises ``MissingAPIKeyError`` here, at build time, rather than at the first call.
    """
    provider = make_provider(config)
    return ManagedModel(
        config,
        provider,
        namespace=namespace,
        prices=resolve_prices(config),
        cache=ResponseCache(cache_path) if cache_path is not None else None,
        calls_log=CallLog(calls_log_path) if calls_log_path is not None else None,
        backoff=backoff,
        log_full_messages=log_full_messages,
        spend_cap=spend_cap,
    )
