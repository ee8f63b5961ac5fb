"""What ``tpusim serve`` and the ``serving`` workload kind run: a stream of requests
on a deployment, or the capacity search, as one row of figures."""

from __future__ import annotations

import dataclasses
from typing import Any

from tpusim.errors import InputError
from tpusim.serving.capacity import find_capacity, saturated_rate_per_s
from tpusim.serving.disaggregated import DisaggregatedService, transfer_summary
from tpusim.serving.metrics import Slo, summary
from tpusim.serving.requests import (
    TokenCount,
    check_stream,
    read_trace,
    synthetic_requests,
    token_count,
)
from tpusim.serving.service import Deployment, Runner, Service
from tpusim.serving.steady import MIN_REQUESTS, steady_state

#: The offered rate when none is given (requests/s; a design choice).
DEFAULT_RATE_PER_S = 1.0


def serve(options: Any, deployment: Deployment) -> dict[str, Any]:
    """Run what ``options`` asks (the ``tpusim serve`` flags as attributes: ``rate``,
    ``concurrency``, ``arrival``, ``burstiness``, ``trace``, ``requests``,
    ``prompt_tokens``, ``output_tokens``, ``seed``, ``find_capacity``, ``slo_ttft``,
    ``slo_tpot``, ``power_per_chip``, ``price_per_chip_hour``, ``disaggregate``) on
    ``deployment``; the JSON row. Raises InputError for bad input."""
    service = check_options(options, deployment)
    _, _, slo, stream = _stream(options)
    economics = {
        "power_per_chip_W": options.power_per_chip,
        "price_per_chip_hour_usd": options.price_per_chip_hour,
    }
    if options.find_capacity and slo is not None:
        row = find_capacity(service, stream, slo)
        row |= summary_economics(row, service.chips, economics)
    else:
        rate = None if options.trace else (options.rate or DEFAULT_RATE_PER_S)
        requests = read_trace(options.trace) if options.trace else stream(rate)  # type: ignore[arg-type]
        concurrency = getattr(options, "concurrency", None)
        if concurrency is not None:
            service.run(requests, concurrency)  # type: ignore[call-arg]
        else:
            service.run(requests)
        row = summary(requests, service.chips, slo, **economics, rate_per_s=rate)
        row |= {"concurrency": concurrency, "steady_state": steady_state(requests)}
    if isinstance(service, DisaggregatedService):
        row |= transfer_summary(service)
    return service.describe() | row | {"engine_runs": service.costs.engine_runs}


def check_options(options: Any, deployment: Deployment) -> Runner:
    """The deployment loaded and the stream checked (token counts, seed, burstiness,
    request count, rate; the smallest request fits the context and the cache), without
    serving; the runner. Raises InputError."""
    check_prefix(deployment.prefix_tokens, getattr(options, "prefix_hit_rate", 0.0) or 0.0)
    check_speculation(deployment.draft_tokens, deployment.acceptance)
    service = runner(deployment, getattr(options, "disaggregate", None))
    ep = service.costs.shape.ep
    if not 1.0 <= deployment.expert_imbalance <= ep:
        raise InputError(
            f"--expert-imbalance: must be 1 to the expert-parallel degree {ep} (the busiest "
            f"rank holds at most every routed token), got {deployment.expert_imbalance:g}"
        )
    prompt, output, _, _ = _stream(options)
    if options.trace:
        read_trace(options.trace)  # the file reads and every row is good
    else:
        check_fits(service, prompt, output)
    if options.find_capacity and options.requests < MIN_REQUESTS:
        raise InputError(
            f"--requests: the capacity search judges each rate in steady state and needs "
            f"at least {MIN_REQUESTS} requests, got {options.requests}"
        )
    return service


def check_prefix(prefix_tokens: int, hit_rate: float) -> None:
    """Raise InputError for a prefix length below 0 or over the token limit, a hit rate
    outside [0, 1], or hits without a prefix."""
    from tpusim.serving.requests import MAX_TOKEN_COUNT

    if not 0 <= prefix_tokens <= MAX_TOKEN_COUNT:
        raise InputError(f"--prefix-tokens: must be 0 to {MAX_TOKEN_COUNT:,}, got {prefix_tokens}")
    if not 0.0 <= hit_rate <= 1.0:
        raise InputError(f"--prefix-hit-rate: must be 0 to 1, got {hit_rate:g}")
    if hit_rate > 0 and prefix_tokens == 0:
        raise InputError("--prefix-hit-rate: needs --prefix-tokens (the shared prefix)")


