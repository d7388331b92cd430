"""Intervals for held-out evaluation: the project's one family of them.

Each held-out scenario is played K times under K fixed customer draw seeds, and two agents share the draws (common
random numbers: agent A's draw j and agent B's draw j use the same customer seed). Every function takes a 2-D array
``(n_scenarios, K)`` of per-(scenario, draw) outcomes (0/1) or paired differences (floats in [-1, 1]), with K equal
for all scenarios of one array.

- :func:`cluster_bootstrap` / :func:`paired_difference`: percentile interval of the mean resampling scenarios, each
  scenario's draws kept together (clustered standard errors, K samples per item and paired differences, as in
  "Adding Error Bars to Evals", Miller 2024, arXiv 2411.00640).
- :func:`nested_bootstrap`: across RL seeds, a hierarchical (stratified / nested) bootstrap seed -> scenario ->
  draw (bootstrap intervals over seeds as Henderson et al., "Deep Reinforcement Learning that Matters", arXiv
  1709.06560, ask for; the interquartile mean and probability of improvement of rliable, Agarwal et al., "Deep
  Reinforcement Learning at the Edge of the Statistical Precipice", arXiv 2108.13264).
- :func:`variance_components`, :func:`standard_error`, :func:`min_detectable_effect`, :func:`mde_table`: the
  between-scenario and within-scenario variance of a balanced one-way random-effects layout, and what n scenarios x
  k draws can detect (the power analysis of arXiv 2411.00640).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

RESAMPLES = 2000
LEVEL = 0.95
_CHUNK = 1 << 22  # index elements generated at once by the nested bootstrap (bounds its memory)


def _check_count(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _check_fraction(name: str, value: float) -> None:
    if not 0.0 < float(value) < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value!r}")


def _percentiles(samples: np.ndarray, level: float) -> tuple[float, float]:
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(samples, [tail, 100.0 - tail])
    return float(low), float(high)


def as_matrix(values: ArrayLike) -> np.ndarray:
    """``values`` as a float ``(n_scenarios, K)`` array; a 1-D vector is one draw per scenario (K = 1)."""
    try:
        matrix = np.asarray(values, dtype=float)
    except (ValueError, TypeError) as err:
        raise ValueError(f"values must be a rectangular numeric (n_scenarios, K) array (ragged rows?): {err}") from err
    if matrix.ndim == 1:
        matrix = matrix[:, None]
    if matrix.ndim != 2:
        raise ValueError(f"values must be 1-D or 2-D (n_scenarios, K), got shape {matrix.shape}")
    if matrix.size == 0:
        raise ValueError(f"values are empty (shape {matrix.shape})")
    if not np.isfinite(matrix).all():
        raise ValueError("values contain NaN or infinity")
    return matrix


def cluster_bootstrap(
    values: ArrayLike, resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL
) -> tuple[float, float, float]:
    """(mean, low, high): percentile interval of the mean, resampling scenarios (rows) with replacement.

    With equal K the mean of the row means is the grand mean, so the rows' means are bootstrapped. When every
    scenario has the same mean (identical agents, a single scenario) the interval is the point (m, m, m)."""
    _check_count("resamples", resamples)
    _check_fraction("level", level)
    matrix = as_matrix(values)
    mean = float(matrix.mean())
    rows = matrix.mean(axis=1)
    if np.ptp(rows) == 0.0:
        return mean, mean, mean
    result = stats.bootstrap(
        (rows,),
        np.mean,
        n_resamples=resamples,
        confidence_level=level,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    return mean, (mean if np.isnan(low) else low), (mean if np.isnan(high) else high)


def paired_difference(
    before: ArrayLike, after: ArrayLike, resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL
) -> list[float]:
    """[mean, low, high] of ``after - before``, per (scenario, draw) pair, by :func:`cluster_bootstrap`."""
    a, b = as_matrix(before), as_matrix(after)
    if a.shape != b.shape:
        raise ValueError(f"before and after must have the same shape, got before {a.shape} and after {b.shape}")
    return list(cluster_bootstrap(b - a, resamples=resamples, seed=seed, level=level))


def _hierarchical_means(matrix: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` means of ``matrix`` each resampled scenario-then-draw (rows with replacement, then draws with
    replacement within each drawn row)."""
    n, k = matrix.shape
    out = np.empty(count)
    step = max(1, _CHUNK // (n * k))
    for start in range(0, count, step):
        size = min(step, count - start)
        rows = rng.integers(0, n, size=(size, n, 1), dtype=np.int32)
        cols = rng.integers(0, k, size=(size, n, k), dtype=np.int32)
        out[start : start + size] = matrix[rows, cols].mean(axis=(1, 2))
    return out


def _prob_improvement(means: np.ndarray, axis: int | None = None) -> np.ndarray:
    return np.mean((means > 0) + 0.5 * (means == 0), axis=axis)


def nested_bootstrap(
    per_seed: Sequence[ArrayLike], resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL
) -> dict[str, Any]:
    """Hierarchical bootstrap of paired differences over RL seeds: seed -> scenario -> draw.

    ``per_seed`` holds one ``(n_s, K_s)`` array of paired differences per RL seed. Each resample draws the seeds
    with replacement, within each drawn seed its scenarios, within each drawn scenario its draws; the statistic is
    the mean of the drawn seeds' means. The interquartile mean (IQM) and the probability of improvement (share of
    seeds with a positive mean, a tie counting one half: each seed's later agent against the shared baseline) get
    percentile intervals over the same resamples (rliable, arXiv 2108.13264)."""
    _check_count("resamples", resamples)
    _check_fraction("level", level)
    matrices = [as_matrix(values) for values in per_seed]
    if not matrices:
        raise ValueError("per_seed must hold at least one seed's values")
    n_seeds = len(matrices)
    seed_means = np.array([matrix.mean() for matrix in matrices])
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, n_seeds, size=(resamples, n_seeds))
    drawn = np.empty((resamples, n_seeds))
    for index, matrix in enumerate(matrices):
        slots = picks == index
        drawn[slots] = _hierarchical_means(matrix, int(slots.sum()), rng)
    low, high = _percentiles(drawn.mean(axis=1), level)
    iqm_low, iqm_high = _percentiles(stats.trim_mean(drawn, 0.25, axis=1), level)
    pi_low, pi_high = _percentiles(_prob_improvement(drawn, axis=1), level)
    return {
        "per_seed": [float(m) for m in seed_means],
        "mean": float(seed_means.mean()),
        "low": low,
        "high": high,
        "iqm": float(stats.trim_mean(seed_means, 0.25)),
        "iqm_low": iqm_low,
        "iqm_high": iqm_high,
        "prob_improvement": float(_prob_improvement(seed_means)),
        "prob_improvement_low": pi_low,
        "prob_improvement_high": pi_high,
        "n_seeds": n_seeds,
        "n_scenarios": [int(matrix.shape[0]) for matrix in matrices],
        "draws": [int(matrix.shape[1]) for matrix in matrices],
    }


