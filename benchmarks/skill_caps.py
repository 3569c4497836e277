"""LLM calls per Crafter episode with a competent hand-written codebook: the protocol's
default per-call cap (the episode's remaining budget) against the old cap of 50 actions.

    python benchmarks/skill_caps.py [--episodes 10]
        [--config configs/crafter/speedrunner-gpt-crafter.yaml]

The codebook (``tests/fixtures/codebooks/crafter_keep_playing.py``, written by a person) is
installed through SpeedRunner's real sleep phase: a scripted inducer sends it as
``add_function`` edits, each validated and smoke-tested in the sandbox, then ``submit``.
The episodes are then played by the real wake path (``run_episode``, skill calls in the
sandbox) under the shipped config's budget (2,000 env actions) with a SCRIPTED actor (no
LLM) that answers ``keep_playing()`` every turn. Printed per setting: LLM calls per episode,
cap hits, env actions and achievements, and the wall time per env action.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the scripted inducer and actor live with the tests

from tests.e2e.caps_fakes import crafter_fake  # noqa: E402

from speedrunner.benchmarks.crafter.env import TASK, CrafterTextEnv  # noqa: E402
from speedrunner.catalog import config_loader  # noqa: E402
from speedrunner.core.benchmark import Budget, EpisodeSpec  # noqa: E402
from speedrunner.core.llm.types import Completion, Usage  # noqa: E402
from speedrunner.core.method import MethodContext  # noqa: E402
from speedrunner.core.runtime.episode import EpisodeContext, run_episode  # noqa: E402
from speedrunner.core.runtime.skill_support import build_skill_support  # noqa: E402
from speedrunner.core.seeding import episode_seed  # noqa: E402
from speedrunner.methods.wake_sleep.speedrunner import SpeedRunnerMethod  # noqa: E402


class Scripted:
    """The fake's answers as completions marked ``scripted`` (no LLM produced them)."""

    def __init__(self, fake) -> None:
        self.fake = fake

    def complete(self, messages, *, purpose, call_id, **sampling) -> Completion:
        reply = self.fake({"messages": [{"role": m.role, "content": m.content} for m in messages]})
        return Completion(
            text=reply.text,
            usage=Usage(0, 0, 0, 0),
            scripted=True,
            provider="scripted",
            model="scripted-caps",
            cost_usd=0.0,
        )


def install(config, run_dir: Path, model: Scripted):
    support = build_skill_support(config, CrafterTextEnv)
    method = SpeedRunnerMethod(
        config.method,
        MethodContext(run_dir=run_dir, inducer=model, benchmark="crafter", skills=support),
    )
    method.restore(0)
    method.sleep([], batch_index=0)
    knowledge = method.knowledge()
    assert knowledge.skills is not None and "keep_playing" in knowledge.skills.signatures, (
        "not installed"
    )
    return knowledge, support


def play(
    config, knowledge, support, model, episodes: int, max_skill_actions: int | None
) -> list[dict]:
    b = config.benchmark
    ctx = EpisodeContext(
        model,
        knowledge,
        Budget(b.max_llm_calls, b.max_env_actions, config.run.episode_wall_clock_s),
        0,
        open_skills=support.open_skills,
        max_skill_actions=max_skill_actions,
        skill_timeout_s=config.method.skill_timeout_s,
    )
    rows = []
    env = CrafterTextEnv()
    for i in range(episodes):
        started = time.monotonic()
        t = run_episode(env, EpisodeSpec("eval", i, TASK, episode_seed(0, "eval", i)), replace(ctx))
        rows.append(
            {
                "llm_calls": t.llm_calls,
                "env_actions": t.env_actions,
                "achievements": len(env.achievements),
                "cap_hits": t.cap_hits.get("max_skill_actions", 0),
                "timeouts": t.cap_hits.get("skill_timeout", 0),
                "stop": t.stop_reason,
                "s": time.monotonic() - started,
            }
        )
    env.close()
    return rows


def _mean(rows: list[dict], key: str) -> float:
    return statistics.fmean(r[key] for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument(
        "--config", default=str(REPO / "configs" / "crafter" / "speedrunner-gpt-crafter.yaml")
    )
    args = parser.parse_args()
    config = config_loader().load(args.config, expect_benchmark="crafter").config
    fake = crafter_fake()
    model = Scripted(fake)
    with tempfile.TemporaryDirectory() as tmp:
        knowledge, support = install(config, Path(tmp), model)
        print(
            f"SCRIPTED actor and inducer (no LLM); {args.episodes} Crafter episodes, budget "
            f"{config.benchmark.max_env_actions} env actions; "
            f"codebook generation {knowledge.version} "
            f"({len(knowledge.skills.signatures)} public skill) "
            f"installed by {len(fake.inducer.blocks)} add_function edits"
        )
        print(
            f"{'max_skill_actions':>18} {'LLM calls/ep':>12} {'<=2 calls':>9} {'cap hits/ep':>11} "
            f"{'timeouts':>8} "
            f"{'env actions/ep':>14} {'achievements':>12} {'ms/action':>9}"
        )
        for cap in (config.method.max_skill_actions, 50):
            rows = play(config, knowledge, support, model, args.episodes, cap)
            share = sum(r["llm_calls"] <= 2 for r in rows) / len(rows)
            ms = 1000 * sum(r["s"] for r in rows) / max(1, sum(r["env_actions"] for r in rows))
            label = "null (default)" if cap is None else str(cap)
            print(
                f"{label:>18} {_mean(rows, 'llm_calls'):>12.2f} {share:>9.0%} "
                f"{_mean(rows, 'cap_hits'):>11.2f} "
                f"{sum(r['timeouts'] for r in rows):>8} {_mean(rows, 'env_actions'):>14.1f} "
                f"{_mean(rows, 'achievements'):>12.2f} "
                f"{ms:>9.2f}"
            )


if __name__ == "__main__":
    main()
