"""Crafter generates each world from opensimplex's noise, which runs compiled when numba is
installed (a dependency for that reason: a reset takes ~0.1 s instead of ~1.5 s of pure Python,
most of a Crafter run's CPU). The compiled noise must equal the pure-Python noise bit for bit,
or the same seed would build a different world than BALROG's."""

from __future__ import annotations

import random

import crafter
import pytest
from opensimplex import api, internals


def pure_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Crafter's noise as it runs without numba: every compiled function replaced by its source."""
    monkeypatch.setattr(internals, "_extrapolate3", internals._extrapolate3.py_func)
    monkeypatch.setattr(api, "_noise3", internals._noise3.py_func)


def test_the_noise_crafter_calls_is_compiled() -> None:
    assert hasattr(internals._noise3, "py_func"), (
        "numba is missing: Crafter resets run in pure Python"
    )


def test_compiled_noise_equals_the_pure_python_noise_bit_for_bit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(0)
    points = [
        (rng.uniform(-70, 70), rng.uniform(-70, 70), rng.choice([0, 3, 6, 7, 8]) + rng.random())
        for _ in range(3000)
    ]  # Crafter's inputs: cell coordinates over a frequency, a z offset
    seeds = (0, 1, 2**31 - 1, rng.randrange(2**31))

    def noise() -> list[float]:
        return [g.noise3(*p) for g in map(api.OpenSimplex, seeds) for p in points]

    compiled = noise()
    pure_python(monkeypatch)
    assert noise() == compiled


def test_a_world_is_the_same_compiled_or_not(monkeypatch: pytest.MonkeyPatch) -> None:
    def world(seed: int) -> tuple[bytes, list[tuple[str, tuple[int, int]]]]:
        env = crafter.Env(area=(64, 64), seed=seed)
        env.reset()
        return env._world._mat_map.tobytes(), [
            (type(o).__name__, tuple(o.pos)) for o in env._world.objects
        ]

    compiled = world(7)
    pure_python(monkeypatch)
    assert world(7) == compiled
