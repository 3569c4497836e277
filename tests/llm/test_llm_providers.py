"""Each provider end to end against the fake server, with the real openai / google-genai SDKs."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from speedrunner.core.llm import Message
from speedrunner.core.llm.provider import split_think
from speedrunner.core.llm.provider_scripted import FALLBACK_TEXT, pick_action
from speedrunner.errors import ConfigError, LLMError, MissingAPIKeyError
from speedrunner.testing.fake_llm_server import FakeLLMServer, Reply

MSGS = [Message("system", "You play a game."), Message("user", "Where next?")]


def test_openai_provider_sends_explicit_sampling_and_parses_usage(server, make_model):
    server.push(
        Reply(
            text="go forward",
            prompt_tokens=100,
            cached_tokens=40,
            completion_tokens=30,
            reasoning_tokens=20,
        )
    )
    model = make_model(
        provider="openai",
        name="gpt-5.4-mini",
        base_url=server.base_url,
        sampling={"temperature": 0.3, "top_p": 0.9, "max_tokens": 77, "seed": 5},
    )
    c = model.complete(MSGS, purpose="actor", call_id="c1")
    body = server.chat_requests()[0]
    assert body["temperature"] == 0.3 and body["top_p"] == 0.9 and body["seed"] == 5
    # not OpenAI's own API: the length limit goes as max_tokens, which such servers honour
    assert body["max_tokens"] == 77 and "max_completion_tokens" not in body
    assert body["model"] == "gpt-5.4-mini"
    assert body["messages"] == [
        {"role": "system", "content": "You play a game."},
        {"role": "user", "content": "Where next?"},
    ]
    assert c.text == "go forward" and c.provider == "openai" and not c.cached and not c.scripted
    assert (c.usage.input_uncached, c.usage.input_cached, c.usage.output, c.usage.reasoning) == (
        60,
        40,
        30,
        20,
    )
    assert c.sampling == {"temperature": 0.3, "top_p": 0.9, "max_tokens": 77, "seed": 5}
    assert c.finish_reason == "stop"


def test_per_call_sampling_overrides_and_seed_omitted_when_unset(server, make_model):
    model = make_model(provider="vllm", name="qwen", base_url=server.base_url)
    c = model.complete(MSGS, purpose="actor", call_id="c1", temperature=0.0, max_tokens=12)
    body = server.chat_requests()[0]
    assert body["temperature"] == 0.0 and body["top_p"] == 1.0 and body["max_tokens"] == 12
    assert "seed" not in body
    assert c.sampling == {"temperature": 0.0, "top_p": 1.0, "max_tokens": 12, "seed": None}
    with pytest.raises(TypeError, match="unknown sampling"):
        model.complete(MSGS, purpose="actor", call_id="c2", temprature=0.1)


def test_vllm_think_block_and_reasoning_field_and_enable_thinking(server, make_model):
    server.push(
        Reply(text="<think>I should turn.</think>\nturn left"),
        Reply(text="pick up", reasoning="field reasoning", reasoning_field="reasoning_content"),
        Reply(text="drop", reasoning="newer field", reasoning_field="reasoning"),
    )
    model = make_model(
        provider="vllm",
        name="Qwen/Qwen3.5-35B-A3B",
        base_url=server.base_url,
        enable_thinking=False,
    )
    a = model.complete(MSGS, purpose="actor", call_id="a")
    b = model.complete(MSGS, purpose="actor", call_id="b")
    c = model.complete(MSGS, purpose="actor", call_id="c")
    assert (a.text, a.reasoning) == ("turn left", "I should turn.")
    assert (b.text, b.reasoning) == ("pick up", "field reasoning")
    assert (c.text, c.reasoning) == ("drop", "newer field")
    body = server.chat_requests()[0]
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["max_tokens"] == 4096
    assert server.requests[0].headers.get("authorization") == "Bearer EMPTY"


def test_split_think_edge_cases():
    assert split_think("plain") == ("plain", None)
    assert split_think("<think>cut off by length") == ("", "cut off by length")
    assert split_think("prefilled thought</think>answer") == ("answer", "prefilled thought")
    assert split_think("<think>a</think>x<think>b</think>y") == ("xy", "a\n\nb")


def test_vllm_spreads_calls_over_replicas_and_fails_over(make_model):
    with FakeLLMServer() as s1, FakeLLMServer() as s2, FakeLLMServer() as s3:
        model = make_model(
            provider="vllm", name="q", base_url=[s1.base_url, s2.base_url, s3.base_url]
        )
        for i in range(30):
            model.complete(MSGS, purpose="actor", call_id=f"ep/{i}")
        counts = [len(s.chat_requests()) for s in (s1, s2, s3)]
        assert sum(counts) == 30 and all(n > 0 for n in counts), counts
        # same call_id -> same replica (stable hash), so a repeat lands where the first went
        before = [len(s.chat_requests()) for s in (s1, s2, s3)]
        model2 = make_model(
            provider="vllm", name="q", base_url=[s1.base_url, s2.base_url, s3.base_url], cache=False
        )
        model2.complete(MSGS, purpose="actor", call_id="ep/0")
        model2.complete(MSGS, purpose="actor", call_id="ep/0")
        after = [len(s.chat_requests()) for s in (s1, s2, s3)]
        assert sorted(a - b for a, b in zip(after, before, strict=True)) == [0, 0, 2]
        # a replica that fails moves the retry to the next one
        first = next(s for s, a, b in zip((s1, s2, s3), after, before, strict=True) if a - b == 2)
        first.push(Reply.error(503))
        c = model2.complete(MSGS, purpose="actor", call_id="ep/0")
        assert c.text == "ok"


def test_gemini_provider_thoughts_usage_and_config(server, make_model):
    server.push(
        Reply(
            text="turn right",
            reasoning="let me think",
            prompt_tokens=50,
            cached_tokens=10,
            completion_tokens=7,
            reasoning_tokens=13,
        )
    )
    model = make_model(
        provider="gemini",
        name="gemini-3-flash-preview",
        base_url=server.root_url,
        thinking_level="low",
        sampling={"temperature": 0.2, "top_p": 0.8, "max_tokens": 99, "seed": 3},
    )
    msgs = [*MSGS, Message("assistant", "earlier"), Message("user", "again")]
    c = model.complete(msgs, purpose="actor", call_id="g1")
    assert (c.text, c.reasoning) == ("turn right", "let me think")
    assert (c.usage.input_uncached, c.usage.input_cached, c.usage.output, c.usage.reasoning) == (
        40,
        10,
        20,
        13,
    )
    req = server.requests[0]
    assert req.path.endswith("/models/gemini-3-flash-preview:generateContent")
    assert req.headers.get("x-goog-api-key") == "fake-gemini"
    body = req.body
    gen = body["generationConfig"]
    assert (gen["temperature"], gen["topP"], gen["maxOutputTokens"], gen["seed"]) == (
        0.2,
        0.8,
        99,
        3,
    )
    assert gen["thinkingConfig"]["thinking_level"] == "LOW"
    assert body["systemInstruction"]["parts"][0]["text"] == "You play a game."
    assert [x["role"] for x in body["contents"]] == ["user", "model", "user"]
    # price from the built-in table: 0.35 / 0.0875 / 1.05 per 1M
    assert c.cost_usd == pytest.approx((0.35 * 40 + 0.0875 * 10 + 1.05 * 20) / 1e6)


def test_gemini_retries_429_and_maps_max_tokens(server, make_model):
    server.push(
        Reply.rate_limited(0.01), Reply(text="", finish_reason="length", completion_tokens=0)
    )
    model = make_model(provider="gemini", name="gemini-3-flash-preview", base_url=server.root_url)
    c = model.complete(MSGS, purpose="actor", call_id="g")
    assert c.finish_reason == "length" and c.text == ""
    assert len(server.chat_requests()) == 2
    assert "thinkingConfig" not in server.chat_requests()[0]["generationConfig"]


def test_scripted_builtin_policy_is_deterministic(make_model):
    prompt = [
        Message("system", "Play.\nAvailable actions: turn left, turn right, go forward\n"),
        Message("user", "obs"),
    ]
    m1 = make_model(provider="scripted", name="demo", cache=False)
    m2 = make_model(provider="scripted", name="demo", cache=False)
    actions = {"turn left", "turn right", "go forward"}
    seen = set()
    for i in range(20):
        a = m1.complete(prompt, purpose="actor", call_id=f"x/{i}")
        b = m2.complete(prompt, purpose="actor", call_id=f"x/{i}")
        assert a.text == b.text and a.scripted and a.provider == "scripted" and a.cost_usd == 0.0
        action = a.text.splitlines()[-1].removeprefix("Action: ")
        assert action in actions
        seen.add(action)
    assert len(seen) > 1
    other = m1.complete([Message("user", "summarise the batch")], purpose="inducer", call_id="s")
    assert other.text == FALLBACK_TEXT


def test_scripted_builtin_policy_picks_from_the_conversations_latest_actions_line():
    """As the module says: the last ``Available actions:`` line wins (a later message's, and
    within a message its last); a message that mentions the label inside a sentence lists
    nothing, and the search goes on to the messages before it."""
    prompt = [
        Message("system", "Play.\nAvailable actions: turn left, turn right\n"),
        Message("user", "obs"),
    ]
    assert pick_action(prompt, "0") in {"turn left", "turn right"}
    later = [
        *prompt,
        Message("assistant", "Action: fly"),
        Message(
            "user", "Invalid.\nAvailable actions: open door\nAvailable actions: go west, go east\n"
        ),
        Message("user", "Nothing new; the Available actions: line above still holds."),
    ]
    assert {pick_action(later, str(i)) for i in range(20)} == {"go west", "go east"}
    assert pick_action([Message("user", "the Available actions: none here")], "0") is None


def test_scripted_script_list_is_indexed_by_trailing_call_number(tmp_path, make_model):
    script = tmp_path / "script.yaml"
    script.write_text("- first\n- second\n- third\n")
    model = make_model(provider="scripted", name="s", script=str(script), cache=False)

    def say(purpose: str, call_id: str) -> str:
        return model.complete(MSGS, purpose=purpose, call_id=call_id).text

    # every episode / sleep phase starts the list again; order of calls does not matter
    assert say("actor", "train/0012/actor/0001") == "second"
    assert say("actor", "train/0012/actor/0000") == "first"
    assert say("actor", "train/0013/actor/0000") == "first"
    assert say("actor", "eval/at0050/0007/actor/0002") == "third"
    assert say("inducer", "sleep/0004/inducer/0001") == "second"  # plain list: every purpose
    assert say("actor", "train/0012/actor/0009") == "third"  # past the end: last item repeats
    assert say("actor", "no-number") == "first"


def test_scripted_script_mapping_purposes_and_exact_call_ids(tmp_path, make_model):
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "actor": ["Action: go forward", "Action: turn left"],
                "guide": ["guide v1"],
                "train/0003/actor/0001": "Action: pick up",
            }
        )
    )
    model = make_model(provider="scripted", name="s", script=str(script), cache=False)

    def say(purpose: str, call_id: str) -> str:
        return model.complete(MSGS, purpose=purpose, call_id=call_id).text

    assert say("actor", "train/0003/actor/0000") == "Action: go forward"
    assert say("actor", "train/0003/actor/0001") == "Action: pick up"  # exact id wins
    assert say("actor", "train/0004/actor/0001") == "Action: turn left"
    assert say("guide", "sleep/0002/guide/0000") == "guide v1"
    with pytest.raises(LLMError, match="add a list under 'inducer'"):
        say("inducer", "sleep/0002/inducer/0000")


@pytest.mark.parametrize(
    "content",
    ["[]", "{}", "actor: go", "actr: [a, b]", "actor: [1, 2]", "- a\n- [b]\n", "42"],
)
def test_scripted_script_bad_shapes_are_config_errors(tmp_path, make_model, content):
    script = tmp_path / "bad.yaml"
    script.write_text(content)
    with pytest.raises(ConfigError, match="model.script"):
        make_model(provider="scripted", name="s", script=str(script), cache=False)


def test_scripted_script_answer_depends_on_call_id_not_order_or_threads(tmp_path, make_model):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"actor": [f"a{i}" for i in range(8)], "guide": ["g0", "g1"]}))
    ids = [(f"train/{e:04d}/actor/{k:04d}", "actor") for e in range(4) for k in range(10)]
    ids += [(f"sleep/{b:04d}/guide/{k:04d}", "guide") for b in range(3) for k in range(2)]

    serial = make_model(provider="scripted", name="s", script=str(script), cache=False)
    expected = {cid: serial.complete(MSGS, purpose=p, call_id=cid).text for cid, p in ids}
    assert expected["train/0002/actor/0005"] == "a5" and expected["train/0002/actor/0009"] == "a7"
    assert expected["sleep/0001/guide/0001"] == "g1"

    threaded = make_model(provider="scripted", name="s", script=str(script), cache=False)
    got: dict[str, str] = {}
    lock = threading.Lock()

    def worker(chunk: list[tuple[str, str]]) -> None:
        for cid, p in chunk:
            text = threaded.complete(MSGS, purpose=p, call_id=cid).text
            with lock:
                got[cid] = text

    shuffled = list(reversed(ids))
    threads = [threading.Thread(target=worker, args=(shuffled[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == expected


def test_missing_api_key_names_variable_and_alternatives(monkeypatch, make_model):
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(MissingAPIKeyError) as e:
        make_model(provider="openai", name="gpt-5.4-mini")
    msg = str(e.value)
    assert "OPENAI_API_KEY" in msg and "vllm" in msg and "scripted" in msg
    with pytest.raises(MissingAPIKeyError, match="MY_KEY"):
        make_model(
            provider="vllm", name="q", base_url="http://127.0.0.1:1/v1", api_key_env="MY_KEY"
        )
    monkeypatch.delenv("GEMINI_API_KEY")
    with pytest.raises(MissingAPIKeyError, match="GOOGLE_API_KEY.*GEMINI_API_KEY"):
        make_model(provider="gemini", name="gemini-3-flash-preview")


def test_api_key_env_override_is_sent(server, monkeypatch, make_model):
    monkeypatch.setenv("MY_KEY", "sk-mine")
    model = make_model(provider="openai", name="x", base_url=server.base_url, api_key_env="MY_KEY")
    model.complete(MSGS, purpose="actor", call_id="k")
    assert server.requests[0].headers.get("authorization") == "Bearer sk-mine"


def test_openai_base_url_from_the_environment_like_the_sdk(server, monkeypatch, make_model):
    """model.base_url > OPENAI_BASE_URL > the public API, the openai SDK's own order."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    model = make_model(provider="openai", name="gpt-5.4-mini")
    assert model.provider.endpoints == [server.base_url]
    model.complete(MSGS, purpose="actor", call_id="env-url")
    assert server.requests[-1].path.endswith("/chat/completions")

    with FakeLLMServer() as other:
        pinned = make_model(provider="openai", name="gpt-5.4-mini", base_url=other.base_url)
        pinned.complete(MSGS, purpose="actor", call_id="pinned")
        assert len(other.requests) == 1 and len(server.requests) == 1
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert make_model(provider="openai", name="gpt-5.4-mini").provider.endpoints == [
        "https://api.openai.com/v1"
    ]


