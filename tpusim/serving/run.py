"""What ``tpusim serve`` and the ``serving`` workload kind run: a stream of requests
on a deployment, or the capacity search, as one row of figures."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tpusim.serving.capacity import find_capacity, saturated_rate_per_s
from tpusim.serving.disaggregated import DisaggregatedService, transfer_summary
from tpusim.serving.metrics import Slo, summary
from tpusim.serving.metrics import economics as per_million
from tpusim.serving.option_error import OptionError
from tpusim.serving.options import ServeOptions
from tpusim.serving.requests import read_trace, synthetic_requests
from tpusim.serving.rows import Json, Row, number
from tpusim.serving.scheduler import Request
from tpusim.serving.service import Deployment, Runner, Service, ServingRun, check_clients
from tpusim.serving.steady import steady_state

if TYPE_CHECKING:
    from tpusim.config.loader import System

#: The requests of an open loop at a rate (requests/s).
Stream = Callable[[float], list[Request]]


def serve(options: ServeOptions, system: str | System) -> Row:
    """Run what ``options`` ask on ``system`` (a shipped name, a YAML path or a loaded
    system): the stream at its rate, its closed loop or its trace, or the capacity
    search at its SLO; the JSON row. Raises InputError for bad input
    (:class:`~tpusim.serving.option_error.OptionError` naming the option)."""
    return serve_run(options, system)[0]


def serve_run(options: ServeOptions, system: str | System) -> tuple[Row, ServingRun | None]:
    """:func:`serve`'s row and the run behind it (its replicas' iterations; None for
    the capacity search, whose trials are many runs)."""
    service = check_options(options, system)
    slo = options.slo()
    run = None
    if options.find_capacity and slo is not None:
        row = find_capacity(service, stream_of(options), slo)
        row |= per_million(number(row, "output_tokens_per_s"), service.chips, **options.economics())
    else:
        row, run = _served(service, options, slo)
    if isinstance(service, DisaggregatedService):
        row |= transfer_summary(service)
    return service.describe() | row | {"engine_runs": service.costs.engine_runs}, run


def _served(service: Runner, options: ServeOptions, slo: Slo | None) -> tuple[Row, ServingRun]:
    """The summary of serving the trace, or the stream at the offered rate (at most
    ``concurrency`` requests in flight when given, vLLM's benchmark semaphore: each
    arrival waits for a free slot; with no rate every request arrives at 0)."""
    rate = options.offered_rate_per_s
    if options.trace:
        requests = read_trace(options.trace)
    else:
        assert rate is not None  # an open loop without a trace has a rate
        requests = stream_of(options)(rate)
    if options.concurrency is not None:
        assert isinstance(service, Service)  # a capped stream is never disaggregated
        run = service.run(requests, options.concurrency)
    else:
        run = service.run(requests)
    row = summary(requests, service.chips, slo, **options.economics(), rate_per_s=rate)
    row |= {"concurrency": options.concurrency, "steady_state": steady_state(requests)}
    return row, run


def check_options(options: ServeOptions, system: str | System) -> Runner:
    """The deployment loaded and checked against the stream (a client per replica,
    the expert imbalance within the expert-parallel degree, the trace readable, the
    smallest request within the context and the cache), without serving; the runner.
    Raises InputError."""
    service = runner(options.deployment(system), options.disaggregate)
    check_clients(options.concurrency, service.deployment.replicas)
    ep = service.costs.shape.ep
    if not 1.0 <= options.expert_imbalance <= ep:
        raise OptionError(
            "expert_imbalance",
            f"must be 1 to the expert-parallel degree {ep} (the busiest rank holds at "
            f"most every routed token), got {options.expert_imbalance:g}",
        )
    if options.trace:
        read_trace(options.trace)  # the file reads and every row is good
    else:
        check_fits(service, options)
    return service


def check_fits(service: Runner, options: ServeOptions) -> None:
    """Raise OptionError when no request of the stream can be served: its smallest
    prompt plus output does not fit the context (the model's, or ``max_model_len``) or
    one replica's KV cache."""
    base = service.service if isinstance(service, DisaggregatedService) else service
    assert isinstance(base, Service)
    smallest = int(options.prompt().low + options.output().low)
    context, cache = base.context_length, base.capacity.tokens
    fields = ("prompt_tokens", "output_tokens")
    if smallest + 1 > context:
        whose = "the model's context" if context == base.model.context_length else "max_model_len"
        raise OptionError(fields, f"{smallest:,} tokens exceed {whose} of {context:,}")
    if smallest > cache:
        raise OptionError(
            fields, f"{smallest:,} tokens exceed one replica's KV cache of {cache:,} tokens"
        )


def runner(deployment: Deployment, split: tuple[int, int] | None) -> Runner:
    """A :class:`Service`, or with ``split`` (prefill, decode replicas) a disaggregated
    one of ``prefill + decode`` replicas."""
    if split is None:
        return Service(deployment)
    service = Service(dataclasses.replace(deployment, replicas=sum(split)))
    return DisaggregatedService(service, *split)


def stream_of(options: ServeOptions) -> Stream:
    """The options' synthetic requests at a given rate (same seed, same requests)."""
    prompt, output = options.prompt(), options.output()

    def stream(rate_per_s: float) -> list[Request]:
        return synthetic_requests(
            options.requests,
            rate_per_s,
            prompt,
            output,
            seed=options.seed,
            arrival=options.arrival,
            burstiness=options.burstiness,
            prefix_hit_rate=options.prefix_hit_rate,
        )

    return stream


def curves(
    options: ServeOptions,
    systems: list[str],
    rates_per_s: list[float] | None,
    plot: str | Path | None,
) -> Row:
    """The latency curve of ``options`` on each of ``systems`` at ``rates_per_s``
    (None: fractions of each one's saturated rate) as ``{"systems": [...], "curve":
    [rows]}``, and one plot of them all at ``plot`` (a path without suffix; None:
    none). Raises InputError for a bad deployment."""
    from tpusim.serving.plots import latency_curve, plot_latency_vs_rate

    stream, slo = stream_of(options), options.slo()
    described, by_system = [], {}
    for system in systems:
        service = Service(options.deployment(system))
        rates = rates_per_s or _auto_rates(service, options)
        described.append(service.describe())
        by_system[service.system.name] = latency_curve(service, stream, rates, slo)
    curve: list[Json] = [row for rows in by_system.values() for row in rows]
    out: Row = {"systems": list[Json](described), "curve": curve}
    if plot:
        first = described[0]
        title = f"{first['model']}, {first['dtype']}, tp {first['tp']} x ep {first['ep']}"
        png, _ = plot_latency_vs_rate(by_system, plot, title, slo)
        out["plot"] = str(png)
    return out


def _auto_rates(service: Service, options: ServeOptions) -> list[float]:
    """Fractions of the saturated rate (requests/s) of the stream's mean request."""
    from tpusim.serving.plots import DEFAULT_RATE_FRACTIONS

    top = saturated_rate_per_s(service, options.prompt().mean, options.output().mean)
    return [f * top for f in DEFAULT_RATE_FRACTIONS]
