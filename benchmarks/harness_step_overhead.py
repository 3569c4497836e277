"""What one actor step costs beyond the env's own step and the LLM call, per benchmark.

    python benchmarks/harness_step_overhead.py [--turns 300]
        [--benchmarks babyai crafter scienceworld]

Plays real episodes through ``core.runtime.episode.run_episode`` with an instant in-process
fake model (it answers the next action of a fixed cycle; no LLM, no HTTP) and the
benchmark's real env. The model and the env are wrapped in timers, so each turn's harness
time is measured, not guessed: the interval from one model call's start to the next one's,
minus that turn's model call and its env steps. What remains is the runtime's own work —
rendering the history, parsing the answer, recording the step, the budget checks. For
BabyAI the env step includes its loopback HTTP round trip, so HTTP is excluded, as the
target says. Targets: median and p90 <= 0.5 ms (BabyAI), <= 1 ms (Crafter).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from perf_common import ACTIONS, CONFIGS, Row, fmt, quantile, table

from speedrunner.catalog import config_loader
from speedrunner.core.benchmark import Budget
from speedrunner.core.llm.types import Completion, Message, Usage
from speedrunner.core.method import Knowledge
from speedrunner.core.registry import load_entry_point
from speedrunner.core.runtime.episode import EpisodeContext, run_episode
from speedrunner.core.specs import BENCHMARKS

TARGETS_MS = {"babyai": 0.5, "crafter": 1.0, "scienceworld": None}
CONFIG_FILES = {
    "babyai": "babyai/react-gpt-seq.yaml",
    "crafter": "crafter/react-gpt-crafter.yaml",
    "scienceworld": "scienceworld/react-gpt-t4.yaml",
}
TURNS_PER_EPISODE = {"babyai": 30, "crafter": 300, "scienceworld": 100}
"""BabyAI and ScienceWorld: the protocol's LLM-call budgets; Crafter: a long episode."""
GUIDE = "Strategy guide: explore the room, remember what you saw, then act on the goal. " * 10


class InstantModel:
    """An instant fake actor (no LLM): the benchmark's action cycle, by turn. Timed."""

    def __init__(self, benchmark: str) -> None:
        self.cycle = ACTIONS[benchmark]
        self.calls: list[tuple[float, float]] = []

    def complete(
        self, messages: Sequence[Message], *, purpose: str, call_id: str, **_: Any
    ) -> Completion:
        started = time.perf_counter()
        turn = int(call_id.rsplit("/", 1)[1])
        completion = Completion(
            text=f"Thought: keep looking.\nAction: {self.cycle[turn % len(self.cycle)]}",
            usage=Usage(input_uncached=20, input_cached=80, output=10),
            provider="fake",
            model="instant",
            scripted=True,
            cost_usd=0.0,
        )
        self.calls.append((started, time.perf_counter()))
        return completion


class TimedEnv:
    """The benchmark's env, with each ``step`` timed (everything else passes through)."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.steps: list[tuple[float, float]] = []

    def step(self, action: str) -> Any:
        started = time.perf_counter()
        result = self.env.step(action)
        self.steps.append((started, time.perf_counter()))
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)


def turn_overheads(
    calls: list[tuple[float, float]], steps: list[tuple[float, float]]
) -> list[float]:
    """Per turn: next call's start - this call's start - this call - this turn's env steps."""
    out, j = [], 0
    for (start, end), (next_start, _) in zip(calls, calls[1:], strict=False):
        env = 0.0
        while j < len(steps) and steps[j][0] < next_start:
            if steps[j][0] >= start:
                env += steps[j][1] - steps[j][0]
            j += 1
        out.append(next_start - start - (end - start) - env)
    return out


def measure(benchmark_name: str, turns: int) -> tuple[list[float], float, int]:
    """Harness seconds per turn (all turns of all episodes), mean env step seconds, episodes."""
    loaded = config_loader().load(
        CONFIGS / CONFIG_FILES[benchmark_name], expect_benchmark=benchmark_name
    )
    config = loaded.config
    per_episode = min(turns, TURNS_PER_EPISODE[benchmark_name])
    episodes = max(1, -(-turns // per_episode))
    benchmark = load_entry_point(BENCHMARKS.get(benchmark_name).factory)(
        config.benchmark, rollouts=episodes, eval_episodes=0
    )
    overheads: list[float] = []
    env_times: list[float] = []
    env = TimedEnv(benchmark.make_env())
    try:
        for index in range(episodes):
            model = InstantModel(benchmark_name)
            env.steps = []
            ctx = EpisodeContext(
                model,
                Knowledge(1, "Strategy guide", GUIDE),
                Budget(per_episode, None, config.run.episode_wall_clock_s),
            )
            run_episode(env, benchmark.train_episode(config.run.seed, index), ctx)  # type: ignore[arg-type]
            overheads += turn_overheads(model.calls, env.steps)
            env_times += [e - s for s, e in env.steps]
    finally:
        env.env.close()
        benchmark.close()
    return overheads, sum(env_times) / max(1, len(env_times)), episodes


def rows(benchmarks: Sequence[str], turns: int) -> list[Row]:
    out = []
    for name in benchmarks:
        overheads, env_s, episodes = measure(name, turns)
        ms = [o * 1e3 for o in overheads]
        detail = f"{len(ms)} turns, {episodes} episode(s); env step {fmt(env_s * 1e3)} ms"
        target = TARGETS_MS[name]
        out.append(
            Row(
                f"1. harness per step, {name}, median",
                quantile(ms, 0.5),
                "ms",
                target,
                detail=detail,
            )
        )
        out.append(
            Row(f"1. harness per step, {name}, p90", quantile(ms, 0.9), "ms", target, detail=detail)
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300, help="actor turns per benchmark")
    parser.add_argument(
        "--benchmarks", nargs="+", default=list(TARGETS_MS), choices=list(TARGETS_MS)
    )
    args = parser.parse_args()
    print(table(rows(args.benchmarks, args.turns)))


if __name__ == "__main__":
    main()
