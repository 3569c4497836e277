"""Per-step time of our ScienceWorld text env relative to the raw package env, side by side.

Two JVMs with the same options: one behind ``ScienceWorldEnv`` (raw), one behind our
``ScienceWorldTextEnv``. Both play the gold action sequence of one test variation of
every t3/t4 subtask, alternating step by step so machine noise hits both alike; the
raw env's own ``step`` already fetches look, inventory, task and valid actions, which
our observation reuses. Target: ratio under 1.1.

    python benchmarks/scienceworld_step_overhead.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

from speedrunner.benchmarks.scienceworld.config import TASK_SETS, ScienceWorldConfig
from speedrunner.benchmarks.scienceworld.env import (
    ScienceWorldTextEnv,
    launch_simulator,
    stop_simulator,
)
from speedrunner.benchmarks.scienceworld.tasks import parse_task


def measure(repeats: int = 2, tasks: int | None = None) -> tuple[list[float], list[float], int]:
    """Per-step seconds of the raw env and of ours (alternating) on the gold paths of the
    first ``tasks`` t3/t4 subtasks (all by default), and the number of subtasks played."""
    config = ScienceWorldConfig()
    task_ids = [*TASK_SETS["t3"], *TASK_SETS["t4"]][:tasks]
    raw = launch_simulator(config.env_step_limit, config.jvm_options)
    ours = ScienceWorldTextEnv(simplification=config.simplification,
                               env_step_limit=config.env_step_limit,
                               jvm_options=config.jvm_options)
    raw_times: list[float] = []
    our_times: list[float] = []
    try:
        for _ in range(repeats):
            for task_id in task_ids:
                ref = parse_task(f"{task_id}/test", 0)
                raw.load(ref.task_name, ref.variation, config.simplification,
                         generateGoldPath=True)
                gold = raw.get_gold_action_sequence()
                raw.reset()
                ours.reset(str(ref), 0)
                for action in gold:
                    t0 = time.perf_counter()
                    _, _, raw_done, _ = raw.step(action)
                    t1 = time.perf_counter()
                    our_done = ours.step(action).done
                    t2 = time.perf_counter()
                    raw_times.append(t1 - t0)
                    our_times.append(t2 - t1)
                    if raw_done or our_done:
                        break
    finally:
        ours.close()
        stop_simulator(raw)
    return raw_times, our_times, len(task_ids)


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    raw_times, our_times, tasks = measure(args.repeats)
    raw_ms = 1000 * statistics.fmean(raw_times)
    our_ms = 1000 * statistics.fmean(our_times)
    print(f"steps: {len(raw_times)} (gold paths of {tasks} subtasks x {args.repeats})")
    print(f"raw ScienceWorldEnv.step:   {raw_ms:.2f} ms/step "
          f"(median {1000 * statistics.median(raw_times):.2f})")
    print(f"ScienceWorldTextEnv.step:   {our_ms:.2f} ms/step "
          f"(median {1000 * statistics.median(our_times):.2f})")
    print(f"ratio ours/raw: {our_ms / raw_ms:.3f} (target < 1.1)")


if __name__ == "__main__":
    main()
