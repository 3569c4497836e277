"""The ``benchmark`` section for ScienceWorld (task sets t3, t4, t3t4 or one task id)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from speedrunner.core.config.schema import BenchmarkConfig, RunSection

TASK_IDS = {
    "3-1": "power-component",
    "3-2": "power-component-renewable-vs-nonrenewable-energy",
    "3-3": "test-conductivity",
    "3-4": "test-conductivity-of-unknown-substances",
    "4-1": "find-living-thing",
    "4-2": "find-non-living-thing",
    "4-3": "find-plant",
    "4-4": "find-animal",
}
TASK_SETS = {
    "t3": ("3-1", "3-2", "3-3", "3-4"),
    "t4": ("4-1", "4-2", "4-3", "4-4"),
    "t3t4": ("3-1", "3-2", "3-3", "3-4", "4-1", "4-2", "4-3", "4-4"),
}
QUICK_COMPILER_FLAG = "-XX:TieredStopAtLevel=1"
"""HotSpot stops at C1: it compiles the simulator's code sooner and far more cheaply than C2,
and what it makes runs slower. Over a JVM's first few episodes (each JVM's compiling costs
several CPU-seconds) that is less CPU in all; over hundreds of episodes it is more."""
QUICK_COMPILER_MAX_EPISODES_PER_ENV = 4
"""``jvm_compiler: auto`` picks quick when each env plays at most this many episodes on
average: C1 alone costs less over a JVM's first few episodes and more after them
(docs/performance-test-suite.md); the paper's schedule is far past it."""


class ScienceWorldConfig(BenchmarkConfig):
    name: Literal["scienceworld"] = "scienceworld"
    """Benchmark name."""
    task_set: str = "t4"
    """t3, t4, t3t4 (train on t3 then t4, evaluate on both), or a single task id such as 4-1."""
    max_llm_calls: int | None = Field(100, ge=1)
    """Per-episode budget of LLM calls (the paper: 100)."""
    env_step_limit: int = Field(10000, ge=1)
    """ScienceWorld's own step limit per episode
    (the LLM-call budget usually ends episodes first)."""
    simplification: str = "easy"
    """ScienceWorld simplification string (e.g. "easy", or "" for none)."""
    jvm_options: str = "-Xmx512m -XX:+UseSerialGC"
    """JAVA_TOOL_OPTIONS for each env's JVM (caps the heap near 540 MB)."""
    jvm_compiler: Literal["auto", "full", "quick"] = "auto"
    """The JVM's just-in-time compilers: full (HotSpot's tiered C1 + C2; the fastest steps once
    warm), quick (C1 only, -XX:TieredStopAtLevel=1: less CPU for a JVM that plays only a few
    short episodes, but several times slower steps once warm), or auto: quick when
    the run's schedule gives each env at most 4 episodes on average, else full. --quick_test
    uses quick. The simulator's results are the same either way."""

    @field_validator("task_set")
    @classmethod
    def _known_task_set(cls, v: str) -> str:
        if v in TASK_SETS or v in TASK_IDS:
            return v
        from speedrunner.core.names import unknown

        raise ValueError(unknown("ScienceWorld task set", v, [*TASK_SETS, *TASK_IDS]))

    def for_run(self, run: RunSection) -> ScienceWorldConfig:
        """``jvm_compiler: auto`` settled for ``run``'s schedule (see the field)."""
        if self.jvm_compiler != "auto":
            return self
        quick = run.episodes_per_env <= QUICK_COMPILER_MAX_EPISODES_PER_ENV
        return self.model_copy(update={"jvm_compiler": "quick" if quick else "full"})

    @property
    def launch_jvm_options(self) -> str:
        """``jvm_options`` plus the flag ``jvm_compiler`` asks for (``auto`` not yet settled by
        ``for_run``, e.g. an env built outside a run, is full)."""
        return (
            f"{self.jvm_options} {QUICK_COMPILER_FLAG}"
            if self.jvm_compiler == "quick"
            else self.jvm_options
        )

    @property
    def task_ids(self) -> tuple[str, ...]:
        return TASK_SETS.get(self.task_set, (self.task_set,))
