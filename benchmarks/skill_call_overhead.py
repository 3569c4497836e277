"""Wall time of a 20-action skill call in the sandbox vs. the same 20 env steps taken directly.

    python benchmarks/skill_call_overhead.py [--repeats 200] [--tier auto]

On BabyAI (the level object itself: ``make_level`` + ``observe``, no HTTP) and Crafter
(``CrafterTextEnv``), each wrapped as the episode's ``step(action) -> {"text",
"structured", "done"}``. Each repetition plays the same 20 actions twice from the same
fresh state, once by calling ``step`` in a loop and once as one skill call through the
sandbox (one process reused by every call, as in an episode), alternating which goes
first; the ratio of the medians is the price of the sandbox. Target: under 1.5x.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from speedrunner.core.runtime.skill_call import SkillCall, Skills
from speedrunner.core.sandbox import open_skill_runner

Step = Callable[[str], dict[str, Any]]
SKILL = """
def play(env, actions):
    for action in actions:
        env.act(action)
    return env.done
"""
TARGET = 1.5
WARMUP = 5
"""Repetitions not counted: they warm up imports and caches on both sides."""


class BabyAI:
    """A fresh level per repetition (turns only, so 20 actions never end it)."""

    api = "speedrunner.benchmarks.babyai.skill_api"
    actions = ["turn left", "turn left", "turn right", "turn left", "turn right"] * 4

    def __init__(self) -> None:
        from speedrunner.benchmarks.babyai.levels import make_level
        from speedrunner.benchmarks.babyai.text import ACTION_INDEX, observe

        self._make, self._index, self._observe = make_level, ACTION_INDEX, observe

    def start(self, seed: int) -> tuple[Step, dict[str, Any]]:
        level = self._make("goto", seed)

        def step(action: str) -> dict[str, Any]:
            obs, _, terminated, truncated, _ = level.step(self._index[action])
            text, structured = self._observe(level, obs["image"])
            return {"text": text, "structured": structured, "done": bool(terminated or truncated)}

        text, structured = self._observe(level)
        return step, {"text": text, "structured": structured, "done": False}


class Crafter:
    """One world per side, played on (a reset builds a world, far slower than 20 steps)."""

    api = "speedrunner.benchmarks.crafter.skill_api"
    actions = ["Move West", "Move North", "Move East", "Move South", "Noop"] * 4

    def __init__(self) -> None:
        from speedrunner.benchmarks.crafter.env import CrafterTextEnv

        self._envs = [CrafterTextEnv(), CrafterTextEnv()]
        self._last: list[dict[str, Any] | None] = [None, None]

    def start(self, side: int) -> tuple[Step, dict[str, Any]]:
        env = self._envs[side]
        last = self._last[side]
        if last is None or last["done"]:
            first = env.reset("crafter", 0)
            last = {"text": first.text, "structured": first.structured, "done": False}

        def step(action: str) -> dict[str, Any]:
            result = env.step(action)
            self._last[side] = {
                "text": result.observation.text,
                "structured": result.observation.structured,
                "done": result.done,
            }
            return self._last[side]

        return step, last


BENCHMARKS = {"babyai": BabyAI, "crafter": Crafter}


def measure(name: str, repeats: int, tier: str) -> tuple[str, float, float, int]:
    bench = BENCHMARKS[name]()
    actions = bench.actions
    runner = open_skill_runner(
        Skills(1, SKILL, {"play": "play(actions: list[str]) -> bool"}, bench.api), tier=tier
    )
    call = SkillCall("play", [actions])
    times: tuple[list[float], list[float]] = ([], [])  # direct, sandboxed
    try:
        for i in range(WARMUP + repeats):
            pair = [0.0, 0.0]
            complete = (
                True  # a Crafter episode may end (the player dies): such pairs are not counted
            )
            for side in (0, 1) if i % 2 else (1, 0):
                step, observation = bench.start(i % 10 if name == "babyai" else side)
                started = time.perf_counter()
                if side == 0:
                    taken = 0
                    for action in actions:
                        taken += 1
                        if step(action)["done"]:
                            break
                    pair[0] = time.perf_counter() - started
                    complete = complete and taken == len(actions)
                else:
                    outcome = runner.call(
                        call,
                        step=step,
                        observation=observation,
                        max_actions=len(actions),
                        timeout_s=30,
                    )
                    pair[1] = time.perf_counter() - started
                    if outcome.stopped_by not in ("returned", "episode_done"):
                        raise RuntimeError(f"the skill call failed: {outcome}")
                    complete = (
                        complete
                        and len(outcome.tree["actions"]) == len(actions)
                        and not observation["done"]
                    )
            if i >= WARMUP and complete:
                times[0].append(pair[0])
                times[1].append(pair[1])
    finally:
        runner.close()
    if not times[0]:
        raise RuntimeError("no repetition played all its actions")
    return runner.tier, statistics.median(times[0]), statistics.median(times[1]), len(times[0])


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--tier", default="auto", help="auto, bwrap, unshare or rlimits")
    parser.add_argument(
        "--benchmarks", nargs="+", default=list(BENCHMARKS), choices=list(BENCHMARKS)
    )
    args = parser.parse_args()
    for name in args.benchmarks:
        tier, direct, sandboxed, pairs = measure(name, args.repeats, args.tier)
        ratio = sandboxed / direct
        print(
            f"{name:8s} tier={tier:8s} 20 direct steps {direct * 1e3:7.3f} ms   20-action skill "
            f"call {sandboxed * 1e3:7.3f} ms   ratio {ratio:4.2f}x  "
            f"(+{(sandboxed - direct) / 20 * 1e6:5.0f} us/action)  target < {TARGET}x: "
            f"{'OK' if ratio < TARGET else 'MISSED'}   (median of {pairs} pairs)"
        )


if __name__ == "__main__":
    main()
