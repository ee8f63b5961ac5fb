"""The requests of a run: arrival times (Poisson, gamma-bursty or a trace) and token
counts (fixed or drawn from a distribution), all from one seeded generator.

Token counts are a whole number or a YAML mapping of one distribution:
``{uniform: [LOW, HIGH]}`` (inclusive), ``{lognormal: {median: M, sigma: S}}``
(rounded, at least 1), vLLM's random dataset ``{random: {length: L, range_ratio: R}}``
(see :func:`random_dataset`) or ShareGPT-like lengths ``{sharegpt: prompt}`` /
``{sharegpt: output}`` (see :data:`SHAREGPT`). A trace is a CSV file with the header
``arrival_s,prompt_tokens,output_tokens`` and one request per row.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import yaml

from tpusim.config.limits import (
    MAX_REQUESTS,
    MAX_STREAM_SPAN_S,
    MAX_TOKEN_COUNT,
    MAX_TRACE_BYTES,
)
from tpusim.errors import InputError
from tpusim.serving.scheduler import Request

Arrival = Literal["poisson", "gamma"]
ARRIVALS: tuple[Arrival, ...] = ("poisson", "gamma")
TRACE_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")

#: Gamma burstiness (coefficient of variation) range: outside it the gamma shape
#: ``1 / CV^2`` under- or overflows float64's useful range (a limit).
BURSTINESS_RANGE = (1e-3, 1e3)


@dataclass(frozen=True)
class TokenCount:
    """A fixed count (``kind`` ``fixed``, ``a``), ``uniform`` on ``[a, b]`` or
    ``lognormal`` with median ``a`` and sigma ``b``."""

    kind: Literal["fixed", "uniform", "lognormal"]
    a: float
    b: float = 0.0

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` whole counts >= 1."""
        if self.kind == "fixed":
            return np.full(n, int(self.a), dtype=np.int64)
        if self.kind == "uniform":
            return rng.integers(int(self.a), int(self.b) + 1, size=n)
        values = rng.lognormal(math.log(self.a), self.b, size=n)
        return np.maximum(1, np.rint(values)).astype(np.int64)

    @property
    def low(self) -> float:
        """The smallest count drawn."""
        return 1.0 if self.kind == "lognormal" else self.a

    @property
    def mean(self) -> float:
        """The distribution's mean (before rounding)."""
        if self.kind == "fixed":
            return self.a
        if self.kind == "uniform":
            return (self.a + self.b) / 2
        return self.a * math.exp(self.b**2 / 2)


def parse_token_count(value: int | str | Mapping[str, object]) -> TokenCount:
    """A token count: a whole number, or a distribution as a mapping or its YAML text
    (see the module docstring). Raises ValueError saying what is expected."""
    text = (
        yaml.safe_dump(dict(value), default_flow_style=True).strip()
        if isinstance(value, Mapping)
        else str(value)
    )
    try:
        loaded: object = yaml.safe_load(text)
    except yaml.YAMLError:
        raise ValueError(f"not a number or a YAML mapping: {text!r}") from None
    if isinstance(loaded, int) and not isinstance(loaded, bool) and loaded >= 1:
        if loaded > MAX_TOKEN_COUNT:
            raise ValueError(f"{loaded} is over the limit of {MAX_TOKEN_COUNT:,} tokens")
        return TokenCount("fixed", loaded)
    if isinstance(loaded, dict) and len(loaded) == 1:
        return _distribution(loaded)
    raise ValueError(
        f"expected a whole number >= 1, {{uniform: [LOW, HIGH]}}, "
        f"{{lognormal: {{median: M, sigma: S}}}}, {{random: {{length: L, range_ratio: R}}}} "
        f"or {{sharegpt: prompt|output}}, got {text!r}"
    )


