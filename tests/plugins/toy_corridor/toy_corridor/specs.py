"""What SpeedRunner finds through this package's entry points (pyproject.toml)."""

from speedrunner.core.specs import BenchmarkSpec, MethodSpec

CORRIDOR = BenchmarkSpec(
    name="corridor",
    config="toy_corridor.config:CorridorConfig",
    factory="toy_corridor.benchmark:CorridorBenchmark",
    skill_api="toy_corridor.skill_api",
    quick_test={"max_llm_calls": 8},
    prompt_bytes=2_000,
    observation_bytes=200,
)
TALLY = MethodSpec(
    name="tally",
    config="toy_corridor.config:TallyConfig",
    factory="toy_corridor.method:TallyMethod",
    knowledge_title="Tally",
    cost_bounds="toy_corridor.cost:tally",
)
