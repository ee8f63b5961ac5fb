"""``tpusim validate --serving``: the shipped public serving figures
(``configs/measurements/serving/*.yaml``: vLLM on TPU benchmarks) simulated by
``tpusim serve`` as the benchmark ran them, and the errors of the throughput and the
median TPOT (and TTFT where published).

Error: ``simulated / measured - 1`` per figure and metric; the summary gives the
median absolute error over every (figure, metric), over the ``fit`` and the
``holdout`` figures (the file's written rule), and per metric. ``--fit`` refits the
calibrated per-iteration overheads (:mod:`tpusim.serving.overheads`: ``host_s`` and
``hbm_efficiency``, shared by every chip of a server profile) on the ``fit`` figures
only (:mod:`tpusim.validation.serving_fit`), and ``--cv chip|server`` predicts each
group with terms fitted without it (:mod:`tpusim.validation.serving_cv`).

What a figure records but the run cannot simulate yet is named by :func:`unsimulated`
(one warning line per figure, never dropped silently): experts spread over other chips
than the tensor-parallel ones, speculative decoding without a published acceptance,
and prefill/decode disaggregation. vLLM's expert parallelism over the tensor-parallel
devices (``ep`` = ``tp``) is the run's ``expert_parallel``, the server profile's MoE
kernel (:func:`~tpusim.serving.service.with_moe_kernel`). The weights' dtype (stored,
:mod:`tpusim.hardware.quantized`), the KV cache's dtype (vLLM's ``auto``, bf16,
unless given), the random dataset's range ratio (:func:`lengths`) and speculative
decoding with a published acceptance are simulated.
"""

from __future__ import annotations

import dataclasses
from statistics import median
from typing import TYPE_CHECKING, Any

import numpy as np

from tpusim.config.loader import load_model
from tpusim.serving.overheads import IterationOverheads
from tpusim.serving.requests import TokenCount, random_dataset, synthetic_requests
from tpusim.serving.rows import number
from tpusim.serving.servers import load_server
from tpusim.serving.service import Deployment, Service
from tpusim.validation.serving_figures import METRICS, Figure, figure_system, load_figures

if TYPE_CHECKING:
    from tpusim.serving.service import Service

__all__ = [
    "METRICS",
    "Figure",
    "Simulator",
    "cases",
    "load_figures",
    "summary",
    "unsimulated",
    "warnings",
]

#: The fit's grids (design choices): host time 0 to 30 ms, finer where small models
#: live; HBM efficiency 0.4 to 1 in steps of 0.05. A fit is searched on the grid (each
#: point a simulation of every figure, memoised), so a cross-validation's folds share
#: their simulations.
FIT_HOST_S = tuple(x * 1e-3 for x in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 17, 20, 25, 30))
FIT_HBM_EFFICIENCY = tuple(round(0.4 + 0.05 * i, 2) for i in range(13))


def shipped_overheads(figure: Figure) -> IterationOverheads:
    """The figure's server profile's terms for its chip."""
    return load_server(figure.server).overheads(figure.chip)


#: Simulated metrics of a figure (None where not defined).
Simulated = dict[str, float | None]


class Simulator:
    """Simulates figures, keeping each one's service (the slice, the replica, the
    cached iteration costs) per (figure, HBM efficiency, expert efficiency): the host
    time and the sampler do not change the engine's runs, so a fit reuses them. A
    figure is known by all its fields but the measured values, so two figures share a
    service only when they ran the same benchmark."""

    def __init__(self) -> None:
        self._services: dict[tuple[str, float, float], Service] = {}
        self._memo: dict[tuple[str, IterationOverheads], Simulated] = {}

    def service(self, figure: Figure, overheads: IterationOverheads) -> Service:
        """The figure's service with ``overheads``."""

        engine_terms = (overheads.hbm_efficiency, overheads.expert_efficiency)
        key = (figure.model_dump_json(exclude={"measured"}), *engine_terms)
        if key not in self._services:
            deployment = Deployment(
                figure_system(figure),
                figure.model,
                tp=figure.tp,
                max_tokens=figure.max_tokens,
                max_sequences=figure.max_sequences,
                server=figure.server,
                overheads=overheads,
                async_scheduling=figure.async_scheduling,
                dtype=figure.weight_dtype,
                kv_dtype=figure.kv_dtype,
                expert_parallel=figure.ep is not None,
                **_speculative(figure),
            )
            self._services[key] = Service(deployment)
        service = self._services[key]
        service.costs.overheads = overheads
        return service

    def simulate(self, figure: Figure, overheads: IterationOverheads) -> Simulated:
        """The figure's benchmark simulated with ``overheads``: the metrics of
        :data:`METRICS` (None where not defined), memoised (a run is deterministic; a
        dense model's run does not depend on the experts' efficiency)."""
        if load_model(figure.model).moe is None:
            overheads = dataclasses.replace(
                overheads, expert_efficiency=1.0, moe_layer_s=0.0, moe_token_s=0.0
            )
        key = (figure.model_dump_json(exclude={"measured", "split"}), overheads)
        if key not in self._memo:
            self._memo[key] = self._simulate(figure, overheads)
        return self._memo[key]

    def _simulate(self, figure: Figure, overheads: IterationOverheads) -> Simulated:
        from tpusim.serving.metrics import latencies, summary

        service = self.service(figure, overheads)
        requests = synthetic_requests(
            figure.simulated_requests,
            figure.rate,
            lengths(figure.prompt_tokens, figure.random_range_ratio, figure.random_client),
            lengths(figure.output_tokens, figure.random_range_ratio, figure.random_client),
            seed=0,
        )
        service.run(requests, figure.concurrency)
        row = summary(requests, service.chips)
        lat = latencies(requests, figure.tpot_definition)
        out: dict[str, float | None] = {
            key: number(row, key)
            for key in ("output_tokens_per_s", "request_throughput_per_s", "total_tokens_per_s")
        }
        for name in ("tpot", "ttft"):
            values = lat[name][~np.isnan(lat[name])]
            for label, q in (("median", 50), ("p99", 99)):
                out[f"{name}_{label}_s"] = float(np.percentile(values, q)) if values.size else None
        return out


