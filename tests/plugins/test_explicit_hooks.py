"""Optional hooks live on explicit base classes (``Benchmark``, ``Method``, ``TextEnv``,
``MethodConfig``) with defaults, and every call site calls them directly: no
``getattr(obj, "hook", default)`` decides control flow, and a plug-in written against the
bases with only their required parts runs through the loop."""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from speedrunner.catalog import METHODS
from speedrunner.core.atomic import read_jsonl
from speedrunner.core.benchmark import Benchmark, EpisodeSpec
from speedrunner.core.config.schema import BenchmarkConfig, MethodConfig, RunConfig, RunSection
from speedrunner.core.env import Observation, StepResult, TextEnv
from speedrunner.core.llm.provider import Provider
from speedrunner.core.llm.types import Model
from speedrunner.core.method import Knowledge, Method, SleepResult
from speedrunner.core.registry import load_entry_point
from speedrunner.core.runtime.loop import Runner
from speedrunner.errors import ConfigError, EnvError
from tests.runtime.fakes import PolicyModel, smart_policy

SRC = Path(__file__).resolve().parents[2] / "src" / "speedrunner"

NAMED_HOOKS = {
    Benchmark: ("start_run", "recover", "eval_metrics", "close"),
    Method: ("train_batch", "own_training"),
    TextEnv: ("action_descriptions", "prompt_actions", "step_limit", "close"),
    MethodConfig: (
        "check_runnable",
        "check_prices",
        "skill_caps",
        "analysis_code_timeout_s",
        "own_work_caps",
    ),
    Provider: ("supports_tools", "accepts_stop", "length_param", "on_replay"),
    Model: ("native_tools",),
}
"""The optional hooks the runner, the CLI and the sandbox call, and the capabilities the LLM
wrapper, the pre-flight and the methods read, by the base that declares each."""
DECLARED_ELSEWHERE = {
    "max_steps",
    "env_step_limit",
    "max_tokens_param",
    "sandbox_tier",
    "sandbox_requested",
    "finish_reason",
    "sampling",
}
"""Names once probed by ``getattr``: the step limits envs were asked for, the OpenAI provider's
length field, the tier fields of ``SkillSupport`` (``sandbox.tiers.TierChoice``) and the fields
of ``Completion`` the answer readers count."""


def _members(cls: type) -> set[str]:
    """What ``cls`` itself declares (methods, properties, annotated attributes), not its bases'."""
    own = set(vars(cls)) | set(getattr(cls, "__annotations__", {}))
    return {n for n in own if not n.startswith("_") and not n.startswith("model_")}


def _hook_names() -> set[str]:
    names = {n for hooks in NAMED_HOOKS.values() for n in hooks}
    names |= {n for base in NAMED_HOOKS for n in _members(base)}
    for name in METHODS.names():  # every shipped method config's fields and methods
        config = load_entry_point(METHODS.get(name).config)
        for cls in config.__mro__:
            if issubclass(cls, MethodConfig) and cls is not BaseModel:
                names |= _members(cls) | set(config.model_fields)
    names |= DECLARED_ELSEWHERE
    return names - {
        "name",
        "model",
        "endpoints",
    }  # required data of every object of its kind, not hooks


def _literal_names(call: ast.Call, loops: dict[str, set[str]]) -> set[str]:
    """The attribute names ``getattr``/``hasattr`` is asked for: a literal, or a loop variable
    over a tuple of literals."""
    if len(call.args) < 2:
        return set()
    arg = call.args[1]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return {arg.value}
    if isinstance(arg, ast.Name):
        return loops.get(arg.id, set())
    return set()


def _loop_literals(tree: ast.AST) -> dict[str, set[str]]:
    loops: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.For)
            and isinstance(node.target, ast.Name)
            and isinstance(node.iter, ast.Tuple | ast.List)
        ):
            strings = {
                e.value
                for e in node.iter.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            }
            loops.setdefault(node.target.id, set()).update(strings)
    return loops


