"""ScienceWorld t4 with a prompt-only primitive player, through the runtime's own episode loop.

    python benchmarks/scienceworld_actor.py [--episodes 20] [--seed 0]

Plays the run's first ``--episodes`` held-out t4 episodes (the shipped config's task set,
simplification, LLM-call budget) with ``speedrunner.testing.scienceworld_player``: a fake that
reads only the actor's prompt and types one command a turn. Prints success, LLM calls per
episode and answers the runtime refused. Run it on two checkouts to compare them (the
figures in docs/performance-scienceworld-actor.md were measured so). No LLM is called.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from speedrunner.benchmarks.scienceworld.benchmark import ScienceWorldBenchmark
from speedrunner.benchmarks.scienceworld.config import ScienceWorldConfig
from speedrunner.core.benchmark import Budget
from speedrunner.core.llm.types import Completion, Usage
from speedrunner.core.method import Knowledge
from speedrunner.core.runtime.episode import EpisodeContext, run_episode
from speedrunner.testing.scienceworld_player import next_action


class PlayerModel:
    """``next_action`` as a ``Model``: the answer is marked scripted, never an LLM's."""

    def complete(self, messages, *, purpose, call_id, tools=None, **sampling) -> Completion:  # noqa: ANN001
        action = next_action([{"role": m.role, "content": m.content} for m in messages])
        return Completion(
            text=f"Thought: next step of the plan.\nAction: {action}",
            usage=Usage(100, 10, 0, 0),
            scripted=True,
            provider="scripted",
            model="scienceworld_player",
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    config = ScienceWorldConfig(task_set="t4")  # as configs/scienceworld/*-t4.yaml: 100 LLM calls
    bench = ScienceWorldBenchmark(config, rollouts=200, eval_episodes=args.episodes)
    env = bench.make_env()
    ctx = EpisodeContext(
        model=PlayerModel(),
        knowledge=Knowledge(version=0),
        eval_point=0,
        budget=Budget(max_llm_calls=config.max_llm_calls, max_env_actions=None, wall_clock_s=600),
    )
    started = time.monotonic()
    rows = []
    try:
        for spec in bench.eval_episodes(args.seed):
            traj = run_episode(env, spec, ctx)
            refused = sum(s.error is not None for s in traj.steps)
            rows.append((traj.success, traj.llm_calls, refused))
            print(
                f"{spec.task:14s} success={int(traj.success)} calls={traj.llm_calls:3d} "
                f"refused={refused:3d} stop={traj.stop_reason}",
                flush=True,
            )
    finally:
        env.close()
    print(
        f"\n{len(rows)} held-out t4 episodes: success {statistics.mean(r[0] for r in rows):.2f}, "
        f"LLM calls/episode {statistics.mean(r[1] for r in rows):.1f}, answers refused "
        f"{sum(r[2] for r in rows)} ({time.monotonic() - started:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
