"""Registers every shipped benchmark and method by entry point.

This is the one module that names them all; ``core`` reads only the registries.
Add a method: write its config class and factory, then add a ``MethodSpec`` here.
"""

from __future__ import annotations

from speedrunner.core.specs import BENCHMARKS, METHODS, BenchmarkSpec, MethodSpec
from speedrunner.methods.wake_sleep.configs import MEANING_CHANGING_KEYS

_WS = "speedrunner.methods.wake_sleep"

BENCHMARKS.register("babyai", BenchmarkSpec(
    name="babyai",
    config="speedrunner.benchmarks.babyai.config:BabyAIConfig",
    factory="speedrunner.benchmarks.babyai.benchmark:BabyAIBenchmark",
    preflight="speedrunner.benchmarks.babyai.preflight:check_server",
    quick_test={"max_llm_calls": 6},
))
BENCHMARKS.register("crafter", BenchmarkSpec(
    name="crafter",
    config="speedrunner.benchmarks.crafter.config:CrafterConfig",
    factory="speedrunner.benchmarks.crafter.benchmark:CrafterBenchmark",
    quick_test={"max_env_actions": 30, "max_llm_calls": 60},
))
BENCHMARKS.register("scienceworld", BenchmarkSpec(
    name="scienceworld",
    config="speedrunner.benchmarks.scienceworld.config:ScienceWorldConfig",
    factory="speedrunner.benchmarks.scienceworld.benchmark:ScienceWorldBenchmark",
    quick_test={"max_llm_calls": 5, "jvm_compiler": "quick"},
))

METHODS.register("react", MethodSpec(
    name="react", config=f"{_WS}.configs:ReactConfig", factory=f"{_WS}.react:ReactMethod",
    meaning_keys=MEANING_CHANGING_KEYS,
))
METHODS.register("opo", MethodSpec(
    name="opo", config=f"{_WS}.configs:OPOConfig", factory=f"{_WS}.opo:OPOMethod",
    meaning_keys=MEANING_CHANGING_KEYS,
))
METHODS.register("speedrunner", MethodSpec(
    name="speedrunner", config=f"{_WS}.configs:SpeedRunnerConfig",
    factory=f"{_WS}.speedrunner:SpeedRunnerMethod",
    meaning_keys=MEANING_CHANGING_KEYS, quick_test={"max_inducer_turns": 3},
))
METHODS.register("speedrunner_no_cl", MethodSpec(
    name="speedrunner_no_cl", config=f"{_WS}.configs:SpeedRunnerNoCLConfig",
    factory=f"{_WS}.speedrunner:SpeedRunnerNoCLMethod",
    meaning_keys=MEANING_CHANGING_KEYS, quick_test={"max_inducer_turns": 3},
))
METHODS.register("asi", MethodSpec(
    name="asi", config=f"{_WS}.configs:ASIConfig", factory=f"{_WS}.asi:ASIMethod",
    meaning_keys=MEANING_CHANGING_KEYS,
))
METHODS.register("voyager", MethodSpec(
    name="voyager", config="speedrunner.methods.voyager.config:VoyagerConfig",
    factory="speedrunner.benchmarks.crafter.voyager:make_voyager",
    benchmarks=frozenset({"crafter"}),
    entry_point="speedrunner.benchmarks.crafter.train_voyager",
    meaning_keys=MEANING_CHANGING_KEYS, quick_test={"max_task_attempts": 2},
))


def config_loader():  # -> ConfigLoader; imported lazily to keep `import catalog` light
    """A config loader that knows every registered benchmark and method."""
    from speedrunner.core.config.loader import ConfigLoader

    return ConfigLoader(BENCHMARKS, METHODS)