def _distribution(value: Mapping[object, object]) -> TokenCount:
    ((kind, args),) = value.items()
    top = MAX_TOKEN_COUNT
    if kind in NAMED:
        return NAMED[str(kind)](args)
    if kind == "uniform" and isinstance(args, list) and len(args) == 2:
        lo, hi = args
        whole = all(isinstance(v, int) and not isinstance(v, bool) for v in args)
        if whole and 1 <= lo <= hi <= top:
            return TokenCount("uniform", lo, hi)
    if kind == "lognormal" and isinstance(args, dict) and set(args) == {"median", "sigma"}:
        median, sigma = args["median"], args["sigma"]
        if _number(median) and _number(sigma) and 1 <= median <= top and 0 <= sigma <= 3:
            return TokenCount("lognormal", float(median), float(sigma))
    raise ValueError(
        f"{kind} needs uniform: [LOW, HIGH] (whole, 1 <= LOW <= HIGH <= {top:,}), "
        f"lognormal: {{median: 1 <= M <= {top:,}, sigma: 0 <= S <= 3}}, "
        "random: {length: L, range_ratio: R} or sharegpt: prompt|output"
    )


def random_dataset(length: int, range_ratio: float) -> TokenCount:
    """vLLM's random dataset's lengths (``vllm bench serve --dataset-name random
    --random-input-len L --random-range-ratio R``): whole numbers uniform on
    ``[floor(L (1 - R)), ceil(L (1 + R))]``, the low end at least 1, ``0 <= R < 1``, as
    ``RandomDataset.get_sampling_params`` in ``vllm/benchmarks/datasets.py`` defines them
    since mid-2025 (vLLM commit 0056b87: ``input_low = math.floor(real_input_len * (1 -
    range_ratio))``, ``input_high = math.ceil(real_input_len * (1 + range_ratio))``;
    before, the range was ``[L R, L]``). ``L`` is the length the server sees (vLLM's
    ``real_input_len`` is ``L`` less the tokenizer's special tokens, which the server
    adds back). Raises ValueError."""
    if not 0.0 <= range_ratio < 1.0:
        raise ValueError(f"range_ratio must be in [0, 1), got {range_ratio:g}")
    low = max(1, math.floor(length * (1 - range_ratio)))
    high = math.ceil(length * (1 + range_ratio))
    if not 1 <= length <= high <= MAX_TOKEN_COUNT:
        raise ValueError(f"length must be 1 to {MAX_TOKEN_COUNT:,} at its range's top")
    return TokenCount("fixed", low) if low == high else TokenCount("uniform", low, high)


def _random(args: object) -> TokenCount:
    if isinstance(args, dict) and set(args) <= {"length", "range_ratio"} and "length" in args:
        length, ratio = args["length"], args.get("range_ratio", 0.0)
        if isinstance(length, int) and not isinstance(length, bool) and _number(ratio):
            return random_dataset(length, float(ratio))
    raise ValueError(f"random needs {{length: L, range_ratio: R}} (L whole), got {args!r}")


#: ShareGPT-like lengths (tokens) as lognormals, by side. Means: the ShareGPT dataset
#: as the vLLM paper serves it (Kwon et al., SOSP 2023, arXiv 2309.06180, section 6.1
#: and figure 11a: mean input 161.31, mean output 337.99 tokens; grade: published).
#: Sigma 1.0 on both sides is an assumption (the paper gives histograms, not a fit; a
#: sigma of 1 gives their long right tail); the median is the published mean over
#: ``exp(sigma^2 / 2)`` so each side keeps its published mean (derived).
SHAREGPT_SIGMA = 1.0
SHAREGPT_MEAN_TOKENS = {"prompt": 161.31, "output": 337.99}
SHAREGPT = {
    side: TokenCount("lognormal", mean / math.exp(SHAREGPT_SIGMA**2 / 2), SHAREGPT_SIGMA)
    for side, mean in SHAREGPT_MEAN_TOKENS.items()
}


def _sharegpt(args: object) -> TokenCount:
    if isinstance(args, str) and args in SHAREGPT:
        return SHAREGPT[args]
    raise ValueError(f"sharegpt needs prompt or output, got {args!r}")


#: Named distributions: a mapping's key and its reader.
NAMED = {"random": _random, "sharegpt": _sharegpt}


