"""An expert (minigrid's BabyAIBot) solves every task kind through our HTTP interface.

The bot plans on an in-process mirror level (it needs the full grid); each of its actions
goes through ``BabyAITextEnv`` -> HTTP -> the server's own level, whose verifier decides
success. The mirror also checks that the server's observation text matches, step by step.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from minigrid.utils.baby_ai_bot import BabyAIBot

from speedrunner.benchmarks.babyai.config import TASK_KINDS
from speedrunner.benchmarks.babyai.env import BabyAITextEnv
from speedrunner.benchmarks.babyai.levels import MAX_STEPS, make_level
from speedrunner.benchmarks.babyai.server import BabyAIServer, start_in_thread
from speedrunner.benchmarks.babyai.text import ACTIONS, observe

SEEDS = range(20)


@pytest.fixture(scope="module")
def server() -> Iterator[BabyAIServer]:
    srv = start_in_thread()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize("kind", TASK_KINDS)
def test_bot_succeeds_through_http(server: BabyAIServer, kind: str) -> None:
    env = BabyAITextEnv(server.url)
    try:
        for seed in SEEDS:
            mirror = make_level(kind, seed)
            bot = BabyAIBot(mirror)
            obs = env.reset(kind, seed)
            assert env.instruction == f"Your goal is to {mirror.mission}"
            assert env.max_steps == MAX_STEPS[kind]
            assert obs.text == observe(mirror)[0]
            done, steps = False, 0
            while not done:
                action = int(bot.replan())
                assert action < len(ACTIONS), f"bot wanted non-primitive action {action}"
                result = env.step(ACTIONS[action])
                mirror.step(action)
                steps += 1
                assert result.observation.text == observe(mirror)[0]
                done = result.done
            assert env.success, f"{kind} seed {seed}: bot did not succeed in {steps} steps"
            assert result.info["success"] and result.info["steps"] == steps
            assert result.reward == pytest.approx(1 - 0.9 * steps / MAX_STEPS[kind])
            assert env.progress() == 1.0
    finally:
        env.close()
