"""ScienceWorld task strings and episode streams (pure functions: no JVM)."""

from __future__ import annotations

from collections import Counter

import pytest

from speedrunner.benchmarks.scienceworld.benchmark import ScienceWorldBenchmark
from speedrunner.benchmarks.scienceworld.config import TASK_SETS, ScienceWorldConfig
from speedrunner.benchmarks.scienceworld.tasks import TaskRef, parse_task, variations
from speedrunner.core.seeding import episode_seed
from speedrunner.errors import EnvError


def test_task_string_grammar() -> None:
    assert parse_task("4-1/test#226", 0) == TaskRef("4-1", "test", 226)
    assert str(parse_task("4-1/test#226", 0)) == "4-1/test#226"
    assert parse_task("4-2", 7) == TaskRef("4-2", "train", 7)
    assert parse_task("4-2/train", 157) == TaskRef("4-2", "train", 7)  # seed % 150
    assert parse_task("3-1/test", 3) == TaskRef("3-1", "test", 18)
    assert variations("3-3", "dev") == range(450, 675)


@pytest.mark.parametrize(
    ("task", "message"),
    [
        ("4-9", "unknown ScienceWorld task id '4-9'"),
        ("4-1/tset", "did you mean 'test'"),
        ("4-1/test#12", "variation 12 is not in the test split of 4-1 .225..299."),
        ("4-1/test#x", "must be an integer"),
    ],
)
def test_bad_task_strings_say_what_to_do(task: str, message: str) -> None:
    with pytest.raises(EnvError, match=message):
        parse_task(task, 0)


def _bench(task_set: str, rollouts: int = 20, n_eval: int = 30) -> ScienceWorldBenchmark:
    return ScienceWorldBenchmark(
        ScienceWorldConfig(task_set=task_set), rollouts=rollouts, eval_episodes=n_eval
    )


def test_t3t4_trains_on_t3_then_t4() -> None:
    bench = _bench("t3t4", rollouts=20)
    specs = [bench.train_episode(0, i) for i in range(20)]
    first, second = specs[:10], specs[10:]
    assert {s.task.split("/")[0] for s in first} <= set(TASK_SETS["t3"])
    assert {s.task.split("/")[0] for s in second} <= set(TASK_SETS["t4"])
    assert len({s.task.split("/")[0] for s in specs}) >= 5  # the seed spreads subtasks
    for spec in specs:
        assert spec.split == "train" and spec.seed == episode_seed(0, "train", spec.index)
        ref = parse_task(spec.task, spec.seed)
        assert "/train#" in spec.task and ref.variation in variations(ref.task_id, "train")
    assert specs == [bench.train_episode(0, i) for i in range(20)]
    assert specs != [bench.train_episode(1, i) for i in range(20)]


def test_single_task_and_t4_train_draws() -> None:
    assert {_bench("4-3").train_episode(0, i).task.split("/")[0] for i in range(10)} == {"4-3"}
    t4 = Counter(_bench("t4").train_episode(0, i).task.split("/")[0] for i in range(200))
    assert set(t4) == set(TASK_SETS["t4"]) and min(t4.values()) > 20


@pytest.mark.parametrize("task_set", ["t3", "t4", "t3t4", "3-1"])
def test_eval_set_round_robin_over_test_variations(task_set: str) -> None:
    bench = _bench(task_set)
    evals = bench.eval_episodes(5)
    assert len(evals) == 30 and evals == bench.eval_episodes(5)
    assert [e.index for e in evals] == list(range(30)) and {e.split for e in evals} == {"eval"}
    ids = TASK_SETS.get(task_set, (task_set,))
    refs = [parse_task(e.task, e.seed) for e in evals]
    assert [r.task_id for r in refs] == [ids[i % len(ids)] for i in range(30)]
    for ref in refs:
        assert ref.split == "test" and ref.variation in variations(ref.task_id, "test")
    for task_id in ids:  # distinct variations per subtask until the test split runs out
        mine = [r.variation for r in refs if r.task_id == task_id]
        assert len(set(mine)) == min(len(mine), len(variations(task_id, "test")))


def test_catalog_entry_points_build_both_benchmarks() -> None:
    from speedrunner.benchmarks.crafter.config import CrafterConfig
    from speedrunner.catalog import BENCHMARKS
    from speedrunner.core.registry import load_entry_point

    for name, config in (("crafter", CrafterConfig()), ("scienceworld", ScienceWorldConfig())):
        factory = load_entry_point(BENCHMARKS.get(name).factory)
        bench = factory(config, rollouts=10, eval_episodes=3)
        assert bench.name == name and len(bench.eval_episodes(0)) == 3
        env = bench.make_env()  # ScienceWorld: no JVM until the first reset
        env.close()
        bench.close()
