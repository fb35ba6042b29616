"""Scaling-law fits: the Universal Scalability Law over a throughput-vs-concurrency curve.

Why: "4 consumers give 1.3x one consumer" says what happened at the measured points;
the USL (Gunther) says why and where it goes next. Throughput at concurrency N is

    X(N) = lambda * N / (1 + sigma * (N - 1) + kappa * N * (N - 1))

lambda is the rate of one client, sigma the share of the work that is serialised
(contention: a lock, one core doing the commits) and kappa the cost of keeping
clients coherent with each other (crosstalk: every client's work makes every other's
dearer, so throughput falls past a peak at N* = sqrt((1 - sigma) / kappa)).

The fit is least squares over every measured sample (not the means), so the confidence
intervals carry the sample noise, from scipy's `curve_fit` covariance and Student's t.
With as many distinct concurrency levels as parameters (three), a curve of this shape
comes close to most sets of three means: the coefficients then describe the points and
the intervals their noise, but nothing tests the law, and `quality` says so. A peak is
claimed only where kappa's interval excludes zero (`retrograde`).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from benchlib.tables import fmt

PARAMETERS = ("lambda", "sigma", "kappa")
POOR_RESIDUAL = 0.10  # relative RMS residual above which the fit is called poor
MIN_LEVELS = 3  # distinct concurrency levels a fit needs


def usl(n: np.ndarray | float, lam: float, sigma: float, kappa: float) -> np.ndarray | float:
    """Throughput the USL predicts at concurrency n."""
    n = np.asarray(n, dtype=float)
    return lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


@dataclass(frozen=True)
class Fit:
    lam: float
    sigma: float
    kappa: float
    ci: dict[str, tuple[float, float] | None]  # 95 % interval per parameter (None: not estimable)
    levels: int  # distinct concurrency levels
    points: int  # samples fitted
    rms_rel_residual: float  # root mean square of (measured - fitted) / fitted
    quality: str  # "good", or why the fit is poor or cannot test the model (_quality)

    @property
    def peak_n(self) -> float | None:
        """Concurrency of peak throughput by the formula: None when the curve never rises
        (sigma >= 1: a second client adds nothing) or never falls (kappa = 0)."""
        if self.sigma >= 1 or self.kappa <= 0:
            return None
        return math.sqrt((1 - self.sigma) / self.kappa)

    @property
    def retrograde(self) -> bool:
        """The data say throughput falls past a peak: kappa's 95 % interval excludes 0."""
        ci = self.ci["kappa"]
        return ci is not None and ci[0] > 0

    def predict(self, n: np.ndarray | float) -> np.ndarray | float:
        return usl(n, self.lam, self.sigma, self.kappa)


def fit(concurrency: list[int] | np.ndarray, throughput: list[float] | np.ndarray) -> Fit | None:
    """Fit the USL to (concurrency, throughput) samples; None when there is nothing to fit
    or the fit does not converge. Three levels at least: through two, sigma and kappa trade
    off freely and any split of them (and any peak) would be the optimiser's, not the data's."""
    n = np.asarray(concurrency, dtype=float)
    x = np.asarray(throughput, dtype=float)
    keep = np.isfinite(x) & (x > 0) & (n >= 1)
    n, x = n[keep], x[keep]
    levels = len(np.unique(n))
    if levels < MIN_LEVELS:
        return None
    lam0 = float(np.mean(x[n == n.min()]) / n.min())
    with warnings.catch_warnings():  # an exact fit has no covariance; handled below
        warnings.simplefilter("ignore", optimize.OptimizeWarning)
        try:
            params, cov = optimize.curve_fit(usl, n, x, p0=(lam0, 0.05, 0.001), bounds=(0, np.inf),
                                             x_scale=(lam0, 0.1, 0.01), max_nfev=10_000)
        except RuntimeError:  # no convergence: no curve is better than a wrong one
            return None
    lam, sigma, kappa = (float(v) for v in params)
    dof = len(x) - len(PARAMETERS)
    ci: dict[str, tuple[float, float] | None] = dict.fromkeys(PARAMETERS)
    if dof > 0 and np.all(np.isfinite(cov)):
        half = stats.t.ppf(0.975, dof) * np.sqrt(np.diag(cov))
        ci = {name: (max(0.0, v - h), v + h) for name, v, h in zip(PARAMETERS, params, half)}
    fitted = usl(n, lam, sigma, kappa)
    rms = float(np.sqrt(np.mean(((x - fitted) / fitted) ** 2)))
    return Fit(lam, sigma, kappa, ci, levels, len(x), rms, _quality(levels, dof, rms))


def _quality(levels: int, dof: int, rms: float) -> str:
    """"good", or a short reason starting with "poor", "cannot test" or "no intervals"."""
    if rms > POOR_RESIDUAL:  # even three means can be out of reach: sigma, kappa >= 0
        return f"poor ({100 * rms:.0f}% off)"
    if levels <= len(PARAMETERS):
        return f"cannot test ({levels} levels)"
    if dof <= 0:
        return "no intervals"
    return "good"


def _interval(ci: tuple[float, float] | None, digits: int) -> str:
    return f"{ci[0]:.{digits}f} – {ci[1]:.{digits}f}" if ci else "–"


def _peak(f: Fit) -> str:
    """The predicted peak where the data show one (kappa's interval excludes 0)."""
    if f.retrograde and f.peak_n is not None:
        return f"{f.peak_n:.1f}"
    return "none shown" if f.sigma < 1 else "flat or falling"


def row(f: Fit, clients: str = "clients") -> dict[str, str]:
    """A fit as a table row: coefficients with 95 % intervals, the predicted peak, the residual."""
    return {
        "λ jobs/s": fmt(f.lam),
        "σ contention": f"{f.sigma:.3f}", "σ 95 %": _interval(f.ci["sigma"], 3),
        "κ coherency": f"{f.kappa:.4f}", "κ 95 %": _interval(f.ci["kappa"], 4),
        f"peak at {clients}": _peak(f),
        "residual rms": f"{100 * f.rms_rel_residual:.1f}%",
        "fit": f.quality,
    }