def _number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def arrival_times(
    rng: np.random.Generator, n: int, rate_per_s: float, arrival: Arrival, burstiness: float
) -> np.ndarray:
    """``n`` arrival instants (s): a Poisson process of ``rate_per_s``, or gamma
    inter-arrival times of the same mean and coefficient of variation ``burstiness``
    (1 is Poisson; above 1 burstier, below more regular); an infinite rate sends them
    all at once (at 0, as vLLM's benchmark ``--request-rate inf``)."""
    if math.isinf(rate_per_s):
        return np.zeros(n)
    if arrival == "poisson":
        gaps = rng.exponential(1.0 / rate_per_s, size=n)
    else:
        shape = 1.0 / burstiness**2
        gaps = rng.gamma(shape, 1.0 / (rate_per_s * shape), size=n)
    return np.cumsum(gaps)


def synthetic_requests(
    n: int,
    rate_per_s: float,
    prompt: TokenCount,
    output: TokenCount,
    *,
    seed: int,
    arrival: Arrival = "poisson",
    burstiness: float = 1.0,
    prefix_hit_rate: float = 0.0,
) -> list[Request]:
    """``n`` requests (see :func:`arrival_times`); the same seed gives the same ones.
    ``prefix_hit_rate``: the fraction of them (drawn independently, after the token
    counts) whose prompt starts with the shared prefix the prefix cache holds."""
    rng = np.random.default_rng(seed)
    at = arrival_times(rng, n, rate_per_s, arrival, burstiness)
    prompts, outputs = prompt.draw(rng, n), output.draw(rng, n)
    hits = rng.random(n) < prefix_hit_rate if prefix_hit_rate > 0 else np.zeros(n, bool)
    return [
        Request(i, float(at[i]), int(prompts[i]), int(outputs[i]), prefix_hit=bool(hits[i]))
        for i in range(n)
    ]


def read_trace(path: str | Path) -> list[Request]:
    """Requests from a trace CSV (see the module docstring), sorted by arrival.
    Raises :class:`InputError` naming ``file:line`` for a bad header or row."""
    path = Path(path)
    try:
        with path.open("rb") as handle:  # bounded: an endless file stops at the limit
            raw = handle.read(MAX_TRACE_BYTES + 1)
        if len(raw) > MAX_TRACE_BYTES:
            raise InputError(f"{path}: the trace is over the limit of {MAX_TRACE_BYTES:,} bytes")
        text = raw.decode("utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read the trace ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: the trace is not a text CSV file") from None
    if "\0" in text:
        raise InputError(f"{path}: the trace is not a text CSV file")
    rows = list(csv.reader(text.splitlines()))
    if len(rows) > MAX_REQUESTS + 1:
        raise InputError(f"{path}: over the limit of {MAX_REQUESTS:,} requests")
    if not rows or tuple(c.strip() for c in rows[0]) != TRACE_COLUMNS:
        raise InputError(f"{path}:1: the header must be {','.join(TRACE_COLUMNS)}")
    out = [_trace_row(path, line, row) for line, row in enumerate(rows[1:], start=2) if row]
    if not out:
        raise InputError(f"{path}: the trace has no requests")
    out.sort(key=lambda r: r.arrival_at)
    for i, req in enumerate(out):
        req.id = i
    return out


def _trace_row(path: Path, line: int, row: list[str]) -> Request:
    where = f"{path}:{line}"
    if len(row) != len(TRACE_COLUMNS):
        raise InputError(f"{where}: expected {len(TRACE_COLUMNS)} values, got {len(row)}")
    try:
        at = float(row[0])
        prompt, output = int(row[1]), int(row[2])
    except ValueError:
        raise InputError(f"{where}: not numbers: {','.join(row)}") from None
    if not (math.isfinite(at) and at >= 0):
        raise InputError(f"{where}: arrival_s must be a finite time >= 0, got {row[0]}")
    if not (math.isfinite(at) and at <= MAX_STREAM_SPAN_S):
        raise InputError(f"{where}: arrival_s is over the limit of {MAX_STREAM_SPAN_S:g} s")
    if not (1 <= prompt <= MAX_TOKEN_COUNT and 1 <= output <= MAX_TOKEN_COUNT):
        raise InputError(
            f"{where}: prompt_tokens and output_tokens must be 1 to {MAX_TOKEN_COUNT:,}"
        )
    return Request(0, at, prompt, output)
