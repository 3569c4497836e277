"""Any OpenAI-compatible server (vLLM, SGLang, ...), one URL or several data-parallel replicas.

Replicas are listed in ``model.base_url``; the wrapper routes each call by a stable hash of
its ``call_id`` (the same call always starts on the same replica, which keeps the replica's
prefix cache warm for an episode's growing prompt) and moves to the next replica on retry.
"""

from __future__ import annotations

import os
from typing import Any

from speedrunner.core.config.schema import ModelConfig
from speedrunner.core.llm.provider import require_api_key
from speedrunner.core.llm.provider_openai import OpenAIChatProvider
from speedrunner.core.redact import register_secret

__all__ = ["VLLMProvider"]


class VLLMProvider(OpenAIChatProvider):
    """OpenAI-compatible chat completions on self-hosted servers; api_key "EMPTY" unless set."""

    name = "vllm"
    max_tokens_param = "max_tokens"

    def _endpoints(self, config: ModelConfig) -> list[str]:
        urls = (
            [config.base_url] if isinstance(config.base_url, str) else list(config.base_url or [])
        )
        return [u.rstrip("/") for u in urls]

    def _resolve_key(self, config: ModelConfig) -> str:
        if config.api_key_env:  # the user named a variable: it must exist
            return require_api_key(config.api_key_env, self.name)
        key = os.environ.get("VLLM_API_KEY") or "EMPTY"
        register_secret(key)
        return key

    def _extra_body(self) -> dict[str, Any] | None:
        """Qwen's thinking switch goes through the chat template, not a sampling field."""
        if self.config.enable_thinking is None:
            return None
        return {"chat_template_kwargs": {"enable_thinking": self.config.enable_thinking}}
