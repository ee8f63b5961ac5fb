"""The capacity of a deployment at an SLO: the highest request rate whose p99 TTFT and
p99 TPOT meet it (and nothing is rejected), by bisection on the rate.

Every trial serves the same stream shape (count, token counts, seed) at a new rate,
so the search is deterministic, and judges it in steady state
(:mod:`tpusim.serving.steady`: warm-up and cool-down discarded, batch means, the queue
not trending). The search first measures the saturated throughput (the stream
offered well above it, :func:`saturated_throughput_per_s`) and caps the rate at
:data:`MAX_UTILISATION` of it: above, the queue's relaxation time is a sizeable part
of any affordable stream and its p99s depend on the stream's length, not on the rate
(issue 22: 61 req/s at 500 requests, 41 at 4,000). The cap is tried first; when it
fails the SLO the search halves until one rate meets it and bisects until the
bracket is within ``tolerance`` (relative). :func:`saturated_rate_per_s` is a closed
estimate of the saturated rate (the latency curve's ``auto`` rates).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tpusim.serving.costs import ReplicaBatch
from tpusim.serving.metrics import Slo, meets, summary
from tpusim.serving.rows import Json, Row, number, required
from tpusim.serving.scheduler import Request
from tpusim.serving.service import Runner
from tpusim.serving.steady import steady_state

#: One trial: (rate per s, p99 TTFT s, p99 TPOT s).
CurvePoint = tuple[float, float | None, float | None, float | None, float | None]
#: Relative width of the final bracket (a design choice: 1% of the rate).
DEFAULT_TOLERANCE = 0.01
#: Highest utilisation (offered rate over the saturated throughput) the search accepts
#: as steady (a design choice, from the queue's relaxation time: an M/M/1 queue at
#: utilisation rho relaxes in about ``rho / (1 - sqrt(rho))^2`` requests, 341 at 0.9,
#: a tenth of the 3,200 requests a 4,000-request stream measures after its warm-up
#: and cool-down; at 0.97 it is 2,000 and no 4,000-request run shows its steady p99).
MAX_UTILISATION = 0.9
#: Completion-time percentiles between which the saturated throughput is counted.
SATURATION_WINDOW = (0.1, 0.9)
#: The saturated throughput is measured at this multiple of the closed-form estimate
#: (:func:`saturated_rate_per_s`, which errs low), doubled while the server keeps up
#: (serves at least ``KEEPS_UP`` of the offered rate), at most 6 times (design choices).
OVERLOAD = 2.0
KEEPS_UP = 0.95
MAX_OVERLOAD_DOUBLINGS = 6
#: Halvings tried below the saturated rate before giving up (2^-30 of it).
MAX_HALVINGS = 30
#: Loads below capacity, as fractions of it, that the serving curve adds to the search's
#: trials (a design choice: the curve a serving engineer reads rises to the knee).
CURVE_FRACTIONS = (0.25, 0.5, 0.75)

Stream = Callable[[float], list[Request]]


def saturated_rate_per_s(service: Runner, prompt_tokens: float, output_tokens: float) -> float:
    """An estimate of the rate (requests/s) a saturated deployment serves: each request
    costs its prompt at the full-budget prefill's time per token plus its output at the
    full-slot decode's time per token (at the mean context); prefill and decode
    iterations taken apart, so it errs low where they share iterations well."""
    d = service.deployment
    slots, budget = d.max_sequences, d.max_tokens
    context = int(prompt_tokens + output_tokens / 2)
    decode = service.costs.time_s(ReplicaBatch(decode=slots, kv_tokens=slots * context))
    chunk = int(min(budget, max(1.0, prompt_tokens)))
    chunks = max(1, budget // chunk)
    prefill_batch = ReplicaBatch(
        decode=0,
        chunk_tokens=chunks * chunk,
        chunks=chunks,
        prefill_pairs=chunks * chunk * (chunk + 1) / 2,
    )
    prefill = service.costs.time_s(prefill_batch) / (chunks * chunk)
    per_request_s = prompt_tokens * prefill + output_tokens * decode / slots
    return d.replicas / per_request_s


def trial(service: Runner, stream: Stream, rate: float, slo: Slo) -> Row:
    """Serve ``stream(rate)``; the summary and whether it met the SLO in steady state
    (:mod:`tpusim.serving.steady`): the run reached it (nothing rejected, the queue
    not trending) and the p99s of the measured requests (warm-up and cool-down
    discarded) meet the SLO. The row's ``ttft_p99_s`` and ``tpot_p99_s`` are those
    steady-state p99s; ``steady_state`` holds the batch means and the verdict."""
    requests = stream(rate)
    service.run(requests)
    row = summary(requests, service.chips, slo, rate_per_s=rate)
    steady = steady_state(requests)
    row["steady_state"] = steady
    if steady["reached"]:
        row["ttft_p99_s"], row["tpot_p99_s"] = steady["ttft_p99_s"], steady["tpot_p99_s"]
    row["slo_met"] = steady["reached"] and meets(
        number(row, "ttft_p99_s"), number(row, "tpot_p99_s"), slo
    )
    return row


def _below(tried: Callable[[float], Row], cap: float) -> tuple[float, float, Row | None, int]:
    """(lo, hi, summary at lo, trials): halving from ``cap`` (which failed) until a rate
    ``lo`` meets the SLO, ``hi = 2 lo`` the last that did not; summary None when none
    within ``2^-30`` of the cap does."""
    hi, rate = cap, cap / 2
    for trials in range(1, MAX_HALVINGS + 1):
        row = tried(rate)
        if row["slo_met"]:
            return rate, hi, row, trials
        hi, rate = rate, rate / 2
    return 0.0, hi, None, MAX_HALVINGS


def curve_point(row: Row) -> CurvePoint:
    """(rate per s, p99 TTFT s, p99 TPOT s, p50 TTFT s, p50 TPOT s) of one trial's
    summary (the medians after the tails, so a reader of the first three is unchanged)."""
    return (
        required(row, "rate_per_s"),
        number(row, "ttft_p99_s"),
        number(row, "tpot_p99_s"),
        number(row, "ttft_p50_s"),
        number(row, "tpot_p50_s"),
    )


def _window_rate(requests: list[Request]) -> float:
    """Requests/s completed between the 10th and the 90th percentile completions, in
    output tokens over the mean output (see :func:`saturated_throughput_per_s`)."""
    done = [r for r in requests if r.finished_at is not None]
    if len(done) < 2:
        return 0.0
    first = np.array([r.first_token_at for r in done], dtype=float)
    finish = np.array([r.finished_at for r in done], dtype=float)
    outputs = np.array([r.output_tokens for r in done], dtype=float)
    t0, t1 = np.percentile(finish, [100 * SATURATION_WINDOW[0], 100 * SATURATION_WINDOW[1]])
    if t1 <= t0:
        return 0.0
    span = np.maximum(finish - first, 1e-300)

    def tokens_by(t: float) -> float:
        part = np.clip((t - first) / span, 0.0, 1.0)
        return float(np.sum(np.where(t >= first, 1 + (outputs - 1) * part, 0.0)))

    return (tokens_by(t1) - tokens_by(t0)) / (t1 - t0) / float(outputs.mean())


def saturated_throughput_per_s(service: Runner, stream: Stream, start_rate_per_s: float) -> float:
    """The rate (requests/s) the deployment completes when saturated, measured on
    ``stream`` offered at :data:`OVERLOAD` times ``start_rate_per_s`` (doubled, up to
    :data:`MAX_OVERLOAD_DOUBLINGS` times, while the server keeps up with it): output
    tokens counted between the instants of the 10th and the 90th percentile
    completions (the queue never empty), divided by the mean output per request.
    Poisson arrivals, not all at once: fixed-length requests sent together run in
    lockstep waves (admitted, decoded and finished together) and complete less than
    a server fed one by one; tokens, not completions, because a window's edge inside
    a wave would move a count of completions by a whole batch. A request's tokens by
    time ``t`` are interpolated linearly between its first token and its last."""
    rate = OVERLOAD * start_rate_per_s
    for _ in range(MAX_OVERLOAD_DOUBLINGS):
        requests = stream(rate)
        service.run(requests)
        served = _window_rate(requests)
        if served < KEEPS_UP * rate:
            return served
        rate *= 2
    return served


def find_capacity(
    service: Runner,
    stream: Stream,
    slo: Slo,
    tolerance: float = DEFAULT_TOLERANCE,
) -> Row:
    """The capacity search (see the module docstring). Returns the summary at the
    highest rate found to meet the SLO with ``capacity_rate_per_s``, per chip,
    ``saturation_rate_per_s``, ``capacity_limited_by`` (``utilisation`` or ``slo``) and
    ``trials``; ``capacity_rate_per_s`` is 0 when no rate within ``2^30`` of the cap
    meets it. ``curve`` lists every trial's :func:`curve_point`, by rate: the serving
    curve (latency against rate) the search traced, and the load below capacity at
    :data:`CURVE_FRACTIONS` of it (not counted in ``trials``)."""
    points: list[CurvePoint] = []

    def tried(rate: float) -> Row:
        row = trial(service, stream, rate, slo)
        points.append(curve_point(row))
        return row

    found = _search(service, stream, tried, tolerance)
    capacity = float(found["capacity_rate_per_s"])  # type: ignore[arg-type]
    for fraction in CURVE_FRACTIONS if capacity > 0 else ():
        tried(fraction * capacity)
    return found | {"curve": list[Json](sorted(points))}


def _search(
    service: Runner, stream: Stream, tried: Callable[[float], Row], tolerance: float
) -> Row:
    """The search of :func:`find_capacity` over ``tried`` (a trial recording its curve
    point)."""
    saturation = _saturation(service, stream)
    cap = MAX_UTILISATION * saturation
    head = {"saturation_rate_per_s": saturation, "max_utilisation": MAX_UTILISATION}
    if cap <= 0:
        return head | _found(0.0, service.chips, 0, "slo")
    at_cap = tried(cap)
    if at_cap["slo_met"]:
        return head | at_cap | _found(cap, service.chips, 1, "utilisation")
    lo, hi, found, trials = _below(tried, cap)
    trials += 1
    if found is None:
        return head | _found(0.0, service.chips, trials, "slo")
    lo, found, trials = _bisect(tried, lo, hi, found, trials, tolerance)
    return head | found | _found(lo, service.chips, trials, "slo")


def _saturation(service: Runner, stream: Stream) -> float:
    """The saturated throughput (requests/s), estimated from a probe stream's mean
    token counts and measured with an infinite-rate stream."""
    probe = stream(1.0)
    estimate = saturated_rate_per_s(
        service,
        float(np.mean([r.prompt_tokens for r in probe])),
        float(np.mean([r.output_tokens for r in probe])),
    )
    return saturated_throughput_per_s(service, stream, estimate)


def _bisect(
    tried: Callable[[float], Row],
    lo: float,
    hi: float,
    found: Row,
    trials: int,
    tolerance: float,
) -> tuple[float, Row, int]:
    """Halve ``[lo, hi]`` (requests/s; ``lo`` meets the SLO, ``hi`` does not) until it
    is within ``tolerance`` of ``hi``: the highest rate that met it, its row and the
    trials so far."""
    while (hi - lo) / hi > tolerance:
        mid = (lo + hi) / 2
        row, trials = tried(mid), trials + 1
        if row["slo_met"]:
            lo, found = mid, row
        else:
            hi = mid
    return lo, found, trials


def _found(rate: float, chips: int, trials: int, limited_by: str) -> Row:
    return {
        "capacity_rate_per_s": rate,
        "capacity_rate_per_s_per_chip": rate / chips,
        "trials": trials,
        "capacity_limited_by": limited_by,
    }
