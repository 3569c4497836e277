"""When a sleep starts, the loop asks for the skill sandboxes of the episodes the next phase
starts at once (``SkillSupport.prepare``), so they boot while the sleep waits for its model."""

from __future__ import annotations

import pytest

from speedrunner.core.config.schema import BenchmarkConfig, RunConfig, RunSection
from speedrunner.core.method import SkillSupport
from speedrunner.core.runtime.loop import Runner
from speedrunner.core.trajectory import ReplayResult
from speedrunner.methods.wake_sleep.configs import ReactConfig

from .fakes import CounterBenchmark, PolicyModel
from .test_skill_metrics import NestedRunner, SkillMethod, policy


@pytest.mark.parametrize(
    ("run", "asked"),
    [
        # batch 0 plays generation 0 (no skills): nothing; before batch 1's sleep the next phase is
        # the wake of batch 2 (2 at once); before batch 2's, the final evaluation (3 at once)
        ({"eval_every": 6, "parallel_episodes": "all"}, [2, 3]),
        ({"eval_every": 4, "parallel_episodes": "all"}, [3, 3]),  # evaluations at 4 and at the end
        ({"eval_every": 6, "parallel_episodes": 2}, [2, 2]),  # at most what starts at once
        (
            {"eval_every": 6, "eval_episodes": 0, "parallel_episodes": "all"},
            [2],
        ),  # no final evaluation
    ],
)
def test_each_sleep_with_skills_prepares_the_next_phases_sandboxes(
    tmp_path, run: dict, asked: list[int]
) -> None:
    prepared: list[int] = []
    support = SkillSupport(
        api_module="counter_api",
        api_names=(),
        primitives=("inc", "dec", "noop"),
        open_skills=lambda skills: NestedRunner(),
        smoke_test=lambda source: None,
        replay=lambda *a: ReplayResult(success=True),
        sandbox_tier="test-double",
        prepare=prepared.append,
    )
    config = RunConfig(
        run=RunSection(**{"rollouts": 6, "sleep_every": 2, "eval_episodes": 3, **run}),
        method=ReactConfig(),
        benchmark=BenchmarkConfig(name="counter", task_set="count", max_llm_calls=6),
    )
    Runner(
        config,
        tmp_path,
        benchmark=CounterBenchmark(),
        method=SkillMethod(),
        actor=PolicyModel(policy, cost=0.001),
        run_id="r0001",
        scripted=False,
        skill_support=support,
    ).run()
    assert prepared == asked
