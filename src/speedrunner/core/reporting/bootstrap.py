"""95 % percentile-bootstrap intervals over seeds, seeded so a report is reproducible.

Each seed's run gives one value; resampling the seeds with replacement (each group on its
own, as rliable's stratified bootstrap does) gives the interval of a mean, of a difference
of two means, and of the probability of improvement P(X > Y) + 0.5 P(X = Y) over seed pairs
(Agarwal et al. 2021, "Deep RL at the Edge of the Statistical Precipice"). With one seed
there is nothing to resample: no interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RESAMPLES = 10_000
LEVEL = 0.95
SEED = 0
"""Fixed: the same runs always give the same intervals, hence the same report bytes."""
MIN_SEEDS_FOR_IMPROVEMENT = 3


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its 95 % bootstrap interval (None: fewer than 2 seeds)."""

    value: float
    low: float | None = None
    high: float | None = None

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None


def _resample(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``RESAMPLES`` x n resampled copies of ``values``."""
    return values[rng.integers(0, len(values), size=(RESAMPLES, len(values)))]


def _interval(samples: np.ndarray) -> tuple[float, float]:
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(samples, [tail, 100 - tail])
    return float(low), float(high)


def mean_interval(values: list[float]) -> Estimate | None:
    """The mean over seeds and its interval (None without values)."""
    if not values:
        return None
    x = np.asarray(values, dtype=float)
    if len(x) < 2:
        return Estimate(float(x.mean()))
    rng = np.random.default_rng(SEED)
    return Estimate(float(x.mean()), *_interval(_resample(x, rng).mean(axis=1)))


def difference_interval(x: list[float], y: list[float]) -> Estimate | None:
    """mean(x) - mean(y); an interval only when both sides have 2 seeds or more."""
    if not x or not y:
        return None
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    value = float(a.mean() - b.mean())
    if len(a) < 2 or len(b) < 2:
        return Estimate(value)
    rng = np.random.default_rng(SEED)
    return Estimate(
        value, *_interval(_resample(a, rng).mean(axis=1) - _resample(b, rng).mean(axis=1))
    )


def _improvement(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """P(X > Y) + 0.5 P(X = Y) over all seed pairs, along the last two axes."""
    greater = (a[..., :, None] > b[..., None, :]).mean(axis=(-2, -1))
    equal = (a[..., :, None] == b[..., None, :]).mean(axis=(-2, -1))
    return greater + 0.5 * equal


def improvement_probability(x: list[float], y: list[float]) -> Estimate | None:
    """Probability that a seed of ``x`` beats a seed of ``y``, with its interval; None with
    fewer than ``MIN_SEEDS_FOR_IMPROVEMENT`` seeds on either side."""
    if min(len(x), len(y)) < MIN_SEEDS_FOR_IMPROVEMENT:
        return None
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    rng = np.random.default_rng(SEED)
    return Estimate(
        float(_improvement(a, b)), *_interval(_improvement(_resample(a, rng), _resample(b, rng)))
    )
