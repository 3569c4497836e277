"""Specs that benchmarks and methods register; the config loader and runner read them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from speedrunner.core.registry import Registry


@dataclass(frozen=True)
class BenchmarkSpec:
    """A benchmark, by entry points (nothing is imported until used).

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


@dataclass(frozen=True)
class MethodSpec:
    """A method, by entry points. ``factory`` is ``None`` until the method is implemented.

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


BENCHMARKS: Registry[BenchmarkSpec] = Registry("benchmark")
METHODS: Registry[MethodSpec] = Registry("method")
