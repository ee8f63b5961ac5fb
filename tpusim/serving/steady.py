"""Steady state of a serving run: the figures of the requests that saw a loaded,
stationary server, with a confidence interval and a stability verdict.

Method (batch means, as in discrete-event simulation practice):

* **warm-up and cool-down discarded**: the first :data:`WARMUP_FRACTION` of the
  requests (by arrival) see a server filling up from empty, the last
  :data:`COOLDOWN_FRACTION` one draining (no arrivals behind them); both are dropped;
* **a stated number of batches**: the rest, in arrival order, is cut into
  :data:`BATCHES` contiguous batches; each batch's p99 TTFT and p99 TPOT are
  computed, and their mean with a 95% Student-t interval (``t(0.975, B - 1)``,
  :data:`T_975_BATCHES`) is reported next to the pooled p99 over the measured
  requests (what the SLO is checked on);
* **stability**: the batches' mean time in the waiting queue (by Little's law, the
  queue length divided by the arrival rate) is regressed on the batch index. The
  queue is *trending* when the slope is positive at 95% (``t(0.975, B - 2)``,
  :data:`T_975_SLOPE`) and the rise over the measured window exceeds the mean wait
  itself (a queue growing from empty rises by more than its mean; a stationary one
  almost never does). A trending queue, or a rejected request, means no steady
  state: the p99s then grow with the run's length and say nothing of the rate.
"""

from __future__ import annotations

import math

import numpy as np

from tpusim.serving.metrics import latencies
from tpusim.serving.rows import Row
from tpusim.serving.scheduler import Request

#: Fraction of the requests (the first arrivals) discarded as warm-up (a design
#: choice: 10%, the server fills its batch within the first few hundred requests at
#: the stream lengths capacity is searched with).
WARMUP_FRACTION = 0.1
#: Fraction of the requests (the last arrivals) discarded as cool-down (design choice).
COOLDOWN_FRACTION = 0.1
#: Batches of the batch-means method (a stated number; design choice: 10).
BATCHES = 10
#: Student-t 0.975 quantile at ``BATCHES - 1 = 9`` degrees of freedom (tables).
T_975_BATCHES = 2.262
#: Student-t 0.975 quantile at ``BATCHES - 2 = 8`` degrees of freedom (tables).
T_975_SLOPE = 2.306
#: Fewest measured requests per batch for a steady-state verdict (a p99 of fewer
#: than 10 values is the maximum; design choice).
MIN_PER_BATCH = 10
#: Fewest requests of a stream whose steady state can be judged (125 at the values
#: above: 100 measured after the warm-up and the cool-down).
MIN_REQUESTS = math.ceil(BATCHES * MIN_PER_BATCH / (1 - WARMUP_FRACTION - COOLDOWN_FRACTION))


def _p99(values: np.ndarray) -> float | None:
    values = values[~np.isnan(values)]
    return float(np.percentile(values, 99)) if values.size else None


def _interval(values: list[float | None]) -> tuple[float | None, float | None]:
    """(mean, 95% half-width) of the batch values (None when any is missing)."""
    if any(v is None for v in values):
        return None, None
    x = np.array(values, dtype=float)
    return float(x.mean()), float(T_975_BATCHES * x.std(ddof=1) / math.sqrt(x.size))


def trend(waits: list[float]) -> tuple[float, bool]:
    """(slope in s per batch, trending) of the batches' mean waits (see the module
    docstring)."""
    y = np.array(waits, dtype=float)
    x = np.arange(y.size, dtype=float)
    xc = x - x.mean()
    slope = float((xc * (y - y.mean())).sum() / (xc * xc).sum())
    residual = y - y.mean() - slope * xc
    se = math.sqrt(float((residual**2).sum()) / (y.size - 2) / float((xc * xc).sum()))
    significant = slope > 0 and (se == 0 or slope / se > T_975_SLOPE)
    rise = slope * (y.size - 1)
    return slope, significant and rise > float(y.mean())


def measured(requests: list[Request]) -> list[Request]:
    """The requests left after the warm-up and the cool-down, by arrival."""
    ordered = sorted(requests, key=lambda r: (r.arrival_at, r.id))
    n = len(ordered)
    start, end = math.ceil(WARMUP_FRACTION * n), n - math.ceil(COOLDOWN_FRACTION * n)
    return ordered[start:end]


def steady_state(requests: list[Request]) -> Row:
    """The steady-state figures (JSON ``steady_state``): ``warmup_requests``,
    ``cooldown_requests``, ``batches``, the pooled ``ttft_p99_s`` and ``tpot_p99_s`` of
    the measured requests, the batch means' ``*_p99_mean_s`` and ``*_p99_ci_s``
    (95% half-width), ``queue_wait_slope_s_per_batch``, ``queue_trending`` and
    ``reached`` (enough requests, none rejected, no trend)."""

    n, kept = len(requests), measured(requests)
    row: Row = {
        "warmup_requests": math.ceil(WARMUP_FRACTION * n),
        "cooldown_requests": math.ceil(COOLDOWN_FRACTION * n),
        "batches": BATCHES,
        "measured_requests": len(kept),
    }
    done = [r for r in kept if r.finished_at is not None]
    if len(done) < BATCHES * MIN_PER_BATCH:
        return row | {"reached": False, "reason": f"under {BATCHES * MIN_PER_BATCH} measured"}
    lat = latencies(done)
    batches = np.array_split(np.arange(len(done)), BATCHES)
    waits = [float(np.mean([done[i].queued_s for i in b])) for b in batches]
    slope, trending = trend(waits)
    for name in ("ttft", "tpot"):
        mean, half = _interval([_p99(lat[name][b]) for b in batches])
        row |= {
            f"{name}_p99_s": _p99(lat[name]),
            f"{name}_p99_mean_s": mean,
            f"{name}_p99_ci_s": half,
        }
    rejected = any(r.rejected for r in requests)
    row |= {
        "queue_wait_slope_s_per_batch": slope,
        "queue_trending": trending,
        "reached": not trending and not rejected,
    }
    if not row["reached"]:
        row["reason"] = "the queue keeps growing" if trending else "requests were rejected"
    return row
