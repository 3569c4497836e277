"""What one LLM request costs on the client, as a function of the history it carries.

Side by side in one run, against the same local fake server (no network, no model):

1. For 30 / 300 / 3,000 messages and each provider (openai, vllm, gemini): the median
   client-side time of one call through our layer (``build_model(...).complete``, no cache, no log),
   called as the actor calls it (a ``Conversation`` grown by one turn per call, the turn's appending
   included), as a ratio to posting the same JSON over ``http.client`` and parsing the reply.
   Target: <= 1.5x at 300 and 3,000 messages. Also printed: the SDK's own request with a ready body
   (the floor under our layer), and how much of the growth from 300 to 3,000 messages our layer adds
   over raw (1.0x: a call costs what its bytes cost).
2. Throughput of 8 threads, each calling with a 1,000-message history, against a server that
   answers after 200 ms, as a multiple of one thread. Target: >= 6x (threads that serialise
   on CPU work under the GIL give ~1x).

    python benchmarks/llm_request_cost.py
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import statistics
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from openai.types.chat import ChatCompletion

from speedrunner.core.config.schema import ModelConfig
from speedrunner.core.llm import build_model
from speedrunner.core.llm.conversation import Conversation
from speedrunner.core.llm.provider import ProviderRequest
from speedrunner.core.llm.provider_gemini import _content
from speedrunner.core.llm.types import Message
from speedrunner.testing.fake_llm_server import FakeLLMServer

os.environ.setdefault("OPENAI_API_KEY", "sk-benchmark")
os.environ.setdefault("GEMINI_API_KEY", "benchmark-key")
SIZES = (30, 300, 3000)
PROVIDERS = ("openai", "vllm", "gemini")


def history(n: int) -> list[Message]:
    """A plausible actor conversation: a system prompt, then observation / answer turns."""
    messages = [Message("system", "You are an agent playing a text game. " * 5)]
    for i in range(n - 1):
        if i % 2 == 0:
            messages.append(
                Message(
                    "user",
                    f"Observation:\na wall 2 steps forward\na red ball 1 step left and {i} steps "
                    "forward",
                )
            )
        else:
            messages.append(
                Message(
                    "assistant", f"Thought: the ball is to the left, step {i}.\nAction: turn left"
                )
            )
    return messages


def raw_body(provider: str, messages: list[Message]) -> tuple[str, bytes]:
    if provider == "gemini":
        body = {
            "contents": [
                {
                    "role": "model" if m.role == "assistant" else "user",
                    "parts": [{"text": m.content}],
                }
                for m in messages
                if m.role != "system"
            ],
            "systemInstruction": {"parts": [{"text": messages[0].content}]},
            "generationConfig": {"temperature": 0.7, "topP": 1.0, "maxOutputTokens": 512},
        }
        return "/v1beta/models/fake-model:generateContent", json.dumps(body).encode()
    body = {
        "model": "fake-model",
        "messages": [{"role": m.role, "content": m.content} for m in messages],
        "max_tokens": 512,
        "temperature": 0.7,
        "top_p": 1.0,
    }
    return "/v1/chat/completions", json.dumps(body).encode()


def raw_caller(url: str, provider: str, messages: list[Message]) -> Callable[[], float]:
    """One timed raw call per invocation, on one kept-alive connection."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port)

    def call() -> float:
        started = time.perf_counter()
        path, data = raw_body(provider, messages)  # building the JSON is part of the cost
        conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        json.loads(conn.getresponse().read())
        return time.perf_counter() - started

    return call


def time_raw(url: str, provider: str, messages: list[Message], reps: int) -> float:
    call = raw_caller(url, provider, messages)
    return statistics.median(call() for _ in range(reps))


def model_for(provider: str, url: str):
    base = url if provider != "gemini" else url.removesuffix("/v1")
    return build_model(
        ModelConfig(provider=provider, name="fake-model", base_url=base, max_attempts=1),
        namespace="bench",
    )


def ours_caller(url: str, provider: str, messages: list[Message]) -> Callable[[], float]:
    """As the actor calls: a ``Conversation`` grown by one turn (two messages) per call."""
    model = model_for(provider, url)
    conversation = Conversation(messages[:-2])
    count = itertools.count()

    def call() -> float:
        started = time.perf_counter()
        conversation.extend(messages[-2:])  # this turn's answer and observation
        model.complete(conversation, purpose="actor", call_id=f"c/{next(count)}")
        return time.perf_counter() - started

    return call


def time_ours(url: str, provider: str, messages: list[Message], reps: int) -> float:
    call = ours_caller(url, provider, messages)
    return statistics.median(call() for _ in range(reps))


