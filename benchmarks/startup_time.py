"""Start-up: from process start to the first LLM request of a BabyAI run.

    python benchmarks/startup_time.py [--repeats 3]

Runs the real entry point (``python -m speedrunner.benchmarks.babyai.train``, ReAct, a
one-episode run with preflight) as a subprocess against the fake LLM server, with a BabyAI
server already up, and takes the time from just before the process is spawned to the
moment the fake server receives the first chat-completion request (both on the system's
monotonic clock). The median of ``--repeats`` runs. Target: <= 1.5 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perf_common import CONFIGS, REPO, Row, clean_env, fake_actor, fake_model_overrides, fmt, table

from speedrunner.benchmarks.babyai.benchmark import ServerProcess, free_port
from speedrunner.testing.fake_llm_server import FakeLLMServer

TARGET_S = 1.5


def first_request_s(llm: FakeLLMServer, babyai_url: str, run_dir: Path) -> float:
    cmd = [
        sys.executable,
        "-m",
        "speedrunner.benchmarks.babyai.train",
        "--config_file",
        str(CONFIGS / "babyai" / "react-gpt-seq.yaml"),
        "--run_dir",
        str(run_dir),
        *[a for o in fake_model_overrides(llm.base_url) for a in ("--set", o)],
        "--set",
        f"benchmark.server_url={babyai_url}",
        "--set",
        "run.rollouts=1",
        "--set",
        "run.sleep_every=1",
        "--set",
        "run.eval_every=1",
        "--set",
        "run.eval_episodes=0",
        "--set",
        "benchmark.max_llm_calls=1",
    ]
    seen = len(llm.requests)
    started = time.monotonic()
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=120, cwd=REPO, env=clean_env()
    )
    if done.returncode != 0:
        raise RuntimeError(f"the train run failed ({done.returncode}):\n{done.stderr[-2000:]}")
    chats = [
        r.received_at
        for r in llm.requests[seen:]
        if r.method == "POST" and r.path.endswith("/chat/completions")
    ]
    if not chats:
        raise RuntimeError("the run made no chat-completion request")
    return min(chats) - started


def rows(repeats: int = 3) -> list[Row]:
    server = ServerProcess("127.0.0.1", free_port())
    server.start(timeout_s=60)
    try:
        with (
            FakeLLMServer(callback=fake_actor("babyai")) as llm,
            tempfile.TemporaryDirectory(prefix="perf-start-") as tmp,
        ):
            times = [
                first_request_s(llm, server.url, Path(tmp) / f"run{i}") for i in range(repeats)
            ]
    finally:
        server.stop()
    return [
        Row(
            "3. start-up to first LLM request, BabyAI",
            statistics.median(times),
            "s",
            TARGET_S,
            detail=f"median of {repeats} runs ({', '.join(fmt(t) for t in times)} s); server "
            "already up",
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(table(rows(args.repeats)))


if __name__ == "__main__":
    main()