def variance_components(values: ArrayLike) -> tuple[float, float]:
    """(between, within): scenario and draw variance of a balanced one-way random-effects layout (ANOVA estimates).

    within is the mean over scenarios of the unbiased variance across draws; between is
    max(0, var(row means, ddof=1) - within / K). With K == 1 the two cannot be separated: the total variance
    (ddof=1) is returned as between and within as 0.0 (the draw noise is folded into between)."""
    matrix = as_matrix(values)
    n, k = matrix.shape
    if n < 2:
        raise ValueError(f"variance_components needs at least 2 scenarios, got {n}")
    if k == 1:
        return float(matrix.var(ddof=1)), 0.0
    within = float(matrix.var(axis=1, ddof=1).mean())
    between = max(0.0, float(matrix.mean(axis=1).var(ddof=1)) - within / k)
    return between, within


def standard_error(between: float, within: float, n: int, k: int) -> float:
    """Standard error of the mean of n scenarios x k draws: sqrt(between / n + within / (n k))."""
    _check_count("n", n)
    _check_count("k", k)
    return float(np.sqrt(between / n + within / (n * k)))


def _z_sum(level: float, power: float) -> float:
    return float(stats.norm.ppf(1.0 - (1.0 - level) / 2.0) + stats.norm.ppf(power))


def min_detectable_effect(
    values: ArrayLike, n: int | None = None, k: int | None = None, level: float = LEVEL, power: float = 0.8
) -> float:
    """Minimum detectable paired effect of a two-sided test at significance 1 - level with the given power, for n
    scenarios (default: as measured) and k draws (default: the measured K), from the components of ``values``:
    (z_{1 - (1 - level) / 2} + z_power) * standard_error. Measured with K == 1, the draw noise sits in between and
    does not shrink with k (conservative)."""
    _check_fraction("level", level)
    _check_fraction("power", power)
    matrix = as_matrix(values)
    n = matrix.shape[0] if n is None else n
    k = matrix.shape[1] if k is None else k
    between, within = variance_components(matrix)
    return float(_z_sum(level, power) * standard_error(between, within, n, k))


def mde_table(values: ArrayLike, ks: Iterable[int] = (1, 2, 4, 8), ns: Iterable[int] = (240,)) -> list[dict]:
    """Rows {"n", "k", "standard_error", "mde"} for every n in ``ns`` and k in ``ks`` (default level and power)."""
    matrix = as_matrix(values)
    between, within = variance_components(matrix)
    z, ks = _z_sum(LEVEL, 0.8), list(ks)
    rows = []
    for n in ns:
        for k in ks:
            se = standard_error(between, within, n, k)
            rows.append({"n": n, "k": k, "standard_error": se, "mde": float(z * se)})
    return rows
