"""sparring.evaluate.intervals: clustered, paired and nested bootstrap intervals, variance components and the
minimum detectable effect, checked by hand-computed cases and by simulation."""

from __future__ import annotations

import time

import numpy as np
import pytest

from sparring.evaluate.intervals import (
    as_matrix,
    cluster_bootstrap,
    mde_table,
    min_detectable_effect,
    nested_bootstrap,
    paired_difference,
    standard_error,
    variance_components,
)

BEFORE = [[0, 0], [1, 1], [0, 1]]
AFTER = [[1, 1], [1, 1], [0, 1]]


def test_as_matrix_shapes_and_errors():
    assert as_matrix([1, 0, 1]).shape == (3, 1)
    assert as_matrix([[1, 0], [0, 0]]).dtype == float
    with pytest.raises(ValueError, match="empty"):
        as_matrix([])
    with pytest.raises(ValueError, match="2-D"):
        as_matrix(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="rectangular"):
        as_matrix([[1, 0], [1]])
    with pytest.raises(ValueError, match="NaN"):
        as_matrix([[1.0, np.nan]])


@pytest.mark.parametrize("seed", range(5))
def test_paired_difference_by_hand(seed):
    # per-scenario mean differences are 1, 0, 0: a resample of 3 scenarios has a mean in {0, 1/3, 2/3, 1}
    mean, low, high = paired_difference(BEFORE, AFTER, seed=seed)
    assert mean == pytest.approx(2 / 6)
    grid = [0.0, 1 / 3, 2 / 3, 1.0]
    assert any(low == pytest.approx(g) for g in grid)
    assert any(high == pytest.approx(g) for g in grid)
    assert low <= mean <= high
    # P(resample mean = 0) = (2/3)^3 ~ 0.30 and P(= 1) = 1/27 ~ 0.037: both beyond the 2.5% tails
    assert (low, high) == (pytest.approx(0.0), pytest.approx(1.0))


def test_identical_agents_give_a_point_interval():
    assert paired_difference(BEFORE, BEFORE) == [0.0, 0.0, 0.0]
    assert cluster_bootstrap([[0.5, 0.5], [0.5, 0.5]]) == (0.5, 0.5, 0.5)
    assert cluster_bootstrap([[1.0, 0.0]]) == (0.5, 0.5, 0.5)  # one scenario: nothing to resample


def test_paired_difference_shape_mismatch_names_both_shapes():
    with pytest.raises(ValueError, match=r"\(3, 2\).*\(2, 2\)"):
        paired_difference(BEFORE, AFTER[:2])


def test_seed_makes_it_reproducible():
    values = np.random.default_rng(3).normal(size=(40, 4))
    assert cluster_bootstrap(values, seed=7) == cluster_bootstrap(values, seed=7)


def test_clustering_widens_the_interval_for_correlated_draws():
    rng = np.random.default_rng(1)
    n, k = 30, 8
    values = np.repeat(rng.normal(0.1, 0.3, size=(n, 1)), k, axis=1)  # draws of a scenario perfectly correlated
    _, low, high = cluster_bootstrap(values)
    _, flat_low, flat_high = cluster_bootstrap(values.reshape(n * k, 1))
    # the flat interval treats 240 copies of 30 values as independent: too narrow by about sqrt(8) ~ 2.8
    assert (high - low) > 2 * (flat_high - flat_low)


def test_coverage_by_simulation():
    truth, n, k = 0.05, 60, 4
    covered = 0
    for rep in range(100):
        rng = np.random.default_rng(1000 + rep)
        values = rng.normal(truth, 0.2, size=(n, 1)) + rng.normal(0.0, 0.3, size=(n, k))
        _, low, high = cluster_bootstrap(values, resamples=400, seed=rep)
        covered += low <= truth <= high
    # binomial(100, 0.95) has sd ~ 2.2, and the percentile bootstrap slightly under-covers at small n: 88..99
    assert 88 <= covered <= 99


def test_nested_bootstrap_reports_seed_means_and_improvement():
    rng = np.random.default_rng(2)
    per_seed = [rng.normal(mu, 0.3, size=(n, k)) for mu, n, k in ((0.2, 240, 8), (0.25, 200, 4), (0.3, 240, 8))]
    start = time.perf_counter()
    result = nested_bootstrap(per_seed)
    elapsed = time.perf_counter() - start
    assert result["per_seed"] == pytest.approx([float(np.mean(v)) for v in per_seed])
    assert result["mean"] == pytest.approx(np.mean(result["per_seed"]))
    assert result["prob_improvement"] == 1.0
    assert result["prob_improvement_low"] == result["prob_improvement_high"] == 1.0
    assert 0 < result["low"] <= result["mean"] <= result["high"]
    assert result["iqm_low"] <= result["iqm"] <= result["iqm_high"]
    assert (result["n_seeds"], result["n_scenarios"], result["draws"]) == (3, [240, 200, 240], [8, 4, 8])
    assert elapsed < 2.0  # vectorised; about 0.1 s on a quiet machine