def test_no_hook_is_looked_up_by_name_outside_testing() -> None:
    hooks = _hook_names()
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if "testing" in path.relative_to(SRC).parts:
            continue
        tree = ast.parse(path.read_text("utf-8"))
        loops = _loop_literals(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
            ):
                for name in sorted(_literal_names(node, loops) & hooks):
                    found.append(
                        f"{path.relative_to(SRC)}:{node.lineno}: {node.func.id}(..., {name!r})"
                    )
    assert found == [], "call the hook on its base class instead:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("base", "hook"), [(b, h) for b, hooks in NAMED_HOOKS.items() for h in hooks]
)
def test_each_hook_is_declared_on_its_base_with_a_default(base: type, hook: str) -> None:
    assert hook in vars(base), f"{base.__name__} does not declare {hook}"
    assert not getattr(getattr(base, hook), "__isabstractmethod__", False)


# ------------------------------------------------------------------ minimal plug-ins
class MinimalEnv(TextEnv):
    """Only the required parts: count up to 2."""

    accepts_free_text = False

    def __init__(self) -> None:
        self.value = 0

    @property
    def instruction(self) -> str:
        return "Make the counter equal 2."

    @property
    def actions(self) -> list[str]:
        return ["inc", "dec", "noop"]

    @property
    def success(self) -> bool:
        return self.value == 2

    def reset(self, task: str, seed: int) -> Observation:
        self.value = 0
        return Observation(f"The counter shows {self.value}.", {"value": self.value})

    def step(self, action: str) -> StepResult:
        self.value += {"inc": 1, "dec": -1, "noop": 0}[action]
        return StepResult(
            Observation(f"The counter shows {self.value}."),
            float(self.success),
            self.success,
            {"value": self.value},
        )

    def progress(self) -> float:
        return min(1.0, max(0.0, self.value / 2))


class MinimalBenchmark(Benchmark):
    name = "minimal"

    def make_env(self) -> TextEnv:
        return MinimalEnv()

    def train_episode(self, run_seed: int, index: int) -> EpisodeSpec:
        return EpisodeSpec("train", index, "count", run_seed + index)

    def eval_episodes(self, eval_seed: int) -> list[EpisodeSpec]:
        return [EpisodeSpec("eval", i, "count", eval_seed + i) for i in range(2)]


class MinimalMethod(Method):
    name = "minimal"

    def __init__(self) -> None:
        self.version = 0

    def knowledge(self) -> Knowledge:
        return Knowledge(self.version)

    def sleep(self, batch: list[Any], *, batch_index: int) -> SleepResult:
        self.version += 1
        return SleepResult(self.knowledge())

    def restore(self, version: int) -> None:
        self.version = version


def _config() -> RunConfig:
    run = RunSection(rollouts=4, sleep_every=2, eval_every=4, eval_episodes=2, parallel_episodes=1)
    return RunConfig(
        run=run,
        method=MethodConfig(name="minimal"),
        benchmark=BenchmarkConfig(name="minimal", task_set="count", max_llm_calls=6),
    )


def _run(tmp_path: Path, benchmark: Benchmark, method: Method | None = None) -> dict[str, Any]:
    model = PolicyModel(smart_policy)
    Runner(
        _config(),
        tmp_path,
        benchmark=benchmark,
        method=method or MinimalMethod(),
        actor=model,
        run_id="r0001",
        scripted=False,
    ).run()
    return json.loads((tmp_path / "summary.json").read_text("utf-8"))


def test_minimal_subclasses_run_through_the_loop(tmp_path: Path) -> None:
    summary = _run(tmp_path, MinimalBenchmark())
    assert summary["status"] == "finished" and summary["training"]["episodes"] == 4
    metrics = read_jsonl(tmp_path / "metrics.jsonl")
    assert [m["knowledge_version"] for m in metrics] == [0, 0, 1, 1] and all(
        m["success"] for m in metrics
    )
    evals = read_jsonl(tmp_path / "eval.jsonl")
    assert [e["rollout"] for e in evals] == [0, 4]
    assert all("benchmark_metrics" not in e for e in evals)  # the default eval_metrics adds nothing
    assert not (tmp_path / "env_restarts.jsonl").exists()


class HookedBenchmark(MinimalBenchmark):
    """Overrides every optional hook: the runner must call each one."""

    def __init__(self) -> None:
        self.started: list[tuple[str, Path]] = []
        self.failures_left = 1

    def make_env(self) -> TextEnv:
        bench = self

        class Flaky(MinimalEnv):
            def reset(self, task: str, seed: int) -> Observation:
                if bench.failures_left:
                    bench.failures_left -= 1
                    raise EnvError("backend died")
                return super().reset(task, seed)

        return Flaky()

    def start_run(self, run_tag: str, run_dir: Path) -> None:
        self.started.append((run_tag, run_dir))

    def recover(self, error: Exception) -> bool:
        return isinstance(error, EnvError)

    def eval_metrics(self, final_infos: list[dict[str, Any]]) -> dict[str, float]:
        return {"mean_value": sum(i["value"] for i in final_infos) / len(final_infos)}


