"""Stop sequences: sent where the provider accepts them, part of the cache key, and the
actor reads an answer the same whether the server stopped there or wrote on (issue 29)."""

from __future__ import annotations

import pytest

from speedrunner.core.config.schema import ModelConfig
from speedrunner.core.llm import Message
from speedrunner.core.llm.build import make_provider
from speedrunner.core.runtime.actor import ACTOR_STOP
from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply

MSGS = [Message("system", "You play a game."), Message("user", "Observation:\nA wall.")]
STOP = list(ACTOR_STOP)
INVENTED = (
    "Thought: the door is ahead.\nAction: go forward\nObservation: You see a wall.\n"
    "Thought: turn.\nAction: turn left\nObservation: ..."
)


@pytest.mark.parametrize("provider", ["vllm", "openai"])
def test_an_openai_compatible_server_gets_the_stop_sequences_and_a_call_without_them_none(
    server, make_model, provider
):
    model = make_model(
        provider=provider, name="qwen2.5-coder-0.5b-instruct", base_url=server.base_url
    )
    with_stop = model.complete(MSGS, purpose="actor", call_id="a", stop=ACTOR_STOP)
    without = model.complete(MSGS, purpose="inducer", call_id="b")
    first, second = server.chat_requests()
    assert first["stop"] == STOP
    assert "stop" not in second
    assert with_stop.sampling["stop"] == STOP and "stop" not in without.sampling
    assert with_stop.request_hash != without.request_hash  # the stop is part of the cache key


def test_a_server_that_honours_stop_returns_the_models_own_turn_only(make_model):
    with FakeLLMServer([Reply(text=INVENTED, completion_tokens=40)], honour_stop=True) as srv:
        model = make_model(provider="vllm", name="q", base_url=srv.base_url)
        c = model.complete(MSGS, purpose="actor", call_id="a", stop=ACTOR_STOP)
    assert c.text == "Thought: the door is ahead.\nAction: go forward"
    assert c.finish_reason == "stop"


@pytest.mark.parametrize(
    ("base_url", "name", "sent"),
    [
        ("https://api.openai.com/v1", "gpt-5.4-mini", False),  # a reasoning model: HTTP 400 to stop
        ("https://api.openai.com/v1", "o4-mini", False),
        ("https://my-res.openai.azure.com/openai/v1", "o3", False),
        ("https://api.openai.com/v1", "gpt-4.1-mini", True),
        ("http://127.0.0.1:8765/v1", "gpt-5.4-mini", True),  # any compatible server takes it
    ],
)
def test_openai_sends_stop_only_where_the_model_accepts_it(base_url, name, sent):
    from speedrunner.core.llm.client import ManagedModel
    from speedrunner.core.llm.conversation import Conversation
    from speedrunner.core.llm.provider import ProviderRequest

    config = ModelConfig(provider="openai", name=name, base_url=base_url)
    model = ManagedModel(config, make_provider(config), namespace="n", prices=None)
    params = model.sampling_for({"stop": ACTOR_STOP})
    assert ("stop" in params) is sent
    body = model.provider.request_body(
        ProviderRequest(Conversation(MSGS), params, "actor", "c", base_url, 5.0)
    )
    assert ("stop" in body) is sent
    if not sent:  # nothing of the stop reaches the cache key either
        assert params == model.sampling_for({})


def test_thinking_switched_on_sends_no_stop(server, make_model):
    """Servers match stop sequences on the reasoning too: a cut thought is an answer with no
    action."""
    model = make_model(
        provider="vllm", name="Qwen/Qwen3.5-35B-A3B", base_url=server.base_url, enable_thinking=True
    )
    model.complete(MSGS, purpose="actor", call_id="a", stop=ACTOR_STOP)
    assert "stop" not in server.chat_requests()[0]


def test_gemini_gets_stop_sequences_in_its_generation_config(make_model):
    with FakeLLMServer([Reply(text=INVENTED)], honour_stop=True) as srv:
        model = make_model(provider="gemini", name="gemini-2.5-flash", base_url=srv.root_url)
        c = model.complete(MSGS, purpose="actor", call_id="g", stop=ACTOR_STOP)
        assert srv.requests[0].body["generationConfig"]["stopSequences"] == STOP
    assert c.text == "Thought: the door is ahead.\nAction: go forward"


def test_the_scripted_provider_gets_no_stop_and_keeps_its_cache_keys(make_model):
    model = make_model(provider="scripted", name="scripted-uniform")
    assert model.sampling_for({"stop": ACTOR_STOP}) == model.sampling_for({})


def test_a_resumed_run_replays_a_call_made_with_stop_and_pays_again_for_a_changed_one(
    server, make_model, tmp_path
):
    server.push(
        Reply(text="Thought: a\nAction: go forward"), Reply(text="Thought: b\nAction: turn left")
    )
    first = make_model(provider="vllm", name="q", base_url=server.base_url)
    paid = first.complete(MSGS, purpose="actor", call_id="ep0/actor/0000", stop=ACTOR_STOP)
    first.close()
    resumed = make_model(provider="vllm", name="q", base_url=server.base_url)
    again = resumed.complete(MSGS, purpose="actor", call_id="ep0/actor/0000", stop=ACTOR_STOP)
    assert again.cached and again.text == paid.text and len(server.chat_requests()) == 1
    changed = resumed.complete(
        MSGS, purpose="actor", call_id="ep0/actor/0000", stop=["\nObservation:"]
    )
    assert not changed.cached and len(server.chat_requests()) == 2


@pytest.mark.parametrize("stop", ["\nObservation:", ["a", "b", "c", "d", "e"], ["ok", ""], [3]])
def test_malformed_stop_sequences_are_refused(make_model, stop):
    model = make_model(provider="scripted", name="scripted-uniform")
    with pytest.raises(TypeError, match="stop must be a list of at most 4 non-empty strings"):
        model.sampling_for({"stop": stop})