def time_sdk_floor(url: str, provider: str, messages: list[Message], reps: int) -> float:
    """The SDK's own request with a ready body (what no layer above it can avoid)."""
    model = model_for(provider, url)
    p = model.provider
    request = ProviderRequest(
        Conversation(messages), model.sampling_for({}), "actor", "floor", p.endpoints[0], 60.0
    )
    if provider == "gemini":
        client = p._client(p.endpoints[0], 60.0)
        contents = [c for c in request.messages.mapped(_content) if c is not None]
        config = p.generate_config(request, contents)

        def send() -> None:
            client.models.generate_content(model=p.model, contents=contents[:1], config=config)
    else:
        client = p._client(p.endpoints[0])
        body = p.request_body(request)

        def send() -> None:
            client.post(
                "/chat/completions",
                body=body,
                cast_to=ChatCompletion,
                options={"security": {"bearer_auth": True}},
            )

    send()
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        send()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def throughput(url: str, provider: str, threads: int, calls_each: int) -> float:
    messages = history(1000)
    model = model_for(provider, url)
    model.complete(messages, purpose="actor", call_id="warm")

    def worker(k: int) -> None:  # one episode: its own conversation, one turn per call
        conversation = Conversation(messages[:-2])
        for i in range(calls_each):
            conversation.extend(messages[-2:])
            model.complete(conversation, purpose="actor", call_id=f"t{k}/{i}")

    started = time.perf_counter()
    pool = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return threads * calls_each / (time.perf_counter() - started)


def measure_sizes(
    providers=PROVIDERS, sizes=SIZES, reps: int = 60, reps_large: int = 12
) -> dict[tuple[str, int], tuple[float, float, float]]:
    """Per (provider, messages): median seconds of ours, raw and the SDK floor."""
    out = {}
    with FakeLLMServer(model_name="fake-model") as server:
        for provider in providers:
            for n in sizes:
                messages = history(n)
                r = reps if n < 3000 else reps_large
                time_ours(server.base_url, provider, messages, 3)  # warm up connections and imports
                ours_call, raw_call = (
                    ours_caller(server.base_url, provider, messages),
                    raw_caller(server.base_url, provider, messages),
                )
                pairs = [
                    (ours_call(), raw_call()) for _ in range(r)
                ]  # alternating: noise hits both alike
                ours = statistics.median(o for o, _ in pairs)
                raw = statistics.median(w for _, w in pairs)
                floor = time_sdk_floor(server.base_url, provider, messages, r)
                out[(provider, n)] = (ours, raw, floor)
    return out


def measure_threads(
    providers=PROVIDERS, calls_each: int = 8, threads: int = 8
) -> dict[str, tuple[float, float]]:
    """Per provider: calls/s of one thread and of ``threads`` threads (1,000 messages,
    200 ms server)."""
    with FakeLLMServer(model_name="fake-model", latency_s=0.2) as slow:
        return {
            p: (
                throughput(slow.base_url, p, 1, calls_each),
                throughput(slow.base_url, p, threads, calls_each),
            )
            for p in providers
        }


def main() -> None:
    print(
        f"{'provider':8} {'messages':>8} {'ours ms':>9} {'raw ms':>8} {'ratio':>6}  "
        f"{'SDK floor ms':>12}  (target <= 1.5x at 300 and 3,000)"
    )
    times = measure_sizes()
    for (provider, n), (ours, raw, floor) in times.items():
        met = "" if n == 30 else ("met" if ours / raw <= 1.5 else "MISSED")
        print(
            f"{provider:8} {n:8d} {ours * 1e3:9.2f} {raw * 1e3:8.2f} {ours / raw:6.2f}  "
            f"{floor * 1e3:12.2f}  {met}"
        )
    growth = {}
    for provider in PROVIDERS:
        (o1, r1, _), (o2, r2, _) = times[(provider, 300)], times[(provider, 3000)]
        growth[provider] = (o2 - o1) / (r2 - r1)
    print()
    print(
        "cost of the history itself (300 -> 3,000 messages), ours as a multiple of raw: "
        + ", ".join(f"{p} {g:.2f}x" for p, g in growth.items())
    )
    print()
    print(
        f"{'provider':8} {'1 thread':>10} {'8 threads':>10} {'multiple':>9}  (1,000 messages, 200 "
        "ms server; target >= 6x)"
    )
    for provider, (one, eight) in measure_threads().items():
        met = "met" if eight / one >= 6 else "MISSED"
        print(f"{provider:8} {one:8.2f}/s {eight:8.2f}/s {eight / one:8.2f}x  {met}")


if __name__ == "__main__":
    main()