def lengths(tokens: int, range_ratio: float | None, client: str = "vllm") -> TokenCount:
    """The benchmark's lengths of ``tokens``: fixed, or the random dataset with
    ``--random-range-ratio r`` as ``client`` draws it: vLLM's (``RandomDataset`` since
    2025, :func:`tpusim.serving.requests.random_dataset`) uniform whole counts on
    ``[floor(L(1-r)), ceil(L(1+r))]``; InferenceX's (``sample_uniform`` in
    SemiAnalysisAI/InferenceX ``utils/bench_serving/benchmark_serving.py`` at 89ce6098,
    lines 112-116: ``np.random.randint(int(L * r), L + 1)``) on ``[int(L r), L]``."""
    if not range_ratio:
        return TokenCount("fixed", tokens)
    if client == "inferencex":
        return TokenCount("uniform", max(1, int(tokens * range_ratio)), tokens)
    return random_dataset(tokens, range_ratio)


def _speculative(figure: Figure) -> dict[str, Any]:
    """The Deployment's speculative-decoding arguments: the figure's when its
    acceptance is published (else none: :func:`unsimulated` names it)."""
    spec = figure.speculative
    if spec is None or spec.acceptance is None:
        return {}
    return {"draft_tokens": spec.draft_tokens, "acceptance": spec.acceptance}


def unsimulated(figure: Figure) -> list[str]:
    """What ``figure`` records that its simulated run does not model (see the module
    docstring), each as ``field value: why``; empty when the run models it all."""
    out = []
    if figure.ep is not None and figure.ep != figure.tp:
        out.append(
            f"ep {figure.ep}: experts over other chips than the tp {figure.tp} "
            "(simulated over the tp chips)"
        )
    spec = figure.speculative
    if spec is not None and spec.acceptance is None:
        out.append(f"speculative {spec.method}: no published acceptance, simulated without")
    if figure.disaggregate is not None:
        p, d = figure.disaggregate
        out.append(f"disaggregate {p}:{d}: simulated colocated on the figure's slice")
    return out


def warnings(figures: list[Figure]) -> list[str]:
    """One line per figure with something :func:`unsimulated`."""
    return [
        f"warning: {f.id}: not simulated: {'; '.join(missing)}"
        for f in figures
        if (missing := unsimulated(f))
    ]


#: Terms by server profile, shared by its chips: what a fit found (others: the shipped
#: profile's).
Terms = dict[str, IterationOverheads]


def cases(
    figures: list[Figure], terms: Terms | None = None, simulator: Simulator | None = None
) -> list[dict[str, Any]]:
    """One row per (figure, measured metric): id, split, server, chip, slice, model,
    tp, metric, measured, simulated, error. ``terms``: overheads by server (others:
    the shipped profile's)."""
    simulator = simulator or Simulator()
    rows = []
    for f in figures:
        overheads = (terms or {}).get(f.server) or shipped_overheads(f)
        sim = simulator.simulate(f, overheads)
        for metric, value in f.measured.items():
            got = sim[metric]
            rows.append(
                {
                    "id": f.id,
                    "split": f.split,
                    "server": f.server,
                    "chip": f.chip,
                    "slice": f.slice.name,
                    "model": f.model,
                    "tp": f.tp,
                    "concurrency": f.concurrency,
                    "metric": metric,
                    "measured": value,
                    "simulated": got,
                    "error": None if got is None else got / value - 1,
                }
            )
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Median absolute error and points within 10%, over all rows, per split and per
    metric."""

    def part(sub: list[dict[str, Any]]) -> dict[str, Any]:
        errors = [abs(r["error"]) for r in sub if r["error"] is not None]
        return {
            "total": len(errors),
            "within_10pct": sum(e <= 0.10 for e in errors),
            "median_abs_error": median(errors) if errors else None,
        }

    out = part(rows)
    out |= {s: part([r for r in rows if r["split"] == s]) for s in ("fit", "holdout")}
    out["metrics"] = {m: part([r for r in rows if r["metric"] == m]) for m in METRICS}
    return out
