"""``tpusim validate --serving``: the shipped public serving figures
(``configs/measurements/serving/*.yaml``: vLLM on TPU benchmarks) simulated by
``tpusim serve`` as the benchmark ran them, and the errors of the throughput and the
median TPOT (and TTFT where published).

Error: ``simulated / measured - 1`` per figure and metric; the summary gives the
median absolute error over every (figure, metric), over the ``fit`` and the
``holdout`` figures (the file's written rule), and per metric. ``--fit`` refits the
calibrated per-iteration overheads (:mod:`tpusim.serving.overheads`: ``host_s`` and
``hbm_efficiency``) on the ``fit`` figures only, by a grid search minimising the sum
of squared log errors, and reports the errors at the fitted terms.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np
import yaml

from tpusim.errors import InputError
from tpusim.serving.overheads import IterationOverheads, overheads_for

#: The metrics compared, each with its simulated counterpart's key.
METRICS = ("output_tokens_per_s", "request_throughput_per_s", "tpot_median_s", "ttft_median_s")
#: The fit's ranges (design choices): host time 0 to 30 ms to 0.1 ms, HBM efficiency
#: 0.7 to 1 in steps of 0.05.
FIT_HOST_RANGE_S = (0.0, 30e-3)
FIT_HOST_TOLERANCE_S = 0.1e-3
FIT_HBM_EFFICIENCY = tuple(round(0.7 + 0.05 * i, 2) for i in range(7))
INT_FIELDS = (
    "tp",
    "prompt_tokens",
    "output_tokens",
    "simulated_requests",
    "max_tokens",
    "max_sequences",
)
REQUIRED = (
    "id",
    "split",
    "url",
    "system",
    "model",
    "tp",
    "prompt_tokens",
    "output_tokens",
    "simulated_requests",
    "max_tokens",
    "max_sequences",
    "measured",
)


@dataclass
class Figure:
    """One published serving benchmark (see the measurement file's header)."""

    id: str
    split: str
    url: str
    system: str
    model: str
    tp: int
    prompt_tokens: int
    output_tokens: int
    simulated_requests: int
    max_tokens: int
    max_sequences: int
    measured: dict[str, float]
    rate: float = math.inf
    concurrency: int | None = None
    async_scheduling: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def chip(self) -> str:
        from tpusim.config.loader import load_system

        return load_system(self.system).chip.name


def shipped_files() -> list[Path]:
    """``configs/measurements/serving/*.yaml``, sorted."""
    from tpusim.config.loader import configs_dir

    return sorted((configs_dir() / "measurements" / "serving").glob("*.yaml"))


def load_figures(paths: list[Path] | None = None) -> list[Figure]:
    """Every figure of ``paths`` (default: the shipped files). Raises InputError naming
    the file and the figure for a missing or bad field."""
    out = []
    for path in paths or shipped_files():
        try:
            data = yaml.safe_load(Path(path).read_text())
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise InputError(f"{path}: cannot read the serving figures ({exc})") from None
        if not isinstance(data, dict) or not isinstance(data.get("figures"), list):
            raise InputError(f"{path}: figures: expected a list of serving figures")
        out += [_figure(path, i, f) for i, f in enumerate(data["figures"])]
    return out


def _figure(path: Path, index: int, raw: Any) -> Figure:
    where = f"{path}: figures[{index}]"
    if not isinstance(raw, dict) or any(k not in raw for k in REQUIRED):
        raise InputError(f"{where}: needs {', '.join(REQUIRED)}")
    known = {k: raw[k] for k in REQUIRED}
    try:
        rate = float(raw.get("rate", math.inf))
        ints = {k: int(known[k]) for k in INT_FIELDS}
        measured = {k: float(v) for k, v in dict(known["measured"]).items()}
    except (TypeError, ValueError):
        raise InputError(f"{where}: tokens, limits and measured figures must be numbers") from None
    if known["split"] not in ("fit", "holdout") or set(measured) - set(METRICS):
        raise InputError(f"{where}: split is fit or holdout; measured keys are {METRICS}")
    named = ("rate", "concurrency", "async_scheduling")
    extra = {k: v for k, v in raw.items() if k not in REQUIRED and k not in named}
    return Figure(
        **(known | ints | {"measured": measured}),  # type: ignore[arg-type]
        rate=rate,
        concurrency=raw.get("concurrency"),
        async_scheduling=bool(raw.get("async_scheduling", False)),
        extra=extra,
    )


#: Services built, by (figure id, HBM efficiency): the host time and the sampler do not
#: change the engine's runs, so a fit reuses them.
_SERVICES: dict[tuple[str, float], Any] = {}


def _service(figure: Figure, overheads: IterationOverheads) -> Any:
    from tpusim.serving.service import Deployment, Service

    key = (figure.id, overheads.hbm_efficiency)
    if key not in _SERVICES:
        _SERVICES[key] = Service(
            Deployment(
                figure.system,
                figure.model,
                tp=figure.tp,
                max_tokens=figure.max_tokens,
                max_sequences=figure.max_sequences,
                overheads=overheads,
                async_scheduling=figure.async_scheduling,
            )
        )
    service = _SERVICES[key]
    service.costs.overheads = overheads
    return service


def simulate(figure: Figure, overheads: IterationOverheads) -> dict[str, float | None]:
    """The figure's benchmark simulated with ``overheads``: the metrics of
    :data:`METRICS` (None where not defined)."""
    from tpusim.serving.metrics import latencies, summary
    from tpusim.serving.requests import TokenCount, synthetic_requests

    service = _service(figure, overheads)
    requests = synthetic_requests(
        figure.simulated_requests,
        figure.rate,
        TokenCount("fixed", figure.prompt_tokens),
        TokenCount("fixed", figure.output_tokens),
        seed=0,
    )
    service.run(requests, figure.concurrency)
    row = summary(requests, service.chips)
    lat = latencies(requests)
    tpot = lat["tpot"][~np.isnan(lat["tpot"])]
    return {
        "output_tokens_per_s": row["output_tokens_per_s"],
        "request_throughput_per_s": row["request_throughput_per_s"],
        "tpot_median_s": float(np.median(tpot)) if tpot.size else None,
        "ttft_median_s": float(np.median(lat["ttft"])) if lat["ttft"].size else None,
    }


def cases(
    figures: list[Figure], overheads: IterationOverheads | None = None
) -> list[dict[str, Any]]:
    """One row per (figure, measured metric): id, split, chip, model, tp, metric,
    measured, simulated, error. ``overheads`` None: each chip's shipped terms."""
    rows = []
    for f in figures:
        sim = simulate(f, overheads or overheads_for(f.chip))
        for metric, value in f.measured.items():
            got = sim[metric]
            rows.append(
                {
                    "id": f.id,
                    "split": f.split,
                    "chip": f.chip,
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


def _loss(rows: list[dict[str, Any]]) -> float:
    return sum(math.log(1 + r["error"]) ** 2 for r in rows if r["error"] is not None)


def _golden(loss: Any, lo: float, hi: float, tolerance: float) -> float:
    """The minimiser of a unimodal ``loss`` on ``[lo, hi]`` (golden-section search)."""
    ratio = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = loss(c), loss(d)
    while b - a > tolerance:
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = loss(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = loss(d)
    return (a + b) / 2


def fit(figures: list[Figure]) -> tuple[IterationOverheads, float]:
    """The (host_s, hbm_efficiency) minimising the squared log errors on the ``fit``
    figures (sampling passes as shipped), by coordinate descent: host time by a
    golden-section search on :data:`FIT_HOST_RANGE_S` at full HBM efficiency, the
    efficiency on the grid :data:`FIT_HBM_EFFICIENCY` at that host time, the host time
    again. Returns the terms and the loss. Raises InputError when no figure is
    ``fit``."""
    fitting = [f for f in figures if f.split == "fit"]
    if not fitting:
        raise InputError("tpusim validate --serving --fit: no figure has split: fit")
    passes = overheads_for(fitting[0].chip).sampling_passes

    def loss(host: float, eff: float) -> float:
        return _loss(cases(fitting, IterationOverheads(host, eff, passes)))

    host = _golden(lambda h: loss(h, 1.0), *FIT_HOST_RANGE_S, FIT_HOST_TOLERANCE_S)
    eff = min(FIT_HBM_EFFICIENCY, key=lambda e: loss(host, e))
    host = _golden(lambda h: loss(h, eff), *FIT_HOST_RANGE_S, FIT_HOST_TOLERANCE_S)
    return IterationOverheads(host, eff, passes), loss(host, eff)


def cmd(args: argparse.Namespace) -> None:
    """``tpusim validate --serving [--fit] [--json]``."""
    from tpusim.results.files import json_text

    paths = [Path(p) for p in args.measurements] if args.measurements else None
    figures = load_figures(paths)
    fitted = fit(figures)[0] if getattr(args, "fit", False) else None
    rows = cases(figures, fitted)
    stats = summary(rows)
    record: dict[str, Any] = {"cases": rows, **stats}
    if fitted is not None:
        record["fitted"] = {"host_s": fitted.host_s, "hbm_efficiency": fitted.hbm_efficiency}
    if args.json:
        print(json_text(record))
        return
    print(table(rows))
    print()
    print(summary_lines(stats, fitted))


def table(rows: list[dict[str, Any]]) -> str:
    """The readable table of the cases."""
    from tpusim.report import text_table

    shown = [
        {
            "id": r["id"],
            "split": r["split"],
            "metric": r["metric"],
            "measured": f"{r['measured']:.4g}",
            "simulated": "-" if r["simulated"] is None else f"{r['simulated']:.4g}",
            "error": "-" if r["error"] is None else f"{r['error']:+.1%}",
        }
        for r in rows
    ]
    return text_table(shown, ("id", "split", "metric", "measured", "simulated", "error"))


def summary_lines(stats: dict[str, Any], fitted: IterationOverheads | None) -> str:
    """One line per part (all, fit, holdout, each metric)."""
    parts = [("all", stats), ("fit", stats["fit"]), ("holdout", stats["holdout"])]
    parts += [(m, p) for m, p in stats["metrics"].items() if p["total"]]
    lines = [
        f"{label:<26} {p['total']:>3} points, {p['within_10pct']:>3} within 10%, "
        f"median |error| {p['median_abs_error']:.1%}"
        for label, p in parts
        if p["total"]
    ]
    if fitted is not None:
        lines.append(
            f"fitted: host {fitted.host_s * 1e3:.3g} ms per iteration, "
            f"HBM efficiency {fitted.hbm_efficiency:.2f}"
        )
    return "\n".join(lines)
