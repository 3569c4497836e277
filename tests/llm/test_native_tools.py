"""Native tool calls through each provider's real SDK against the fake server: what goes on
the wire (tool definitions, the assistant's calls, the tool results), what comes back, and
that cache, replay, cost bound and llm_calls.jsonl treat a tool turn like a text turn."""

from __future__ import annotations

import hashlib
import json

import pytest

from speedrunner.core.llm import Message
from speedrunner.core.llm.cache import request_hash
from speedrunner.core.llm.types import ToolSpec, ToolUse
from speedrunner.testing.fake_llm_server import Reply

TOOLS = (
    ToolSpec(
        "add_function",
        "Add a function.",
        {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
    ),
)
CODE = "def f(env) -> str:\n    return env.act('go forward')\n"
START = [
    Message("system", "You maintain a codebook."),
    Message("user", "Sleep phase after batch 0."),
]


def history(first: ToolUse) -> list[Message]:
    return [
        *START,
        Message("assistant", "Adding a skill.", tool_calls=(first,)),
        Message("tool", "Accepted.", tool_call_id=first.id, tool_name=first.name),
    ]


@pytest.mark.parametrize("provider", ["openai", "vllm"])
def test_openai_compatible_tool_calls_round_trip(server, make_model, provider):
    server.push(
        Reply(
            text="Adding a skill.",
            tool_calls=[{"name": "add_function", "arguments": {"code": CODE}}],
        ),
        Reply(text="done"),
    )
    model = make_model(
        provider=provider, name="m", base_url=server.base_url, tool_protocol="native"
    )
    assert model.native_tools
    c = model.complete(START, purpose="inducer", call_id="sleep/0000/inducer/0000", tools=TOOLS)
    assert c.finish_reason == "tool_calls" and c.text == "Adding a skill."
    assert [(t.id, t.name, json.loads(t.arguments)) for t in c.tool_calls] == [
        ("call_0", "add_function", {"code": CODE})
    ]
    model.complete(
        history(c.tool_calls[0]), purpose="inducer", call_id="sleep/0000/inducer/0001", tools=TOOLS
    )
    first, second = server.chat_requests()
    assert first["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "add_function",
                "description": "Add a function.",
                "parameters": TOOLS[0].parameters,
            },
        }
    ]
    assert second["messages"][2:] == [
        {
            "role": "assistant",
            "content": "Adding a skill.",
            "tool_calls": [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {"name": "add_function", "arguments": json.dumps({"code": CODE})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_0", "content": "Accepted."},
    ]


def test_gemini_function_calls_round_trip_with_thought_signature(server, make_model):
    server.push(
        Reply(text=None, tool_calls=[{"name": "add_function", "arguments": {"code": CODE}}]),
        Reply(text="done"),
    )
    model = make_model(
        provider="gemini", name="gemini-3-flash", base_url=server.root_url, tool_protocol="native"
    )
    c = model.complete(START, purpose="inducer", call_id="a", tools=TOOLS)
    assert c.finish_reason == "tool_calls" and c.text == ""
    (use,) = c.tool_calls
    assert (
        use.name == "add_function" and json.loads(use.arguments) == {"code": CODE} and use.signature
    )
    model.complete(history(use), purpose="inducer", call_id="b", tools=TOOLS)
    first, second = server.chat_requests()
    (decl,) = first["tools"][0]["functionDeclarations"]
    # the SDK writes the field in snake case (the API's JSON parser takes either spelling)
    schema = decl.get("parametersJsonSchema", decl.get("parameters_json_schema"))
    assert decl["name"] == "add_function" and schema == TOOLS[0].parameters
    assert second["contents"][1:] == [
        {
            "parts": [
                {"text": "Adding a skill."},
                {
                    "functionCall": {"args": {"code": CODE}, "name": "add_function"},
                    "thoughtSignature": use.signature,
                },
            ],
            "role": "model",
        },
        {
            "parts": [
                {"functionResponse": {"name": "add_function", "response": {"result": "Accepted."}}}
            ],
            "role": "user",
        },
    ]


def test_a_tool_turn_is_replayed_from_the_cache_and_logged_like_a_text_turn(
    server, make_model, tmp_path
):
    server.push(
        Reply(
            text="",
            tool_calls=[{"name": "add_function", "arguments": {"code": CODE}}],
            prompt_tokens=300,
            completion_tokens=40,
        )
    )
    kwargs = dict(
        provider="vllm",
        name="m",
        base_url=server.base_url,
        tool_protocol="native",
        prices={"input": 1.0, "cached_input": 0.1, "output": 2.0},
    )
    paid = make_model(**kwargs).complete(START, purpose="inducer", call_id="x", tools=TOOLS)
    again = make_model(**kwargs).complete(
        START, purpose="inducer", call_id="x", tools=TOOLS
    )  # a resumed run
    assert len(server.chat_requests()) == 1 and again.cached
    assert again.tool_calls == paid.tool_calls and again.finish_reason == "tool_calls"
    rows = [json.loads(line) for line in (tmp_path / "llm_calls.jsonl").read_text().splitlines()]
    assert [r["cache_hit"] for r in rows] == [False, True]
    assert all(
        r["tool_calls"]
        == [{"id": "call_0", "name": "add_function", "arguments": json.dumps({"code": CODE})}]
        and r["tools_offered"] == ["add_function"]
        for r in rows
    )
    assert rows[0]["empty"] is False  # a call with no text is an answer, not an empty one
    assert (
        rows[0]["spent_usd"] == pytest.approx((300 * 1.0 + 40 * 2.0) / 1e6)
        and rows[1]["spent_usd"] == 0.0
    )


def test_the_tool_definitions_are_part_of_the_cache_key_and_of_the_cost_bound(make_model, server):
    def h(tools=()):
        return request_hash(provider="vllm", model="m", messages=START, sampling={}, tools=tools)

    other = (ToolSpec("add_function", "Add one function.", TOOLS[0].parameters),)
    assert h() != h(TOOLS) != h(other)
    assert h() == request_hash(
        provider="vllm", model="m", messages=START, sampling={}
    )  # old keys still match
    model = make_model(
        provider="vllm",
        name="m",
        base_url=server.base_url,
        tool_protocol="native",
        prices={"input": 1.0, "cached_input": 0.1, "output": 2.0},
    )
    params = model.sampling_for({})
    assert model._max_cost(START, params, TOOLS) > model._max_cost(START, params)


def test_a_plain_message_hashes_as_before_and_tool_fields_change_the_hash():
    plain = request_hash(provider="p", model="m", messages=START, sampling={})
    before = {
        "messages": [{"role": m.role, "content": m.content} for m in START],
        "model": "m",
        "options": {},
        "provider": "p",
        "sampling": {},
    }  # the key every cache written before tool calls holds
    canonical = json.dumps(before, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert plain == hashlib.sha256(canonical.encode()).hexdigest()
    use = ToolUse("call_0", "add_function", "{}")
    a = request_hash(provider="p", model="m", messages=history(use), sampling={})
    b = request_hash(
        provider="p",
        model="m",
        messages=history(ToolUse("call_0", "add_function", '{"code": ""}')),
        sampling={},
    )
    assert a != b


def test_text_protocol_or_a_provider_without_tools_never_sends_tools(server, make_model):
    text = make_model(provider="vllm", name="m", base_url=server.base_url)
    scripted = make_model(provider="scripted", name="scripted", tool_protocol="native")
    assert not text.native_tools and not scripted.native_tools
    with pytest.raises(ValueError, match="native_tools is false"):
        text.complete(START, purpose="inducer", call_id="a", tools=TOOLS)
    text.complete(START, purpose="inducer", call_id="b")
    assert "tools" not in server.chat_requests()[0]
