"""The figures of a serving run, as ``tpusim serve --json`` prints them.

Per request: TTFT (first token minus arrival), TPOT (time per output token after the
first: ``(finish - first token) / (output - 1)``, for requests of 2+ output tokens,
vLLM's definition), end-to-end latency (finish minus arrival); percentiles over the
completed requests (numpy's linear interpolation). Throughput is over the run's span,
from the first arrival to the last completion; ``tokens_per_s_per_chip`` counts output
tokens, ``total_tokens_per_s_per_chip`` prompt and output tokens. Goodput at an SLO:
the completed requests whose TTFT and TPOT both meet it, per second of the span.
``request_throughput_per_s`` is the completed requests per second of the span and
``ttft_mean_s`` / ``tpot_mean_s`` the means (what vLLM's benchmark prints besides
the percentiles). Energy and cost per million output tokens when the all-in power
per chip (W) or the price per chip-hour (USD) is given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from tpusim.serving.rows import Row
from tpusim.serving.scheduler import Request

#: How a benchmark client computes a request's TPOT (:func:`latencies`).
TpotDefinition = Literal["vllm", "jetstream-2024"]
TPOT_DEFINITIONS: tuple[str, ...] = get_args(TpotDefinition)

#: Percentiles reported for each latency.
PERCENTILES = (50, 90, 99)
#: Seconds per hour and tokens per million (unit conversions).
SECONDS_PER_HOUR = 3600.0
TOKENS_PER_MILLION = 1e6


@dataclass(frozen=True)
class Slo:
    """A latency SLO on the p99: time to first token and time per output token (s)."""

    ttft_s: float
    tpot_s: float


def latencies(requests: list[Request], tpot: TpotDefinition = "vllm") -> dict[str, np.ndarray]:
    """Per completed request: ``ttft``, ``tpot`` and ``e2e``, in seconds. ``tpot`` as the
    benchmark client defines it (:data:`TPOT_DEFINITIONS`): ``vllm``, ``(finish - first
    token) / (output - 1)``, NaN for a one-token request; ``jetstream-2024``, JetStream's
    client before 2025 (``latency / output_len``, AI-Hypercomputer/JetStream
    ``benchmarks/benchmark_serving.py`` at 530d364, line 382), the whole latency, queueing
    and prefill included, over the output tokens."""
    done = [r for r in requests if r.finished_at is not None]
    arrival = np.array([r.arrival_at for r in done])
    first = np.array([r.first_token_at for r in done], dtype=float)
    finish = np.array([r.finished_at for r in done], dtype=float)
    outputs = np.array([r.output_tokens for r in done])
    if tpot == "jetstream-2024":
        per_token = (finish - arrival) / outputs
    else:
        per_token = np.full(len(done), np.nan)
        many = outputs > 1
        per_token[many] = (finish[many] - first[many]) / (outputs[many] - 1)
    return {"ttft": first - arrival, "tpot": per_token, "e2e": finish - arrival}


def _percentiles(name: str, values: np.ndarray) -> dict[str, float | None]:
    values = values[~np.isnan(values)]
    return {
        f"{name}_p{p}_s": float(np.percentile(values, p)) if values.size else None
        for p in PERCENTILES
    }


def _mean(values: np.ndarray) -> float | None:
    values = values[~np.isnan(values)]
    return float(values.mean()) if values.size else None


def summary(
    requests: list[Request],
    chips: int,
    slo: Slo | None = None,
    power_per_chip_W: float | None = None,
    price_per_chip_hour_usd: float | None = None,
    rate_per_s: float | None = None,
) -> Row:
    """The run's figures (see the module docstring); ``chips`` of every replica;
    ``rate_per_s`` the offered rate (default: measured from the arrivals; inf: the row's
    ``rate_per_s`` is None)."""
    lat = latencies(requests)
    done = [r for r in requests if r.finished_at is not None]
    arrivals = [r.arrival_at for r in requests]
    span = arrivals[-1] - arrivals[0]
    measured = (len(requests) - 1) / span if span > 0 else None
    end = max((float(r.finished_at or 0.0) for r in done), default=arrivals[0])
    duration = end - min(arrivals)
    out_tokens = sum(r.output_tokens for r in done)
    all_tokens = out_tokens + sum(r.prompt_tokens for r in done)
    out_rate = out_tokens / duration if duration > 0 else None
    row: Row = {
        "requests": len(requests),
        "completed": len(done),
        "rejected": sum(r.rejected for r in requests),
        "rate_per_s": _offered(rate_per_s, measured),
        "measured_rate_per_s": measured,
        "duration_s": duration,
        **_percentiles("ttft", lat["ttft"]),
        **_percentiles("tpot", lat["tpot"]),
        **_percentiles("e2e", lat["e2e"]),
        "request_throughput_per_s": len(done) / duration if duration > 0 else None,
        "ttft_mean_s": _mean(lat["ttft"]),
        "tpot_mean_s": _mean(lat["tpot"]),
        "output_tokens": out_tokens,
        "output_tokens_per_s": out_rate,
        "total_tokens_per_s": all_tokens / duration if duration > 0 else None,
        "tokens_per_s_per_chip": out_rate / chips if out_rate else None,
        "total_tokens_per_s_per_chip": all_tokens / duration / chips if duration > 0 else None,
        "preemptions": sum(r.preemptions for r in requests),
        "prefix_hits": sum(r.prefix_hit for r in requests),
        "mean_queue_s": float(np.mean([r.queued_s for r in done])) if done else None,
    }
    if slo is not None:
        row |= goodput(lat, duration, len(done), slo)
    row |= economics(out_rate, chips, power_per_chip_W, price_per_chip_hour_usd)
    return row


def _offered(rate_per_s: float | None, measured: float | None) -> float | None:
    """The offered rate of the row: as given, None for inf (every request at 0; JSON
    has no infinity), else (not given) the measured one."""
    if rate_per_s is None:
        return measured
    return None if math.isinf(rate_per_s) else rate_per_s


def goodput(lat: dict[str, np.ndarray], duration_s: float, completed: int, slo: Slo) -> Row:
    """Requests meeting both SLOs per second, their fraction, and the SLO itself. A
    one-token request has no TPOT and meets that part."""
    tpot = np.nan_to_num(lat["tpot"], nan=0.0)
    good = int(np.sum((lat["ttft"] <= slo.ttft_s) & (tpot <= slo.tpot_s)))
    p99 = _percentiles("x", lat["ttft"])["x_p99_s"], _percentiles("x", lat["tpot"])["x_p99_s"]
    return {
        "slo_ttft_s": slo.ttft_s,
        "slo_tpot_s": slo.tpot_s,
        "goodput_rate_per_s": good / duration_s if duration_s > 0 else None,
        "goodput_fraction": good / completed if completed else None,
        "slo_met": meets(p99[0], p99[1], slo),
    }


def economics(
    output_tokens_per_s: float | None,
    chips: int,
    power_per_chip_W: float | None,
    price_per_chip_hour_usd: float | None,
) -> dict[str, float]:
    """Energy (J) and cost (USD) per million output tokens, when known."""
    out: dict[str, float] = {}
    if not output_tokens_per_s:
        return out
    seconds_per_million = TOKENS_PER_MILLION / output_tokens_per_s
    if power_per_chip_W is not None:
        out["energy_per_million_tokens_J"] = power_per_chip_W * chips * seconds_per_million
    if price_per_chip_hour_usd is not None:
        hours = chips * seconds_per_million / SECONDS_PER_HOUR
        out["cost_per_million_tokens_usd"] = price_per_chip_hour_usd * hours
    return out


def meets(ttft_p99_s: float | None, tpot_p99_s: float | None, slo: Slo) -> bool:
    """Whether p99 TTFT and p99 TPOT meet the SLO (no completed request: no; no TPOT,
    all one-token requests: that part holds)."""
    if ttft_p99_s is None:
        return False
    return ttft_p99_s <= slo.ttft_s and (tpot_p99_s is None or tpot_p99_s <= slo.tpot_s)
