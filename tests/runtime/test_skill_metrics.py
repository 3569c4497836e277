"""The paper's skill metrics in ``metrics.jsonl`` and ``eval.jsonl``, checked against a hand
computation on a tiny run: a counting game, a two-function codebook from generation 1 on, and
a skill runner double that plays ``count_to(n)`` through a private helper."""

from __future__ import annotations

import re

import pytest

from speedrunner.core.atomic import read_jsonl
from speedrunner.core.config.schema import BenchmarkConfig, RunConfig, RunSection
from speedrunner.core.llm.types import Completion, Usage
from speedrunner.core.method import Knowledge, Method, SkillSupport, SleepResult
from speedrunner.core.runtime.loop import Runner
from speedrunner.core.runtime.skill_call import SkillOutcome, Skills
from speedrunner.core.runtime.skill_metrics import estimate_tokens
from speedrunner.core.trajectory import ReplayResult
from speedrunner.methods.wake_sleep.configs import ReactConfig

from .fakes import CounterBenchmark, PolicyModel

SOURCE = (
    "def count_to(env, n):\n    while _press(env) < n:\n        pass\n\n\n"
    "def _press(env):\n    return env.act('inc')\n"
)
API_TEXT = "count_to(n: int) -> int"
# the actor prompt's "knowledge" template, filled in by hand
SECTION = "Skills:\ncount_to(n: int) -> int\n\n"


class NestedRunner:
    """Plays ``count_to(n)`` as the sandbox would record it: one ``_press`` node per action."""

    tier = "test-double"

    def call(self, call, *, step, observation, max_actions, timeout_s) -> SkillOutcome:
        tree = {
            "name": call.name,
            "args": list(call.args),
            "kwargs": {},
            "calls": [],
            "actions": [],
            "returned": None,
            "error": None,
            "prints": "",
        }
        value = observation["structured"]["value"]
        while value < call.args[0]:
            reply = step("inc")
            tree["calls"].append(
                {
                    "name": "_press",
                    "args": [],
                    "kwargs": {},
                    "calls": [],
                    "returned": None,
                    "actions": [{"action": "inc", "text": reply["text"]}],
                    "error": None,
                }
            )
            value = reply["structured"]["value"]
        tree["returned"] = value
        return SkillOutcome(tree, returned=value)

    def close(self) -> None:
        pass


class SkillMethod(Method):
    """Generation 0 has no skills; every sleep adds a generation with ``count_to`` (two paid
    calls)."""

    name = "fake_skills"

    def __init__(self) -> None:
        self.version = 0

    def knowledge(self) -> Knowledge:
        if self.version == 0:
            return Knowledge(0)
        return Knowledge(
            self.version,
            "Skills",
            API_TEXT,
            skills=Skills(self.version, SOURCE, {"count_to": API_TEXT}, "counter_api"),
        )

    def sleep(self, batch, *, batch_index) -> SleepResult:
        self.version += 1
        paid = Completion(
            text="", usage=Usage(50, 0, 30, 0), cost_usd=0.02, provider="fake", model="fake"
        )
        return SleepResult(self.knowledge(), [paid, paid])

    def restore(self, version: int) -> None:
        self.version = version


def policy(messages, purpose, call_id) -> str:
    target = int(re.search(r"equal (\d+)", messages[1].content).group(1))
    if "count_to(" in messages[1].content:
        return f"Thought: one call.\nAction: count_to({target})"
    return "Thought: count.\nAction: inc"


def tiny_config() -> RunConfig:
    return RunConfig(
        run=RunSection(
            rollouts=4, sleep_every=2, eval_every=4, eval_episodes=3, parallel_episodes=1
        ),
        method=ReactConfig(),
        benchmark=BenchmarkConfig(name="counter", task_set="count", max_llm_calls=6),
    )


def tiny_runner(tmp_path, method: SkillMethod | None = None) -> Runner:
    support = SkillSupport(
        api_module="counter_api",
        api_names=(),
        primitives=("inc", "dec", "noop"),
        open_skills=lambda skills: NestedRunner(),
        smoke_test=lambda source: None,
        replay=lambda *a: ReplayResult(success=True),
        sandbox_tier="test-double",
    )
    return Runner(
        tiny_config(),
        tmp_path,
        benchmark=CounterBenchmark(),
        method=method or SkillMethod(),
        actor=PolicyModel(policy, cost=0.001),
        run_id="r0001",
        scripted=False,
        skill_support=support,
    )


