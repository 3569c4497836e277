"""Per-step time of our Crafter text env relative to the raw simulator, side by side.

The raw step is ``crafter.Env.step`` as every Crafter agent calls it (it renders the
64x64 frame). Ours is ``CrafterTextEnv.step``: action-name lookup, the step without the
frame (but with the night-noise RNG draws the frame would make), and the text and
structured view. Both play the same seeded action script on the same world seeds,
alternating step by step so machine noise hits both alike. Target: ratio under 1.1.

    python benchmarks/crafter_step_overhead.py [--steps 3000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import crafter

from speedrunner.benchmarks.crafter.env import CrafterTextEnv, resolve_action
from speedrunner.benchmarks.crafter.text import ACTION_NAMES


def measure(steps: int = 3000) -> tuple[list[float], list[float], int]:
    """Per-step seconds of the raw env and of ours (alternating), and the worlds played."""
    rng = random.Random(0)
    weights = [1, 4, 4, 4, 4, 3, 1] + [1] * 10
    ours, raw_times, our_times, seed, taken = CrafterTextEnv(), [], [], 0, 0
    while taken < steps:
        raw = crafter.Env(seed=seed)
        raw.reset()
        raw.step(resolve_action("Noop"))  # what our reset plays (BALROG's hidden Noop)
        ours.reset("crafter", seed)
        done_raw = done_ours = False
        while not (done_raw or done_ours) and taken < steps:
            action = rng.choices(ACTION_NAMES, weights)[0]
            t0 = time.perf_counter()
            _, _, done_raw, _ = raw.step(resolve_action(action))
            t1 = time.perf_counter()
            done_ours = ours.step(action).done
            t2 = time.perf_counter()
            raw_times.append(t1 - t0)
            our_times.append(t2 - t1)
            taken += 1
        seed += 1
    return raw_times, our_times, seed


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    args = parser.parse_args()
    raw_times, our_times, worlds = measure(args.steps)
    raw_ms = 1000 * statistics.fmean(raw_times)
    our_ms = 1000 * statistics.fmean(our_times)
    print(f"steps: {len(raw_times)} over {worlds} worlds")
    print(
        f"raw crafter.Env.step (renders frame): {raw_ms:.3f} ms/step "
        f"(median {1000 * statistics.median(raw_times):.3f})"
    )
    print(
        f"CrafterTextEnv.step (text, no frame): {our_ms:.3f} ms/step "
        f"(median {1000 * statistics.median(our_times):.3f})"
    )
    print(f"ratio ours/raw: {our_ms / raw_ms:.3f} (target < 1.1)")


if __name__ == "__main__":
    main()