#: Most draft tokens per decode iteration (a limit: speculative decoding proposes a
#: handful; vLLM's examples use 1-10).
MAX_DRAFT_TOKENS = 64


def check_speculation(draft_tokens: int, acceptance: float) -> None:
    """Raise InputError for draft tokens outside 0 to :data:`MAX_DRAFT_TOKENS` or an
    acceptance rate outside [0, 1]."""
    if not 0 <= draft_tokens <= MAX_DRAFT_TOKENS:
        raise InputError(f"--draft-tokens: must be 0 to {MAX_DRAFT_TOKENS}, got {draft_tokens}")
    if not 0.0 <= acceptance <= 1.0:
        raise InputError(f"--acceptance-rate: must be 0 to 1, got {acceptance:g}")


def check_fits(service: Runner, prompt: TokenCount, output: TokenCount) -> None:
    """Raise InputError when no request of the stream can be served: its smallest
    prompt plus output does not fit the model's context or one replica's KV cache."""
    base = service.service if isinstance(service, DisaggregatedService) else service
    assert isinstance(base, Service)
    smallest = int(prompt.low + output.low)
    context, cache = base.model.context_length, base.capacity.tokens
    if smallest + 1 > context:
        raise InputError(
            f"--prompt-tokens + --output-tokens: {smallest:,} tokens exceed the model's "
            f"context of {context:,}"
        )
    if smallest > cache:
        raise InputError(
            f"--prompt-tokens + --output-tokens: {smallest:,} tokens exceed one replica's "
            f"KV cache of {cache:,} tokens"
        )


def runner(deployment: Deployment, split: tuple[int, int] | None) -> Runner:
    """A :class:`Service`, or with ``split`` (prefill, decode replicas) a disaggregated
    one of ``prefill + decode`` replicas."""
    if split is None:
        return Service(deployment)
    service = Service(dataclasses.replace(deployment, replicas=sum(split)))
    return DisaggregatedService(service, *split)


def _stream(options: Any) -> tuple[TokenCount, TokenCount, Slo | None, Any]:
    """The token counts, the SLO (if both parts are given) and the stream of a rate."""
    prompt = token_count(str(options.prompt_tokens), "--prompt-tokens")
    output = token_count(str(options.output_tokens), "--output-tokens")
    rate = None if options.trace else (options.rate or DEFAULT_RATE_PER_S)
    check_stream(options.requests, rate, options.burstiness, options.seed)
    slo = Slo(options.slo_ttft, options.slo_tpot) if options.slo_ttft and options.slo_tpot else None

    def stream(rate: float) -> list[Any]:
        return synthetic_requests(
            options.requests, rate, prompt, output, seed=options.seed,
            arrival=options.arrival, burstiness=options.burstiness,
            prefix_hit_rate=getattr(options, "prefix_hit_rate", 0.0) or 0.0,
        )  # fmt: skip

    return prompt, output, slo, stream


def summary_economics(
    row: dict[str, Any], chips: int, economics: dict[str, float | None]
) -> dict[str, Any]:
    """Energy and cost per million tokens at the capacity's throughput."""
    from tpusim.serving.metrics import economics as per_million

    return per_million(row.get("output_tokens_per_s"), chips, **economics)  # type: ignore[arg-type]


def curves(options: Any, deployments: list[Deployment]) -> dict[str, Any]:
    """``--rates``: the latency curve of each deployment (``auto``: fractions of its
    saturated rate) as ``{"systems": [...], "curve": [rows]}``, and one plot of them all
    when ``options.plot`` names a file."""
    from tpusim.cli.serve import rates_flag
    from tpusim.serving.plots import DEFAULT_RATE_FRACTIONS, latency_curve, plot_latency_vs_rate

    prompt, output, slo, stream = _stream(options)
    given = rates_flag(options.rates)
    described, by_system = [], {}
    for deployment in deployments:
        service = Service(deployment)
        rates = given
        if rates is None:
            top = saturated_rate_per_s(service, prompt.mean, output.mean)
            rates = [f * top for f in DEFAULT_RATE_FRACTIONS]
        described.append(service.describe())
        by_system[service.system.name] = latency_curve(service, stream, rates, slo)
    out: dict[str, Any] = {
        "systems": described,
        "curve": [row for rows in by_system.values() for row in rows],
    }
    if options.plot:
        first = described[0]
        title = f"{first['model']}, {first['dtype']}, tp {first['tp']} x ep {first['ep']}"
        png, _ = plot_latency_vs_rate(by_system, options.plot, title, slo)
        out["plot"] = str(png)
    return out
