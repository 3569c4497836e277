"""Same seed, same episode, in separate processes (the creature-balancing set-order trap)."""

from __future__ import annotations

import os
import subprocess
import sys

PLAY = r"""
import hashlib, random, sys
from speedrunner.benchmarks.crafter.env import CrafterTextEnv
from speedrunner.benchmarks.crafter.text import ACTION_NAMES

# Churn the heap so object addresses differ from the other process's.
junk = [object() for _ in range(int(sys.argv[1]))]
env, seed, steps, digest = CrafterTextEnv(area=(32, 32)), 100, 0, hashlib.sha256()
rng = random.Random(0)
# Mostly moving: the player wanders across chunks, so balancing spawns and despawns often.
weights = [1, 4, 4, 4, 4, 3, 1] + [1] * 10
while steps < 600:
    digest.update(env.reset("crafter", seed).text.encode())
    done = False
    while not done and steps < 600:
        res = env.step(rng.choices(ACTION_NAMES, weights)[0])
        digest.update(f"{res.observation.text}|{res.reward}|{res.done}".encode())
        done, steps = res.done, steps + 1
    seed += 1
print(steps, digest.hexdigest())
"""


def _start(junk: int, hash_seed: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    return subprocess.Popen(
        [sys.executable, "-c", PLAY, str(junk)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _result(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return out.strip()


def test_same_seed_same_texts_across_processes() -> None:
    """Two processes with different heaps and hash salts play 600 steps identically."""
    procs = [_start(0, "1"), _start(12345, "2")]  # concurrently: half the wall time
    first, second = (_result(p) for p in procs)
    assert first.startswith("600 ")
    assert first == second
