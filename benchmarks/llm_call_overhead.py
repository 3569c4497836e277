"""Per-call overhead of the LLM layer (retries + cache + accounting) against the fake server.

    python benchmarks/llm_call_overhead.py [--calls 300] [--threads 8]

Three numbers, all over loopback HTTP with a zero-latency fake server: the raw openai SDK
call, the same call through ``build_model`` (sha256, SQLite write, fsynced jsonl row,
semaphore), and a replay from the cache (no HTTP). The layer's overhead should be small
next to any real model's latency (hundreds of ms); replay should be well under 1 ms.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai

from speedrunner.core.config.schema import ModelConfig
from speedrunner.core.llm import Message, build_model
from speedrunner.testing.fake_llm_server import FakeLLMServer


def measure(calls: int = 300, threads: int = 8) -> tuple[float, float, float]:
    """Seconds per call: raw SDK (1 thread), managed and replayed (``threads`` threads,
    wall/call)."""
    msgs = [Message("system", "rules " * 200), Message("user", "observation")]
    with FakeLLMServer() as srv, tempfile.TemporaryDirectory() as tmp:
        client = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
        t0 = time.perf_counter()
        for _ in range(calls):
            client.chat.completions.create(model="q", messages=[{"role": "user", "content": "hi"}])
        raw = (time.perf_counter() - t0) / calls

        def run() -> float:
            model = build_model(
                ModelConfig(
                    provider="vllm", name="q", base_url=srv.base_url, max_concurrency=threads
                ),
                namespace="bench",
                cache_path=Path(tmp) / "c.sqlite",
                calls_log_path=Path(tmp) / "calls.jsonl",
            )
            t = time.perf_counter()
            with ThreadPoolExecutor(threads) as pool:
                list(
                    pool.map(
                        lambda i: model.complete(msgs, purpose="actor", call_id=f"c{i}"),
                        range(calls),
                    )
                )
            model.close()
            return (time.perf_counter() - t) / calls

        managed = run()
        replay = run()
    return raw, managed, replay


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--threads", type=int, default=8)
    args = ap.parse_args()
    raw, managed, replay = measure(args.calls, args.threads)
    print(f"raw SDK call (1 thread):             {raw * 1e3:7.2f} ms/call")
    print(f"managed call ({args.threads} threads, wall/call):  {managed * 1e3:7.2f} ms/call")
    print(f"replayed call ({args.threads} threads, wall/call): {replay * 1e3:7.2f} ms/call")


if __name__ == "__main__":
    main()
