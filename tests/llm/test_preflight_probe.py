"""The pre-flight's tiny completion: an endpoint that ignores the length limit, or returns
tool calls as message content (llama-cpp-python's server does both), is named with its fix
before the run spends anything."""

from __future__ import annotations

import pytest

from speedrunner.core.config.schema import ModelConfig
from speedrunner.core.llm.preflight import PROBE_LIMIT, check_model_endpoints
from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply

COUNTING = ", ".join(
    ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"] * 6
)


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-probe")


def ignores_limit(body: dict) -> Reply:
    """A server that writes what it likes whatever limit was sent (as llama.cpp does with
    max_completion_tokens: asked for 5 tokens, 109 came back with finish 'stop')."""
    return Reply(text=COUNTING, finish_reason="stop", completion_tokens=109)


def honours_limit(body: dict) -> Reply:
    limit = body.get("max_tokens", body.get("max_completion_tokens"))
    return Reply(text="one, two, three, four", finish_reason="length", completion_tokens=limit)


def tool_as_content(body: dict) -> Reply:
    if body.get("tools"):
        return Reply(
            text='{"name": "get_time", "arguments": {}}', finish_reason="stop", completion_tokens=12
        )
    return honours_limit(body)


def config(server: FakeLLMServer, **kw) -> ModelConfig:
    return ModelConfig(name="fake-model", base_url=server.base_url, max_attempts=1, **kw)


@pytest.mark.parametrize("provider", ["openai", "vllm"])
def test_an_endpoint_that_ignores_the_length_limit_is_named_with_its_fix(provider):
    with FakeLLMServer(probe=ignores_limit, model_name="fake-model") as server:
        warnings = check_model_endpoints(config(server, provider=provider))
        (probe,) = [r.body for r in server.probes]
        assert server.chat_requests() == []  # kept apart from the requests a test counts
    assert (
        probe["max_tokens"] == PROBE_LIMIT
    )  # openai against a non-OpenAI host sends max_tokens too
    (warning,) = warnings
    assert f"ignored the length limit: asked for at most {PROBE_LIMIT} tokens" in warning
    assert "it wrote 109" in warning and "n_predict" in warning


def test_openai_s_own_length_key_ignored_names_the_vllm_provider(monkeypatch):
    from speedrunner.core.llm import provider_openai

    monkeypatch.setattr(
        provider_openai.OpenAIChatProvider, "length_param", lambda self, e: "max_completion_tokens"
    )
    with FakeLLMServer(probe=ignores_limit, model_name="fake-model") as server:
        (warning,) = check_model_endpoints(config(server, provider="openai"))
    assert "sent as max_completion_tokens" in warning and "set model.provider: vllm" in warning


def test_an_endpoint_that_honours_the_limit_gets_no_warning():
    with FakeLLMServer(probe=honours_limit, model_name="fake-model") as server:
        assert check_model_endpoints(config(server, provider="vllm")) == []
        assert check_model_endpoints(config(server, provider="vllm"), probe=False) == []


def test_native_tools_returned_as_content_are_named_with_the_setting_that_fixes_it():
    with FakeLLMServer(probe=tool_as_content, model_name="fake-model") as server:
        (warning,) = check_model_endpoints(
            config(server, provider="vllm", tool_protocol="native"), role="inducer"
        )
        assert (
            check_model_endpoints(config(server, provider="vllm")) == []
        )  # text protocol: not asked
    assert (
        "returned the tool call as message content" in warning
        and "inducer.tool_protocol: text" in warning
    )