def tiny_run(tmp_path):
    tiny_runner(tmp_path).run()
    return read_jsonl(tmp_path / "metrics.jsonl"), read_jsonl(tmp_path / "eval.jsonl")


def test_the_token_estimate_counts_pre_tokens():
    # Skills | ":\n" | count | _to | (n | : | " int" | ) | " ->" | " int" | \n\n
    # (as cl100k_base splits it)
    assert estimate_tokens(SECTION) == 11
    assert estimate_tokens("") == 0 and estimate_tokens("hello world") == 2
    assert estimate_tokens("don't  stop 12345") == 7  # don | 't | " " | " stop" | " " | 123 | 45


def test_training_rows_carry_the_skill_metrics(tmp_path):
    metrics, _ = tiny_run(tmp_path)
    targets = [1 + r["seed"] % 4 for r in metrics]  # CounterEnv: the target is 1 + seed % 4
    for row, target in zip(metrics, targets, strict=True):
        assert row["sleep_llm_calls_share"] == 1.0  # 2 sleep calls over 2 episodes
        assert row["cost_sleep_share_usd"] == pytest.approx(0.02)
        if row["knowledge_version"] == 0:  # no skills: one call per inc
            assert (row["llm_calls"], row["skill_calls"], row["skill_actions"]) == (target, 0, 0)
            assert row["dynamic_call_depth"] == 0 and row["within_2_llm_calls"] == (target <= 2)
            assert row["library_public_functions"] == 0 and row["skill_api_tokens"] == 0
            assert row["static_call_depth"] == 0 and row["call_graph_density"] == 0.0
        else:  # one skill call does it all
            assert (row["llm_calls"], row["skill_calls"], row["skill_actions"]) == (1, 1, target)
            assert row["dynamic_call_depth"] == 2 and row["within_2_llm_calls"] is True
            assert (row["library_public_functions"], row["library_private_functions"]) == (1, 1)
            assert row["static_call_depth"] == 2 and row["call_graph_density"] == 0.5
            assert (row["skill_api_tokens"], row["skill_api_chars"]) == (11, len(SECTION))
    assert [r["knowledge_version"] for r in metrics] == [0, 0, 1, 1]


def test_evaluation_rows_carry_the_skill_metrics(tmp_path):
    _, evals = tiny_run(tmp_path)
    first, last = evals
    assert (
        first["rollout"],
        first["knowledge_version"],
        last["rollout"],
        last["knowledge_version"],
    ) == (0, 0, 4, 2)
    targets = [1 + e["seed"] % 4 for e in first["per_episode"]]
    assert first["skill_calls_mean"] == 0 and first["actions_per_skill_call"] is None
    assert first["within_2_llm_calls_share"] == pytest.approx(sum(t <= 2 for t in targets) / 3)
    assert first["dynamic_call_depth_max"] == 0 and first["skill_api_tokens"] == 0
    assert last["skill_calls_mean"] == 1 and last["actions_per_skill_call"] == pytest.approx(
        sum(targets) / 3
    )
    assert last["within_2_llm_calls_share"] == 1 and last["dynamic_call_depth_max"] == 2
    assert (
        last["library_public_functions"],
        last["static_call_depth"],
        last["skill_api_tokens"],
    ) == (1, 2, 11)
    assert [e["skill_actions"] for e in last["per_episode"]] == targets


def test_methods_without_skills_write_none_for_the_library(tmp_path):
    from .fakes import smart_policy
    from .test_loop import make_runner

    runner, _ = make_runner(tmp_path, PolicyModel(smart_policy))
    runner.run()
    row = read_jsonl(tmp_path / "metrics.jsonl")[0]
    assert (
        row["skill_calls"] == 0
        and row["library_public_functions"] is None
        and row["skill_api_tokens"] is None
    )
    assert row["within_2_llm_calls"] == (
        row["llm_calls"] <= 2 and row["stop_reason"] in ("success", "env_done")
    )
