"""Per-step cost of BabyAI-Text over loopback HTTP vs. the raw minigrid step, side by side.

    python benchmarks/babyai_step_overhead.py [--steps 3000] [--task pick_up_seq_go_to]

Plays the same seeded action stream three ways: raw ``level.step`` (minigrid only), raw step
plus our observation text, and ``BabyAITextEnv.step`` against a server subprocess on
127.0.0.1 (keep-alive HTTP, JSON both ways). Target: HTTP step under 2 ms.
"""

from __future__ import annotations

import argparse
import socket
import time
from collections.abc import Callable

import numpy as np

from speedrunner.benchmarks.babyai.benchmark import ServerProcess
from speedrunner.benchmarks.babyai.env import BabyAITextEnv
from speedrunner.benchmarks.babyai.levels import make_level
from speedrunner.benchmarks.babyai.text import ACTIONS, observe


def action_stream(n: int, seed: int = 0) -> list[int]:
    """Seeded random primitive actions (mostly moves, so episodes last)."""
    rng = np.random.default_rng(seed)
    return [int(a) for a in rng.choice(len(ACTIONS), size=n, p=[0.25, 0.25, 0.4, 0.04, 0.03, 0.03])]


def time_raw(task: str, actions: list[int], with_text: bool) -> float:
    level, episode, elapsed = make_level(task, 0), 0, 0.0
    for a in actions:
        t = time.perf_counter()
        obs, _, term, trunc, _ = level.step(a)
        if with_text:
            observe(level, obs["image"])
        elapsed += time.perf_counter() - t
        if term or trunc:
            episode += 1
            level = make_level(task, episode)
    return elapsed / len(actions)


def time_http(env: BabyAITextEnv, task: str, actions: list[int]) -> float:
    env.reset(task, 0)
    episode, elapsed = 0, 0.0
    for a in actions:
        t = time.perf_counter()
        done = env.step(ACTIONS[a]).done
        elapsed += time.perf_counter() - t
        if done:
            episode += 1
            env.reset(task, episode)
    return elapsed / len(actions)


def best_of(runs: int, fn: Callable[[], float]) -> float:
    return min(fn() for _ in range(runs))


def measure(
    steps: int = 3000, task: str = "pick_up_seq_go_to", repeats: int = 3
) -> tuple[float, float, float]:
    """Seconds per step, best of ``repeats``: raw minigrid, raw + our text, our env over HTTP."""
    actions = action_stream(steps)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ServerProcess("127.0.0.1", port)
    server.start(timeout_s=60)
    env = BabyAITextEnv(server.url)
    try:
        time_http(env, task, actions[:200])  # warm-up: connection, imports, caches
        raw = best_of(repeats, lambda: time_raw(task, actions, with_text=False))
        text = best_of(repeats, lambda: time_raw(task, actions, with_text=True))
        http = best_of(repeats, lambda: time_http(env, task, actions))
    finally:
        env.close()
        server.stop()
    return raw, text, http


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--task", default="pick_up_seq_go_to")
    parser.add_argument("--repeats", type=int, default=3, help="best of this many runs")
    args = parser.parse_args()
    raw, text, http = measure(args.steps, args.task, args.repeats)
    print(f"task={args.task} steps={args.steps} best of {args.repeats}")
    print(f"raw minigrid step         {raw * 1e3:8.3f} ms")
    print(f"raw step + our text       {text * 1e3:8.3f} ms   ({text / raw:5.1f}x raw)")
    print(
        f"HTTP step (loopback)      {http * 1e3:8.3f} ms   ({http / raw:5.1f}x raw)  "
        f"target < 2 ms: {'OK' if http < 2e-3 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