def test_nested_bootstrap_one_seed_and_ties():
    result = nested_bootstrap([np.zeros((5, 2))], resamples=200)
    assert result["per_seed"] == [0.0]
    assert result["low"] == result["mean"] == result["high"] == 0.0
    assert result["prob_improvement"] == 0.5  # a tie counts one half
    one = nested_bootstrap([[[0.1, 0.3], [0.2, 0.0], [0.5, 0.1]]], resamples=500)
    assert one["n_seeds"] == 1 and one["mean"] == pytest.approx(0.2)
    assert one["low"] < 0.2 < one["high"]


def test_nested_bootstrap_iqm_is_the_mean_of_the_middle_two():
    per_seed = [np.full((3, 2), m) for m in (-1.0, 0.1, 0.3, 5.0)]
    result = nested_bootstrap(per_seed, resamples=300)
    assert result["iqm"] == pytest.approx(0.2)
    assert result["mean"] == pytest.approx(1.1)
    assert result["prob_improvement"] == pytest.approx(0.75)


def test_variance_components_recover_known_values():
    rng = np.random.default_rng(4)
    between, within = 0.09, 0.25
    values = rng.normal(0, np.sqrt(between), size=(2000, 1)) + rng.normal(0, np.sqrt(within), size=(2000, 8))
    got_between, got_within = variance_components(values)
    assert got_between == pytest.approx(between, rel=0.15)
    assert got_within == pytest.approx(within, rel=0.10)
    # K == 1: not separable, the total variance is returned as between
    column = values[:, :1]
    assert variance_components(column) == (pytest.approx(float(column.var(ddof=1))), 0.0)


def test_min_detectable_effect_by_hand():
    values = [[0, 1], [1, 1], [0, 0]]
    # row means 0.5, 1, 0: var 0.25; within = mean(0.5, 0, 0) = 1/6; between = 0.25 - (1/6) / 2 = 1/6
    assert variance_components(values) == (pytest.approx(1 / 6), pytest.approx(1 / 6))
    se = np.sqrt((1 / 6) / 3 + (1 / 6) / 6)  # = sqrt(1/12)
    assert standard_error(1 / 6, 1 / 6, 3, 2) == pytest.approx(se)
    assert min_detectable_effect(values) == pytest.approx((1.959964 + 0.841621) * se, rel=1e-5)


def test_min_detectable_effect_shrinks_with_k_and_n():
    values = np.random.default_rng(5).normal(0, 0.4, size=(60, 4)) + np.random.default_rng(6).normal(size=(60, 1))
    table = mde_table(values, ks=(1, 2, 4, 8), ns=(120, 240))
    assert [(row["n"], row["k"]) for row in table] == [(n, k) for n in (120, 240) for k in (1, 2, 4, 8)]
    mdes = [row["mde"] for row in table]
    assert mdes[:4] == sorted(mdes[:4], reverse=True) and mdes[4:] == sorted(mdes[4:], reverse=True)
    assert all(big > small for big, small in zip(mdes[:4], mdes[4:], strict=True))
    assert table[0]["mde"] == pytest.approx(min_detectable_effect(values, n=120, k=1))
    assert len(mde_table(values, ks=(k for k in (1, 2)), ns=(10, 20))) == 4  # a generator of ks serves every n


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: cluster_bootstrap([1.0, 0.0], resamples=0), "resamples"),
        (lambda: cluster_bootstrap([1.0, 0.0], level=1.0), "level"),
        (lambda: nested_bootstrap([[1.0, 0.0]], level=0.0), "level"),
        (lambda: nested_bootstrap([]), "per_seed"),
        (lambda: min_detectable_effect([[1.0, 0.0], [0.0, 0.0]], power=1.5), "power"),
        (lambda: min_detectable_effect([[1.0, 0.0], [0.0, 0.0]], n=0), "n"),
        (lambda: min_detectable_effect([[1.0, 0.0], [0.0, 0.0]], k=0), "k"),
        (lambda: standard_error(0.1, 0.1, 1, 0), "k"),
        (lambda: variance_components([[1.0, 0.0]]), "2 scenarios"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(call, name):
    with pytest.raises(ValueError, match=name):
        call()
