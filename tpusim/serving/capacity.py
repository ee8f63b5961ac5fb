"""The capacity of a deployment at an SLO: the highest request rate whose p99 TTFT and
p99 TPOT meet it (and nothing is rejected), by bisection on the rate.

Every trial serves the same stream shape (count, token counts, seed) at a new rate,
so the search is deterministic. It starts from an estimate of the saturated rate
(:func:`saturated_rate_per_s`), doubles or halves until one rate meets the SLO and
twice it does not, then bisects until the bracket is within ``tolerance`` (relative).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tpusim.errors import InputError
from tpusim.serving.costs import ReplicaBatch
from tpusim.serving.metrics import Slo, meets, summary
from tpusim.serving.scheduler import Request
from tpusim.serving.service import Runner

#: Relative width of the final bracket (a design choice: 2% of the rate).
DEFAULT_TOLERANCE = 0.02
#: Halvings tried below the saturated rate before giving up (2^-30 of it).
MAX_HALVINGS = 30

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
        decode=0, chunk_tokens=chunks * chunk, chunks=chunks,
        prefill_pairs=chunks * chunk * (chunk + 1) / 2,
    )  # fmt: skip
    prefill = service.costs.time_s(prefill_batch) / (chunks * chunk)
    per_request_s = prompt_tokens * prefill + output_tokens * decode / slots
    return d.replicas / per_request_s


def trial(service: Runner, stream: Stream, rate: float, slo: Slo) -> dict[str, Any]:
    """Serve ``stream(rate)``; the summary and whether it met the SLO."""
    requests = stream(rate)
    service.run(requests)
    row = summary(requests, service.chips, slo, rate_per_s=rate)
    row["slo_met"] = row["rejected"] == 0 and meets(row["ttft_p99_s"], row["tpot_p99_s"], slo)
    return row


def _bracket(
    tried: Callable[[float], dict[str, Any]], rate: float
) -> tuple[float, float, dict[str, Any] | None, int]:
    """(lo, hi, summary at lo, trials): ``lo`` meets the SLO and ``hi = 2 lo`` does not,
    by doubling or halving from ``rate`` (``tried(rate)``: one trial's summary);
    ``summary`` None when nothing met it."""
    row = tried(rate)
    trials, step = 1, (2.0 if row["slo_met"] else 0.5)
    best = row if row["slo_met"] else None
    for _ in range(MAX_HALVINGS):
        nxt = rate * step
        row, trials = tried(nxt), trials + 1
        if step > 1 and not row["slo_met"]:
            return rate, nxt, best, trials
        if step < 1 and row["slo_met"]:
            return nxt, rate, row, trials
        rate, best = nxt, (row if row["slo_met"] else best)
    if best is not None:  # every rate met the SLO: the stream never loads the server
        raise InputError(
            f"every request rate up to {rate:.3g}/s meets the SLO: the stream is too short "
            "to load the server (raise the number of requests)"
        )
    return 0.0, rate, None, trials


def curve_point(row: dict[str, Any]) -> tuple[float, float | None, float | None]:
    """(rate per s, p99 TTFT s, p99 TPOT s) of one trial's summary."""
    return (float(row["rate_per_s"]), row["ttft_p99_s"], row["tpot_p99_s"])


def find_capacity(
    service: Runner,
    stream: Stream,
    slo: Slo,
    start_rate_per_s: float,
    tolerance: float = DEFAULT_TOLERANCE,
) -> dict[str, Any]:
    """The capacity search (see the module docstring). Returns the summary at the
    highest rate found to meet the SLO with ``capacity_rate_per_s``, per chip, and
    ``trials``; ``capacity_rate_per_s`` is 0 when no rate within ``2^30`` of the start
    meets it. ``curve`` lists every trial's :func:`curve_point`, by rate: the serving
    curve (latency against rate) the search traced."""
    points: list[tuple[float, float | None, float | None]] = []

    def tried(rate: float) -> dict[str, Any]:
        row = trial(service, stream, rate, slo)
        points.append(curve_point(row))
        return row

    lo, hi, best, trials = _bracket(tried, start_rate_per_s)
    if best is None:
        return {"capacity_rate_per_s": 0.0, "capacity_rate_per_s_per_chip": 0.0, "trials": trials,
                "curve": sorted(points)}  # fmt: skip
    while (hi - lo) / hi > tolerance:
        mid = (lo + hi) / 2
        row, trials = tried(mid), trials + 1
        if row["slo_met"]:
            lo, best = mid, row
        else:
            hi = mid
    return best | {
        "capacity_rate_per_s": lo,
        "capacity_rate_per_s_per_chip": lo / service.chips,
        "trials": trials,
        "curve": sorted(points),
    }