def test_gemini_key_and_base_url_from_the_environment_like_the_sdk(server, monkeypatch, make_model):
    """GOOGLE_API_KEY wins over GEMINI_API_KEY and GOOGLE_GEMINI_BASE_URL is honoured, as in
    google-genai."""
    monkeypatch.setenv("GOOGLE_API_KEY", "google-key")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.base_url)
    model = make_model(provider="gemini", name="gemini-3-flash-preview")
    assert model.provider.endpoints == [server.base_url]
    model.complete(MSGS, purpose="actor", call_id="g")
    assert server.requests[-1].headers.get("x-goog-api-key") == "google-key"


def test_fake_server_lists_models(server):
    import openai

    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    assert [m.id for m in client.models.list()] == ["fake-model"]


def test_script_file_missing_is_named_error(tmp_path: Path, make_model):
    from speedrunner.errors import MissingFileError

    with pytest.raises(MissingFileError, match="nope.yaml"):
        make_model(provider="scripted", name="s", script=str(tmp_path / "nope.yaml"))


def test_gemini_timeout_and_500_are_retried(server, make_model):
    server.push(Reply.timeout(delay_s=1.5), Reply.error(500), Reply(text="late but fine"))
    model = make_model(
        provider="gemini", name="gemini-3-flash-preview", base_url=server.root_url, timeout_s=0.3
    )
    c = model.complete(MSGS, purpose="actor", call_id="gt")
    assert c.text == "late but fine" and len(server.chat_requests()) == 3


