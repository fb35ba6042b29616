"""The scaling-law fit recovers what it is shown (synthetic data with known coefficients)."""
import numpy as np
import pytest

from benchlib import scaling


def _samples(lam, sigma, kappa, levels, repeats=3, noise=0.01, seed=7):
    rng = np.random.default_rng(seed)
    n = np.repeat(levels, repeats)
    return n, scaling.usl(n, lam, sigma, kappa) * (1 + rng.normal(0, noise, n.size))


def test_recovers_known_coefficients_and_the_peak():
    n, x = _samples(1000, 0.05, 0.002, [1, 2, 4, 8, 16, 32])
    f = scaling.fit(n, x)
    assert f.lam == pytest.approx(1000, rel=0.03)
    assert f.sigma == pytest.approx(0.05, abs=0.01)
    assert f.kappa == pytest.approx(0.002, rel=0.2)
    for name, truth in zip(scaling.PARAMETERS, (1000, 0.05, 0.002)):
        lo, hi = f.ci[name]
        assert lo <= truth <= hi, name
    assert f.peak_n == pytest.approx((0.95 / 0.002) ** 0.5, rel=0.15) and f.retrograde
    assert f.quality == "good" and f.rms_rel_residual < 0.02


def test_no_coherency_means_no_peak():
    n, x = _samples(500, 0.2, 0.0, [1, 2, 4, 8, 16], noise=0.005)
    f = scaling.fit(n, x)
    assert f.sigma == pytest.approx(0.2, abs=0.02)
    assert f.kappa < 1e-3
    assert not f.retrograde  # no evidence of a peak
    assert f.peak_n is None or f.peak_n > 16  # still rising at the last level


def test_a_flat_curve_has_no_peak():
    f = scaling.fit([1, 1, 2, 2, 4, 4], [100, 101, 100, 99, 101, 100])
    assert f.sigma == pytest.approx(1, abs=0.05)
    assert not f.retrograde


def test_three_levels_cannot_test_the_model():
    n, x = _samples(300, 0.3, 0.01, [1, 2, 4])
    f = scaling.fit(n, x)
    assert f.levels == 3 and f.quality.startswith("cannot test")
    assert f.ci["lambda"] is not None  # the noise still bounds the parameters


def test_a_curve_the_law_cannot_follow_is_called_poor():
    n = np.repeat([1, 2, 4, 8, 16], 3)
    x = np.where(n % 4 == 0, 3000.0, 500.0) * n  # a saw, not a USL shape
    f = scaling.fit(n, x)
    assert f.quality.startswith("poor")


def test_nothing_to_fit():
    assert scaling.fit([4, 4, 4], [10, 11, 12]) is None
    assert scaling.fit([1, 1, 2, 2], [100, 101, 150, 151]) is None  # two levels: sigma and kappa trade off
    assert scaling.fit([1, 2], [0, float("nan")]) is None
