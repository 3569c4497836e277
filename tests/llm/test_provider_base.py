"""Provider and model capabilities are declared on the ``Provider`` and ``Model`` bases with safe
defaults, and the wrapper, the pre-flight and the methods read them as attributes: a provider
written outside the package declares only ``call`` and what it supports."""

from __future__ import annotations

from pathlib import Path

import pytest

from speedrunner.core.config.schema import ModelConfig
from speedrunner.core.llm.build import PROVIDERS
from speedrunner.core.llm.cache import ResponseCache
from speedrunner.core.llm.client import ManagedModel
from speedrunner.core.llm.preflight import PROBE_LIMIT, probe_endpoint
from speedrunner.core.llm.provider import Provider, ProviderRequest, ProviderResult
from speedrunner.core.llm.types import Completion, Message, Model, ToolSpec, ToolUse, Usage
from speedrunner.core.registry import load_entry_point
from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply

TOOL = ToolSpec("noop", "Does nothing.", {"type": "object", "properties": {}})
LONG = ", ".join(["word"] * 60)


class PlainProvider(Provider):
    """A plug-in provider with only the required parts; it records what it is sent."""

    name = "plugin"

    def __init__(self, text: str = "Thought: t.\nAction: go") -> None:
        self.model = "plugin-model"
        self.endpoints = ["plugin://local"]
        self.text = text
        self.requests: list[ProviderRequest] = []

    def call(self, request: ProviderRequest) -> ProviderResult:
        self.requests.append(request)
        return ProviderResult(
            text=self.text,
            reasoning=None,
            usage=Usage(output=len(self.text.split())),
            finish_reason="stop",
        )


class ToolProvider(PlainProvider):
    """A plug-in provider that declares tools, stop sequences and its own length field."""

    supports_tools = True

    def accepts_stop(self) -> bool:
        return True

    def length_param(self, endpoint: str) -> str:
        return "max_new_tokens"

    def call(self, request: ProviderRequest) -> ProviderResult:
        result = super().call(request)
        if request.tools:
            return ProviderResult(
                text="",
                reasoning=None,
                usage=Usage(output=3),
                finish_reason="tool_calls",
                tool_calls=(ToolUse("c1", request.tools[0].name, "{}"),),
            )
        return result


def _model(provider: Provider, tmp_path: Path | None = None, **config) -> ManagedModel:
    cfg = ModelConfig(provider="vllm", base_url="http://unused", name="plugin-model", **config)
    cache = ResponseCache(tmp_path / "cache.sqlite") if tmp_path is not None else None
    return ManagedModel(cfg, provider, namespace="n", prices=None, cache=cache)


def test_a_plugin_provider_with_only_call_gets_the_safe_defaults(tmp_path: Path) -> None:
    provider = PlainProvider()
    assert (provider.supports_tools, provider.accepts_stop(), provider.length_param("x")) == (
        False,
        False,
        "max_tokens",
    )
    model = _model(provider, tmp_path, tool_protocol="native")
    assert (
        model.native_tools is False and model.sends_stop is False
    )  # native asked, but no tools here
    first = model.complete(
        [Message("user", "hi")], purpose="actor", call_id="c/0", stop=["\nObservation:"]
    )
    assert "stop" not in provider.requests[0].sampling and provider.requests[0].tools == ()
    again = model.complete(
        [Message("user", "hi")], purpose="actor", call_id="c/0", stop=["\nObservation:"]
    )
    assert (
        again.cached and again.text == first.text and len(provider.requests) == 1
    )  # on_replay's default
    with pytest.raises(ValueError, match="native_tools is false"):
        model.complete([Message("user", "hi")], purpose="actor", call_id="c/1", tools=[TOOL])


def test_a_plugin_provider_without_call_is_refused_when_built() -> None:
    class NoCall(Provider):
        name = "nocall"

    with pytest.raises(TypeError, match="call"):
        NoCall()  # type: ignore[abstract]


def test_declared_capabilities_reach_the_wrapper_and_the_preflight() -> None:
    provider = ToolProvider(LONG)
    model = _model(provider, tool_protocol="native")
    assert model.native_tools and model.sends_stop
    answer = model.complete(
        [Message("user", "hi")], purpose="inducer", call_id="c/0", tools=[TOOL], stop=["X"]
    )
    assert [c.name for c in answer.tool_calls] == ["noop"] and provider.requests[-1].sampling[
        "stop"
    ] == ["X"]

    config = ModelConfig(
        provider="vllm", base_url="http://unused", name="plugin-model", tool_protocol="native"
    )
    (warning,) = probe_endpoint(provider, "plugin://local", "model", config)
    assert f"asked for at most {PROBE_LIMIT} tokens (sent as max_new_tokens)" in warning
    assert [bool(r.tools) for r in provider.requests[-2:]] == [
        False,
        True,
    ]  # the tool probe went out too


def test_gemini_names_its_own_length_field_when_a_server_ignores_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from speedrunner.core.llm.provider_gemini import GeminiProvider

    monkeypatch.setenv("GEMINI_API_KEY", "fake-gemini")
    with FakeLLMServer(
        probe=lambda body: Reply(text=LONG, completion_tokens=60), model_name="g"
    ) as server:
        config = ModelConfig(provider="gemini", name="g", base_url=server.base_url, max_attempts=1)
        provider = GeminiProvider(config)
        (warning,) = probe_endpoint(provider, provider.endpoints[0], "model", config)
    assert "(sent as max_output_tokens)" in warning and "ignores max_output_tokens too" in warning


def test_every_shipped_provider_and_the_managed_model_subclass_the_bases() -> None:
    for name, target in PROVIDERS.items():
        assert issubclass(load_entry_point(target), Provider), name
    assert issubclass(ManagedModel, Model)

    class TextOnly(Model):
        def complete(self, messages, *, purpose, call_id, tools=None, **sampling) -> Completion:
            return Completion(text="ok")

    assert TextOnly().native_tools is False