def test_overridden_hooks_are_called(tmp_path: Path) -> None:
    bench = HookedBenchmark()
    summary = _run(tmp_path, bench)
    assert summary["status"] == "finished"
    assert [d for _, d in bench.started] == [tmp_path] and bench.started[0][0].startswith("r0001-")
    assert [r["error"] for r in read_jsonl(tmp_path / "env_restarts.jsonl")] == ["backend died"]
    assert [e["benchmark_metrics"] for e in read_jsonl(tmp_path / "eval.jsonl")] == [
        {"mean_value": 2.0}
    ] * 2


def test_a_missing_required_part_is_named_when_the_class_is_built() -> None:
    class NoSleep(Method):
        name = "no_sleep"

        def knowledge(self) -> Knowledge:
            return Knowledge(0)

        def restore(self, version: int) -> None:
            pass

    class NoEpisodes(Benchmark):
        name = "no_episodes"

        def make_env(self) -> TextEnv:
            return MinimalEnv()

    with pytest.raises(TypeError, match="sleep"):
        NoSleep()
    with pytest.raises(TypeError, match="eval_episodes"):
        NoEpisodes()


def test_an_object_that_does_not_subclass_the_base_is_refused_with_the_fix(tmp_path: Path) -> None:
    class Structural:  # the required parts, but not a Benchmark
        name = "structural"
        make_env = MinimalBenchmark.make_env
        train_episode = MinimalBenchmark.train_episode
        eval_episodes = MinimalBenchmark.eval_episodes

    with pytest.raises(
        TypeError, match=r"does not subclass speedrunner\.core\.benchmark\.Benchmark.*add-benchmark"
    ):
        Runner(
            _config(),
            tmp_path,
            benchmark=Structural(),
            method=MinimalMethod(),  # type: ignore[arg-type]
            actor=PolicyModel(smart_policy),
            run_id="r0001",
            scripted=False,
        )


def test_method_config_hooks_default_to_nothing_and_shipped_configs_fill_them() -> None:
    from speedrunner.core.config.schema import SkillCaps

    plain = MethodConfig(name="plain")
    plain.check_runnable()
    plain.check_prices()
    assert (plain.skill_caps(), plain.analysis_code_timeout_s(), plain.own_work_caps()) == (
        SkillCaps(),
        None,
        [],
    )
    speedrunner = load_entry_point(METHODS.get("speedrunner").config)(
        max_skill_actions=7, max_functions=3
    )
    assert speedrunner.skill_caps() == SkillCaps(max_skill_actions=7, max_functions=3)
    assert speedrunner.analysis_code_timeout_s() == speedrunner.analysis_timeout_s
    assert any("run_python" in c for c in speedrunner.own_work_caps())
    voyager = load_entry_point(METHODS.get("voyager").config)(
        embedding={"name": "e", "api_key_env": "NO_SUCH_KEY_SET"}
    )
    with pytest.raises(ConfigError, match="method.embedding.prices"):
        voyager.check_prices()
    with pytest.raises(ConfigError, match=r"\$NO_SUCH_KEY_SET"):
        voyager.check_runnable()


def test_shipped_benchmarks_methods_and_envs_subclass_the_bases() -> None:
    from speedrunner.catalog import BENCHMARKS

    for name in BENCHMARKS.names():
        factory = load_entry_point(BENCHMARKS.get(name).factory)
        assert inspect.isclass(factory) and issubclass(factory, Benchmark), name
        env = inspect.signature(factory.make_env).return_annotation
        env_cls = load_entry_point(f"{factory.__module__}:{env}") if isinstance(env, str) else env
        assert issubclass(env_cls, TextEnv), name
    for name in METHODS.names():
        spec = METHODS.get(name)
        if spec.factory is None:
            continue
        factory = load_entry_point(spec.factory)
        method = (
            inspect.signature(factory).return_annotation
            if not inspect.isclass(factory)
            else factory
        )
        method_cls = (
            load_entry_point(f"{factory.__module__}:{method}")
            if isinstance(method, str)
            else method
        )
        assert issubclass(method_cls, Method), name
