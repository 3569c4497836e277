"""Specs that benchmarks and methods declare; the config loader, the runner and the sweep read them.

A package declares a spec object under the entry point group ``speedrunner.benchmarks`` or
``speedrunner.methods`` (``core.registry``); ``speedrunner.catalog`` holds the shipped ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from speedrunner.core.registry import Registry


@dataclass(frozen=True)
class BenchmarkSpec:
    """A benchmark, by ``"module:attr"`` strings (nothing is imported until used).

    ``factory`` is called as ``factory(config, rollouts=..., eval_episodes=...)`` and
    returns a ``core.benchmark.Benchmark``. ``quick_test`` is the benchmark part of the
    ``--quick_test`` preset (merged over the file, under ``--set``). ``preflight``, when set,
    is called as ``preflight(config)`` before a run directory exists and raises
    ``PreflightError`` when the benchmark's server or data cannot be reached.
    """

    name: str
    config: str
    factory: str
    quick_test: dict[str, Any] = field(default_factory=dict)
    preflight: str | None = None
    skill_api: str | None = None
    """The module LLM-written skills import (``None``: methods with skills cannot run here). It
    declares ``PRIMITIVE_ACTIONS`` (a tuple of the env's action words; empty for free text),
    ``__all__``, ``STATE_LAYOUT`` and ``COORDINATES`` (docs/add-benchmark.md)."""
    sweep_service: str | None = None
    """``"module:attr"`` of a context manager ``service(runs)`` a sweep enters around this
    benchmark's runs on one machine (e.g. one shared env server); it yields, per run, the
    operational ``--set`` overrides that point the run at it."""
    memory_gb_per_episode: float | None = None
    """Memory a sweep reserves per parallel episode when its file names none (e.g. a JVM each)."""
    prompt_bytes: int | None = None
    """``estimate``'s bound on the actor's first prompt without knowledge
    (``None``: a generous default)."""
    observation_bytes: int | None = None
    """``estimate``'s bound on one observation (``None``: a generous default)."""


@dataclass(frozen=True)
class MethodSpec:
    """A method, by ``"module:attr"`` strings.
    ``factory`` is ``None`` until the method is implemented.

    ``benchmarks`` restricts where the method runs (``None``: everywhere);
    ``entry_point`` names the only train module allowed to run it, when there is one.
    ``meaning_keys`` maps keys a user might add to flip what the name means onto advice.
    """

    name: str
    config: str
    factory: str | None = None
    benchmarks: frozenset[str] | None = None
    entry_point: str | None = None
    meaning_keys: dict[str, str] = field(default_factory=dict)
    quick_test: dict[str, Any] = field(default_factory=dict)
    uses_skills: bool = False
    """The actor may call LLM-written skills:
    the run builds the benchmark's skill API and sandbox."""
    multi_turn_sleep: bool = False
    """The sleep is a multi-turn inducer session (``method.max_inducer_turns`` caps it)."""
    knowledge_title: str | None = None
    """How the report titles this method's knowledge (``None``: the method's name)."""
    cost_bounds: str | None = None
    """``"module:attr"`` of ``bounds(config, batches) -> core.estimate.model.MethodBounds`` for
    ``estimate`` (``None``: the knowledge shown is bounded by ``max_codebook_chars`` or an assumed
    size, and the sleep's calls are not estimated, which the forecast says)."""


BENCHMARKS: Registry[BenchmarkSpec] = Registry("benchmark", BenchmarkSpec)
METHODS: Registry[MethodSpec] = Registry("method", MethodSpec)
