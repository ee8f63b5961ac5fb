"""A one-way random-effects fit of grouped residuals and the 80% prediction interval
of a case of a new group, as :mod:`tpusim.validation.uncertainty` makes intervals.

Model: ``r = mu + b_group + e``, ``b ~ N(0, between_var)`` (a chip generation's
effect, shared by its cases), ``e ~ N(0, within_var)`` (a case's own error).

- **Estimates**: restricted maximum likelihood (REML; Patterson and Thompson 1971,
  Harville 1977), the estimator of choice for unbalanced groups (Searle, Casella and
  McCulloch, *Variance Components*, 1992, ch. 6): the serving kinds have 25, 5 and
  1 cases per chip. The REML likelihood is profiled over ``gamma = between_var /
  within_var`` (a grid, then a bounded search: deterministic); ``gamma = 0`` (no
  chip effect) is allowed. ``mu`` is the generalised least-squares mean: groups
  weighted by ``n_c / (within_var + n_c between_var)``, so a chip with one case
  counts as one case when chips do not differ and as one chip when they differ a lot.
- **Predictive variance** of a case of a new group: ``between_var + within_var +
  mean_var`` (its chip effect, its own error, the uncertainty of ``mu``).
- **Degrees of freedom** (Satterthwaite 1946): the predictive variance is estimated,
  so the interval takes Student's t with ``dof = 2 V^2 / var(V)``, ``var(V)`` by the
  delta method from the inverse REML information (the method lmerTest uses for mixed
  models). With few groups and a large chip effect it falls to about ``groups - 1``;
  when the within-group error dominates it rises towards ``cases - groups``. The
  information is taken at the estimates even when ``between_var`` is 0, so a chip
  effect estimated as 0 from few groups keeps its uncertainty.
- **Without within-group information** (every group one case, or no spread inside
  any group) the chip effect and a case's error cannot be told apart: the group means
  are taken as a plain normal sample, ``V = s^2 (1 + 1/k)`` with ``k - 1`` degrees
  of freedom (the exact prediction interval).

For balanced groups the fit is the ANOVA one (``between_var = (MSB - MSW) / n``
when positive) and ``dof`` the textbook Satterthwaite of ``MSB (k + 1) / (n k) +
MSW (1 - 1/n)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import minimize_scalar

GRID_POINTS = 400
"""Points of the grid over ``rho = gamma / (1 + gamma)`` in [0, 1) before the search."""


@dataclass(frozen=True)
class OneWayFit:
    """The fit (module docstring), variances in the residuals' units squared."""

    mean: float
    between_var: float
    within_var: float
    mean_var: float
    dof: float

    @property
    def predictive_var(self) -> float:
        """The variance of a case of a new group around ``mean``."""
        return self.between_var + self.within_var + self.mean_var


def one_way_fit(groups: Sequence[Sequence[float]]) -> OneWayFit:
    """The REML fit of ``groups`` (each a group's values); ValueError with fewer than
    two groups or an empty one."""
    if len(groups) < 2 or any(len(g) == 0 for g in groups):
        raise ValueError("a one-way fit needs at least two groups, none empty")
    sizes = np.array([len(g) for g in groups], dtype=float)
    means = np.array([float(np.mean(g)) for g in groups])
    within_ss = sum(float(np.sum((np.asarray(g) - np.mean(g)) ** 2)) for g in groups)
    if within_ss <= 0.0:
        return _means_only(means)
    gamma = _reml_ratio(sizes, means, within_ss)
    weights, mean, quadratic = _profile(sizes, means, within_ss, gamma)
    within_var = quadratic / float(sizes.sum() - 1)
    between_var = float(gamma * within_var)
    weights = weights / within_var
    fit = OneWayFit(mean, between_var, within_var, 1 / float(weights.sum()), dof=math.nan)
    return replace(fit, dof=_satterthwaite(sizes, fit))


def _means_only(means: np.ndarray) -> OneWayFit:
    """No within-group information: the means as a normal sample (module docstring)."""
    k = len(means)
    var = float(np.var(means, ddof=1))
    return OneWayFit(float(np.mean(means)), var, 0.0, var / k, float(k - 1))


def _profile(
    sizes: np.ndarray, means: np.ndarray, within_ss: float, gamma: float
) -> tuple[np.ndarray, float, float]:
    """At ``gamma``: the groups' weights (times ``within_var``), the GLS mean and the
    quadratic form ``within_var`` is profiled from (times ``cases - 1``)."""
    weights = sizes / (1 + sizes * gamma)
    mean = float(weights @ means / weights.sum())
    return weights, mean, within_ss + float(weights @ (means - mean) ** 2)


def _reml_deviance(sizes: np.ndarray, means: np.ndarray, within_ss: float, rho: float) -> float:
    """-2 x the profiled REML log-likelihood (up to a constant) at ``rho``."""
    gamma = rho / (1 - rho)
    weights, _, quadratic = _profile(sizes, means, within_ss, gamma)
    logdet = float(np.sum(np.log1p(sizes * gamma)))
    return (sizes.sum() - 1) * math.log(quadratic) + logdet + math.log(weights.sum())


def _reml_ratio(sizes: np.ndarray, means: np.ndarray, within_ss: float) -> float:
    """The REML ``gamma``: the grid's best ``rho``, refined by a bounded search beside
    it, 0 when the boundary is best."""

    def deviance(rho: float) -> float:
        return _reml_deviance(sizes, means, within_ss, rho)

    grid = np.linspace(0.0, 1.0, GRID_POINTS, endpoint=False)
    best = int(np.argmin([deviance(rho) for rho in grid]))
    step = float(grid[1])
    bounds = (max(best - 1, 0) * step, min((best + 1) * step, 1 - 1e-9))
    found = minimize_scalar(deviance, bounds=bounds, method="bounded", options={"xatol": 1e-10})
    rho = min((0.0, float(grid[best]), float(found.x)), key=deviance)
    return rho / (1 - rho)


def _information(sizes: np.ndarray, between_var: float, within_var: float) -> np.ndarray:
    """The REML information of (between_var, within_var): ``tr(P V_i P V_j) / 2``."""
    member = np.repeat(np.arange(len(sizes)), sizes.astype(int))
    shared = (member[:, None] == member[None, :]).astype(float)
    cov = between_var * shared + within_var * np.eye(len(member))
    inv = np.linalg.inv(cov)
    ones = inv.sum(axis=1)
    proj = inv - np.outer(ones, ones) / ones.sum()
    parts = [proj @ shared, proj]
    return np.array([[0.5 * float(np.trace(a @ b)) for b in parts] for a in parts])


def _satterthwaite(sizes: np.ndarray, fit: OneWayFit) -> float:
    """``2 V^2 / var(V)`` with ``var(V)`` by the delta method from the inverse REML
    information (module docstring)."""
    denominators = fit.within_var + sizes * fit.between_var
    weight_sum = float(np.sum(sizes / denominators))
    gradient = np.array(
        [
            1 + float(np.sum(sizes**2 / denominators**2)) / weight_sum**2,
            1 + float(np.sum(sizes / denominators**2)) / weight_sum**2,
        ]
    )
    cov = np.linalg.inv(_information(sizes, fit.between_var, fit.within_var))
    return float(2 * fit.predictive_var**2 / float(gradient @ cov @ gradient))