def test_openai_provider_sends_no_vllm_extras(server, make_model):
    model = make_model(provider="openai", name="gpt-5.4-mini", base_url=server.base_url)
    model.complete(MSGS, purpose="actor", call_id="x")
    body = server.chat_requests()[0]
    assert "chat_template_kwargs" not in body
    # Not OpenAI's own API: the length limit goes as max_tokens, which such servers honour
    # (issue: a server that ignores max_completion_tokens never reports truncation).
    assert "max_tokens" in body and "max_completion_tokens" not in body
    assert server.requests[0].headers.get("x-stainless-retry-count") == "0"


@pytest.mark.parametrize(
    ("endpoint", "param"),
    [
        ("https://api.openai.com/v1", "max_completion_tokens"),
        ("https://my-resource.openai.azure.com/openai/v1", "max_completion_tokens"),
        ("http://127.0.0.1:8000/v1", "max_tokens"),
        ("https://openai.com.example.net/v1", "max_tokens"),
    ],
)
def test_openai_provider_names_the_length_limit_its_endpoint_honours(endpoint, param):
    from speedrunner.core.llm.provider_openai import OpenAIChatProvider

    # length_param reads no instance state
    provider = OpenAIChatProvider.__new__(OpenAIChatProvider)
    assert provider.length_param(endpoint) == param
