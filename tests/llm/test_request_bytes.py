"""What goes over the wire is byte-identical to what the LLM layer sent before requests were
built as plain JSON (issue 10): OpenAI's and vLLM's prefix caches key on those bytes, and
cache keys of existing runs must still match so a resume replays instead of paying again.

The fixtures were recorded from the code before the change: ``llm_wire_bodies.json`` (one
call per provider and option) and ``llm_episode_bodies.json`` (a whole actor episode with
invalid answers, through vllm and gemini). The episode bodies were recorded again when the
actor's history changed on purpose (issue 29: a refused turn is shown as the model wrote it
with one line of feedback, a turn without a thought carries no made-up ``Thought: -``), and
the ``openai`` cases' length key is ``max_tokens`` now: their fake server is not OpenAI's API.
The episode bodies were recorded a third time when actor calls began to carry the actor's stop
sequences (``stop`` / ``stopSequences``): each new body is the old one's bytes with that one
field added, nothing else changed.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest

from speedrunner.core.benchmark import Budget, EpisodeSpec
from speedrunner.core.config.schema import ModelConfig
from speedrunner.core.llm import build_model
from speedrunner.core.llm.accounting import messages_digest
from speedrunner.core.llm.cache import request_hash
from speedrunner.core.llm.conversation import Conversation
from speedrunner.core.llm.types import Message
from speedrunner.core.method import Knowledge
from speedrunner.core.runtime.episode import EpisodeContext, run_episode
from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply
from tests.runtime.fakes import CounterEnv

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
WIRE = json.loads((FIXTURES / "llm_wire_bodies.json").read_text(encoding="utf-8"))
EPISODES = json.loads((FIXTURES / "llm_episode_bodies.json").read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
def _keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wire")
    monkeypatch.setenv("GEMINI_API_KEY", "wire-key")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("VLLM_API_KEY", raising=False)


def _model(server: FakeLLMServer, **config):
    base = (
        server.base_url.removesuffix("/v1") if config["provider"] == "gemini" else server.base_url
    )
    return build_model(
        ModelConfig(name="fake-model", base_url=base, max_attempts=1, **config), namespace="wire"
    )


@pytest.mark.parametrize("case", sorted(WIRE["cases"]))
def test_one_call_sends_the_same_bytes_and_credentials_as_before(case):
    recorded = WIRE["cases"][case]
    history = Conversation(Message(role, content) for role, content in WIRE["history"])
    with FakeLLMServer(model_name="fake-model") as server:
        _model(server, **recorded["config"]).complete(history, purpose="actor", call_id="c/0")
        (request,) = server.requests
    assert request.path == recorded["path"]
    assert request.raw.decode("utf-8") == recorded["body"]
    assert request.headers.get("content-type") == recorded["content_type"]
    assert request.headers.get("authorization") == recorded["authorization"]
    assert request.headers.get("x-goog-api-key") == recorded["api_key"]


ANSWERS = [
    "Thought: go up.\nAction: inc",
    "Action: jump",
    "I will think about it",
    "Thought: wait — ½\nAction: noop",
    "Action: dec",
    "Action: dec",
    "Action: NOOP",
    "Action: no",
    "Action: inc",
    "Action: inc",
    "Action: inc",
]


@pytest.mark.parametrize("provider", ["vllm", "gemini"])
def test_an_episode_sends_the_same_bytes_on_every_turn_as_before(provider):
    """The history is now grown turn by turn instead of re-rendered; the requests are not
    changed."""
    turn = {"n": 0}

    def answer(_body):
        turn["n"] += 1
        return Reply(text=ANSWERS[(turn["n"] - 1) % len(ANSWERS)])

    with FakeLLMServer(callback=answer, model_name="fake-model") as server:
        model = _model(server, provider=provider, sampling={"seed": 5})
        context = EpisodeContext(
            model, Knowledge(2, "Strategy guide", "Count carefully."), Budget(12, None, 600)
        )
        trajectory = run_episode(CounterEnv(), EpisodeSpec("train", 0, "count", 7), context)
        bodies = [r.raw for r in server.requests if r.method == "POST"]
    recorded = EPISODES[provider]
    assert trajectory.stop_reason == recorded["stop_reason"] and len(bodies) == recorded["calls"]
    assert [hashlib.sha256(b).hexdigest() for b in bodies] == recorded["sha256"]
    assert bodies[-1].decode("utf-8") == recorded["last"]


def _reference_request_hash(provider, model, messages, sampling, options):
    """The from-scratch definition every stored cache key was written with."""
    canonical = {
        "provider": provider,
        "model": model,
        "messages": [{"role": m.role, "content": m.content} for m in messages],
        "sampling": sampling,
        "options": options or {},
    }
    blob = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _random_text(rng: random.Random) -> str:
    alphabet = 'ab c\n\t"\\/é½✓\u2028\x00{}[],:'
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))


def test_cache_keys_and_log_digests_of_a_growing_conversation_match_the_from_scratch_definitions():
    rng = random.Random(4)
    conversation = Conversation()
    sampling = {"temperature": 0.7, "top_p": 1.0, "max_tokens": 512, "seed": None}
    options = {"enable_thinking": None, "thinking_level": "low"}
    for _ in range(60):
        conversation.append(Message(rng.choice(["system", "user", "assistant"]), _random_text(rng)))
        messages = list(conversation)
        expected = _reference_request_hash("vllm", "m", messages, sampling, options)
        assert (
            request_hash(
                provider="vllm",
                model="m",
                messages=conversation,
                sampling=sampling,
                options=options,
            )
            == expected
        )
        assert (
            request_hash(
                provider="vllm", model="m", messages=messages, sampling=sampling, options=options
            )
            == expected
        )
        assert messages_digest(conversation) == messages_digest(messages)
        assert conversation.input_bytes == sum(
            len(m.content.encode()) + len(m.role) for m in messages
        )
    assert request_hash(
        provider="p", model="m", messages=[], sampling={}, options=None
    ) == _reference_request_hash("p", "m", [], {}, None)


def test_a_growing_conversation_encodes_each_message_once():
    """O(new turn) per call in our code: the wire form of old messages is reused, not rebuilt."""
    encoded: list[str] = []

    def encode(m: Message) -> dict[str, str]:
        encoded.append(m.content)
        return {"role": m.role, "content": m.content}

    conversation = Conversation([Message("system", "s")])
    for i in range(50):
        conversation.extend([Message("user", f"o{i}"), Message("assistant", f"a{i}")])
        wire = conversation.mapped(encode)
        assert wire == [{"role": m.role, "content": m.content} for m in conversation]
    assert len(encoded) == len(conversation) == 101


def test_openai_requests_skip_the_sdks_per_message_transformation(monkeypatch):
    """``create`` runs every message through ``maybe_transform``: CPU that grows with history."""
    import openai.resources.chat.completions.completions as chat

    def forbidden(*args, **kwargs):
        raise AssertionError("chat.completions.create's transform was used")

    monkeypatch.setattr(chat, "maybe_transform", forbidden)
    with FakeLLMServer(model_name="fake-model") as server:
        completion = _model(server, provider="openai").complete(
            [Message("user", "hi")], purpose="actor", call_id="c"
        )
    assert completion.text == "ok"


def test_gemini_requests_convert_at_most_one_message_through_the_sdk_types(monkeypatch):
    import google.genai.models as genai_models

    converted = []
    original = genai_models._Content_to_mldev

    def counting(*args, **kwargs):
        converted.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(genai_models, "_Content_to_mldev", counting)
    per_call = []
    with FakeLLMServer(model_name="fake-model") as server:
        model = _model(server, provider="gemini")
        for n in (3, 301):
            history = [Message("system", "s")] + [
                Message("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(n)
            ]
            converted.clear()
            model.complete(history, purpose="actor", call_id=f"c{n}")
            per_call.append(len(converted))
            sent = json.loads(server.requests[-1].raw)
            assert [c["parts"][0]["text"] for c in sent["contents"]] == [
                m.content for m in history[1:]
            ]
    assert (
        per_call[0] == per_call[1] <= 2
    )  # the first message and the system instruction, whatever the history
