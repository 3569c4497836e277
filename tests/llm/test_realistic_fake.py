"""The realistic fake: clean answers the project's own parsers accept, variants at the asked
rate and of every kind, the same answer for the same prompt, and `speedrunner fake-llm`."""

from __future__ import annotations

import collections
import json
import os
import signal
import socket
import subprocess
import sys
import time

import openai
import pytest

from speedrunner.core.runtime.actor import parse_answer
from speedrunner.methods.voyager.critic import parse_critic_answer
from speedrunner.methods.wake_sleep.asi_parse import parse_induction
from speedrunner.methods.wake_sleep.speedrunner_native import tool_specs
from speedrunner.methods.wake_sleep.speedrunner_tools import TOOLS, parse_tool_call
from speedrunner.testing.realistic import TEXT_VARIANTS, RealisticFake

ACTIONS = ["turn left", "turn right", "go forward", "pick up"]
ACTOR_SYSTEM = (
    "You are an agent playing a text game. Each turn you see what happened and choose exactly "
    "one action."
)
INDUCER_SYSTEM = (
    "You maintain a codebook of reusable Python skills for an agent that plays a text game."
)
INDUCER_START = (
    "Sleep phase after batch 0.\n\nPrimitive actions: turn left, turn right, go forward\n"
)


def actor_body(i: int) -> dict:
    return {
        "model": "m",
        "max_tokens": 64,
        "messages": [
            {"role": "system", "content": ACTOR_SYSTEM},
            {
                "role": "user",
                "content": f"Available actions: {', '.join(ACTIONS)}\n\nGo to the red ball.\n\n"
                f"Observation:\nstep {i}",
            },
        ],
    }


def inducer_body(turn_results: list[str], tools: bool = False) -> dict:
    messages = [
        {"role": "system", "content": INDUCER_SYSTEM},
        {"role": "user", "content": INDUCER_START},
    ]
    for result in turn_results:
        messages += [{"role": "assistant", "content": "..."}, {"role": "user", "content": result}]
    body: dict = {"model": "m", "max_tokens": 2000, "messages": messages}
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in tool_specs(TOOLS)
        ]
    return body


def test_clean_answers_are_read_by_the_project_parsers():
    fake = RealisticFake(variants=0.0)
    for i in range(20):
        parsed = parse_answer(fake(actor_body(i)).text, ACTIONS)
        assert parsed.error is None and parsed.action in ACTIONS
    first = parse_tool_call(fake(inducer_body([])).text, set(TOOLS))
    add = parse_tool_call(fake(inducer_body(["Result of `view_codebook`: ..."])).text, set(TOOLS))
    done = parse_tool_call(
        fake(inducer_body(["...", "Accepted. Draft: public repeat_first_action_b0"])).text,
        set(TOOLS),
    )
    assert (first.tool, add.tool, done.tool) == ("view_codebook", "add_function", "submit")
    assert add.problem is None and "env.act('turn left')" in (add.block or "")
    # a lost add_function turn is tried again, as a model reading the feedback would
    assert (
        parse_tool_call(
            fake(inducer_body(["...", "Not run: no `Tool:` line"])).text, set(TOOLS)
        ).tool
        == "add_function"
    )


def test_clean_answers_of_the_other_prompts_are_read_by_their_parsers():
    fake = RealisticFake(variants=0.0)

    def ask(system: str, user: str) -> str:
        return fake(
            {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
        ).text

    episode = (
        "Primitive actions: turn left, go forward\n\nA successful episode:\n  step 0\n"
        "    action: go forward  -> ok\n  step 1\n    action: turn left  -> done\n"
    )
    induction = parse_induction(
        ask("You turn a successful episode into reusable Python skills.", episode)
    )
    assert induction.problem is None and induction.script == ["go forward", "turn left"]
    (function,) = induction.functions
    assert (
        function.name.startswith("repeat_first_action_")
        and "env.act('turn left')" in function.source
    )
    guide = ask("You improve a strategy guide for an agent.", "Current guide: ...")
    assert guide.startswith("<guide>") and guide.endswith("</guide>")
    verdict = parse_critic_answer(
        ask("You are an assistant that assesses my progress in Crafter.", "Task: x")
    )
    assert not isinstance(verdict, str)
    assert "\nTask: " in ask(
        "You tell me the next immediate task to do in Crafter.", "inventory: {}"
    )


def test_the_same_prompt_gets_the_same_answer_and_the_seed_changes_them():
    a, b, c = RealisticFake(0.5, seed=1), RealisticFake(0.5, seed=1), RealisticFake(0.5, seed=2)
    bodies = [actor_body(i) for i in range(30)]
    assert [a(x) for x in bodies] == [b(x) for x in reversed(bodies)][::-1]  # order does not matter
    assert [a(x).text for x in bodies] != [c(x).text for x in bodies]


def test_variants_come_at_the_asked_rate_and_every_kind_appears():
    fake = RealisticFake(variants=0.3, seed=0)
    replies = [fake(actor_body(i)) for i in range(600)]
    kinds = collections.Counter(k.split("/")[1] for k in fake.counts.elements())
    assert 0.25 < 1 - kinds["clean"] / 600 < 0.35
    assert set(TEXT_VARIANTS) <= set(kinds)
    cut = [r for r in replies if r.finish_reason == "length"]
    assert len(cut) == kinds["truncated"] and all(r.completion_tokens == 64 for r in cut)
    texts = {r.text for r in replies}
    assert any(t.startswith("<think>") for t in texts) and any(
        "**Action:**" in t or "### Action:" in t for t in texts
    )
    assert any(t.startswith("{") and "action" in json.loads(t) for t in texts)


def test_native_tool_calls_when_tools_are_offered():
    clean = RealisticFake(variants=0.0)(inducer_body(["..."], tools=True))
    (call,) = clean.tool_calls
    assert (
        call["name"] == "add_function"
        and "def repeat_first_action_b0" in json.loads(call["arguments"])["code"]
    )
    fake = RealisticFake(variants=1.0)
    for i in range(40):
        fake(inducer_body([f"r{i}"], tools=True))
    kinds = {k.split("/")[1] for k in fake.counts}
    assert {"as_text", "two_calls", "bad_arguments", "think"} <= kinds


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_fake_llm_command_serves_it_until_interrupted():
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "speedrunner.cli",
            "fake-llm",
            "--port",
            str(port),
            "--variants",
            "0",
            "--seed",
            "3",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        banner = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}/v1" in banner
        client = openai.OpenAI(
            base_url=f"http://127.0.0.1:{port}/v1", api_key="EMPTY", max_retries=0
        )
        body = actor_body(0)
        answer = client.chat.completions.create(
            model="fake-realistic", messages=body["messages"], max_tokens=64
        )
        assert parse_answer(answer.choices[0].message.content, ACTIONS).error is None
    finally:
        proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    assert proc.returncode == 130  # like every command stopped by Ctrl-C (errors.EXIT_CODES)


def test_a_bad_rate_is_refused():
    with pytest.raises(ValueError, match="between 0 and 1"):
        RealisticFake(variants=30)
