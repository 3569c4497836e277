"""The specs of every shipped benchmark and method, declared as entry points in pyproject.toml.

This is the one module that names them all; ``core`` reads only the registries, which find
these specs (and any other installed package's) through the entry point groups
``speedrunner.benchmarks`` and ``speedrunner.methods`` (docs/add-benchmark.md, docs/add-method.md).
"""

from __future__ import annotations

from speedrunner.core.specs import BENCHMARKS, METHODS, BenchmarkSpec, MethodSpec
from speedrunner.methods.wake_sleep.configs import MEANING_CHANGING_KEYS

__all__ = ["BENCHMARKS", "METHODS", "config_loader"]

_WS = "speedrunner.methods.wake_sleep"

BABYAI = BenchmarkSpec(
    name="babyai",
    config="speedrunner.benchmarks.babyai.config:BabyAIConfig",
    factory="speedrunner.benchmarks.babyai.benchmark:BabyAIBenchmark",
    preflight="speedrunner.benchmarks.babyai.preflight:check_server",
    quick_test={"max_llm_calls": 6},
    skill_api="speedrunner.benchmarks.babyai.skill_api",
    prompt_bytes=6_000,
    observation_bytes=1_500,  # measured, with generous headroom
    sweep_service="speedrunner.benchmarks.babyai.sweep_service:shared_server",
)
CRAFTER = BenchmarkSpec(
    name="crafter",
    config="speedrunner.benchmarks.crafter.config:CrafterConfig",
    factory="speedrunner.benchmarks.crafter.benchmark:CrafterBenchmark",
    quick_test={"max_env_actions": 30, "max_llm_calls": 60},
    skill_api="speedrunner.benchmarks.crafter.skill_api",
    prompt_bytes=10_000,
    observation_bytes=3_000,  # measured, with generous headroom
)
SCIENCEWORLD = BenchmarkSpec(
    name="scienceworld",
    config="speedrunner.benchmarks.scienceworld.config:ScienceWorldConfig",
    factory="speedrunner.benchmarks.scienceworld.benchmark:ScienceWorldBenchmark",
    quick_test={"max_llm_calls": 5, "jvm_compiler": "quick"},
    skill_api="speedrunner.benchmarks.scienceworld.skill_api",
    prompt_bytes=16_000,
    observation_bytes=8_000,  # measured, with generous headroom
    memory_gb_per_episode=1.5,  # one JVM per parallel episode
)

REACT = MethodSpec(
    name="react",
    config=f"{_WS}.configs:ReactConfig",
    factory=f"{_WS}.react:ReactMethod",
    meaning_keys=MEANING_CHANGING_KEYS,
    cost_bounds=f"{_WS}.cost_bounds:react",
)
OPO = MethodSpec(
    name="opo",
    config=f"{_WS}.configs:OPOConfig",
    factory=f"{_WS}.opo:OPOMethod",
    meaning_keys=MEANING_CHANGING_KEYS,
    knowledge_title="Strategy guide",
    cost_bounds=f"{_WS}.cost_bounds:opo",
)
SPEEDRUNNER = MethodSpec(
    name="speedrunner",
    config=f"{_WS}.configs:SpeedRunnerConfig",
    factory=f"{_WS}.speedrunner:SpeedRunnerMethod",
    meaning_keys=MEANING_CHANGING_KEYS,
    quick_test={"max_inducer_turns": 3},
    uses_skills=True,
    multi_turn_sleep=True,
    knowledge_title="SpeedRunner",
    cost_bounds=f"{_WS}.cost_bounds:inducer",
)
SPEEDRUNNER_NO_CL = MethodSpec(
    name="speedrunner_no_cl",
    config=f"{_WS}.configs:SpeedRunnerNoCLConfig",
    factory=f"{_WS}.speedrunner:SpeedRunnerNoCLMethod",
    meaning_keys=MEANING_CHANGING_KEYS,
    quick_test={"max_inducer_turns": 3},
    uses_skills=True,
    multi_turn_sleep=True,
    knowledge_title="SpeedRunner (no code execution)",
    cost_bounds=f"{_WS}.cost_bounds:inducer",
)
ASI = MethodSpec(
    name="asi",
    config=f"{_WS}.configs:ASIConfig",
    factory=f"{_WS}.asi:ASIMethod",
    meaning_keys=MEANING_CHANGING_KEYS,
    uses_skills=True,
    knowledge_title="ASI",
    cost_bounds=f"{_WS}.cost_bounds:asi",
)
VOYAGER = MethodSpec(
    name="voyager",
    config="speedrunner.methods.voyager.config:VoyagerConfig",
    factory="speedrunner.benchmarks.crafter.voyager:make_voyager",
    benchmarks=frozenset({"crafter"}),
    entry_point="speedrunner.benchmarks.crafter.train_voyager",
    meaning_keys=MEANING_CHANGING_KEYS,
    quick_test={"max_task_attempts": 2},
    uses_skills=True,
    knowledge_title="Voyager",
    cost_bounds="speedrunner.methods.voyager.cost_bounds:voyager",
)


def config_loader():  # -> ConfigLoader; imported lazily to keep `import catalog` light
    """A config loader that knows every installed benchmark and method."""
    from speedrunner.core.config.loader import ConfigLoader

    return ConfigLoader(BENCHMARKS, METHODS)
