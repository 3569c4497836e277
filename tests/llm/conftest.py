"""Fixtures for the LLM layer: a fake server per test, tiny backoff, a model factory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from speedrunner.core.config.schema import ModelConfig
from speedrunner.core.llm import Backoff, ManagedModel, build_model
from speedrunner.testing.fake_llm_server import FakeLLMServer

TINY = Backoff(initial_s=0.001, max_s=0.01, retry_after_cap_s=1.0)


@pytest.fixture(autouse=True)
def _fake_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never see real keys; the fake server accepts any."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    monkeypatch.setenv("GEMINI_API_KEY", "fake-gemini")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("VLLM_API_KEY", raising=False)


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv


ModelFactory = Callable[..., ManagedModel]


@pytest.fixture
def make_model(tmp_path: Path) -> Iterator[ModelFactory]:
    """build_model with a cache and call log in tmp_path; kwargs are ModelConfig fields."""
    built: list[ManagedModel] = []

    def factory(
        *, namespace: str = "run-1", backoff: Backoff = TINY, cache: bool = True, **config: Any
    ) -> ManagedModel:
        config.setdefault("max_attempts", 4)
        config.setdefault("timeout_s", 5.0)
        model = build_model(
            ModelConfig(**config),
            namespace=namespace,
            cache_path=tmp_path / "llm_cache.sqlite" if cache else None,
            calls_log_path=tmp_path / "llm_calls.jsonl",
            backoff=backoff,
        )
        built.append(model)
        return model

    yield factory
    for m in built:
        m.close()
