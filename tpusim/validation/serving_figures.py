"""The public serving figures of ``tpusim validate --serving``
(``configs/measurements/serving/*.yaml``): each a benchmark as it ran (the chip and the
slice it ran on, the server profile, the model and its tensor parallelism, the
stream and the server's limits) and what it measured.

Each figure may also carry, all optional:

* its exact source: ``repo`` (``owner/name``), ``path`` (the file in it), ``commit``
  (40 hex digits) and ``line`` (where the printed result starts), all four or none;
* the commands verbatim: ``server_command`` (the ``vllm serve ...`` flags or the
  JetStream server line) and ``bench_command`` (``vllm bench serve ...``);
* ``weight_dtype`` (bf16, fp8, int8, int4, fp4: the checkpoint's stored weights,
  default bf16) and ``kv_dtype`` (the KV cache's, default: the weights');
* ``ep``: the chips the experts are spread over (vLLM's ``--enable-expert-parallel``
  spreads them over the tensor-parallel chips: ``ep`` = ``tp``);
* ``random_range_ratio``: the random dataset's ``--random-range-ratio`` (0 to < 1), and
  ``random_client``, whose definition of it the benchmark client used (:data:`CLIENTS`):
  ``vllm`` (default; ``vllm bench serve``, lengths uniform on ``[L(1-r), L(1+r)]``) or
  ``inferencex`` (SemiAnalysisAI/InferenceX's ``utils/bench_serving/benchmark_serving.py``,
  a fork of vLLM's older script: uniform on ``[int(L r), L]``);
* ``tpot_definition``: how the benchmark client computed a request's TPOT
  (:func:`~tpusim.serving.metrics.latencies`): ``vllm`` (default; vLLM's and
  InferenceX's) or ``jetstream-2024`` (JetStream's client before 2025: the whole
  request latency, its queueing and prefill included, over the output tokens);
* ``speculative``: ``{method: mtp|eagle|ngram|draft_model, draft_tokens: N}`` and,
  where published, ``acceptance`` (each draft's acceptance probability), the names of
  ``tpusim serve``'s speculative-decoding options;
* ``disaggregate``: ``P:D`` prefill and decode replicas, the shape of ``tpusim serve
  --disaggregate``.

Measured metrics (:data:`METRICS`): output, total and request throughput and the
median and p99 TTFT and TPOT.

Each file states its ``split_rule`` (:data:`SPLIT_RULES`, checked on load, see
:func:`rule_splits`): ``alternate-by-id-within-chip-dtype``, the training set's rule:
within the file, each (chip, weights' dtype) group's figures sorted by id alternate
``fit``, ``holdout``, ... starting with ``fit``.

Loading refuses, as one :class:`~tpusim.errors.ConfigError` naming ``file:line path``:
an unknown or misspelled key, a key given twice, a count that is not a whole number
(``tp: 1.9``) or below 1, a rate that is not > 0, a flag that is not a YAML boolean
(``async_scheduling: "no"``), a measured value that is not > 0, a replica larger than
its slice, an unknown server profile, two figures sharing an ``id``, a dtype outside
the list above, an ``ep`` below 1 or above the slice, a source given in part, a
figure without ``published`` and a split its file's rule does not give.
"""

from __future__ import annotations

import datetime
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, get_args

from pydantic import Field, PositiveFloat, StrictBool, StrictInt, model_validator

from tpusim.config.limits import (
    MAX_FIGURE_TOKENS,
    MAX_SIMULATED_REQUESTS,
    measured_figure_problem,
    stream_span_problem,
)
from tpusim.config.loader import System, configs_dir, load_chip, load_model, validate
from tpusim.config.system import SystemSpec
from tpusim.config.types import Frozen
from tpusim.config.yamlio import PathKey, format_path, load_yaml
from tpusim.errors import ConfigError
from tpusim.serving.metrics import TpotDefinition
from tpusim.serving.option_types import Split
from tpusim.serving.servers import load_server
from tpusim.validation.serving_split import check_splits

if TYPE_CHECKING:
    from tpusim.config.loader import System

#: A metric compared, named as its simulated counterpart's key.
Metric = Literal[
    "output_tokens_per_s",
    "request_throughput_per_s",
    "total_tokens_per_s",
    "tpot_median_s",
    "tpot_p99_s",
    "ttft_median_s",
    "ttft_p99_s",
]
#: The metrics compared, in order.
METRICS: tuple[Metric, ...] = get_args(Metric)
#: The stored dtypes a figure's weights and KV cache may have.
StoredDtype = Literal["bf16", "fp8", "int8", "int4", "fp4"]
#: The split rules a figure file may state (see the module docstring).
SplitRule = Literal["alternate-by-id-within-chip-dtype"]
Client = Literal["vllm", "inferencex"]
#: The benchmark clients whose random dataset a figure may name (``random_client``).
CLIENTS: tuple[str, ...] = get_args(Client)
SPLIT_RULES: tuple[SplitRule, ...] = get_args(SplitRule)
#: Most chips of a figure's slice (a local bound: a serving replica's slice).
MAX_SLICE_CHIPS = 4096

Count = Annotated[StrictInt, Field(ge=1)]
Tokens = Annotated[StrictInt, Field(ge=1, le=MAX_FIGURE_TOKENS)]


class FigureSlice(Frozen):
    """The slice the benchmark ran on, as published (``v6e-8``), with its chip count
    and torus dims (a torus of the chip's wraparound rule)."""

    name: str = Field(min_length=1)
    chips: Annotated[StrictInt, Field(ge=1, le=MAX_SLICE_CHIPS)]
    dims: tuple[Annotated[StrictInt, Field(ge=1)], ...] = Field(min_length=1, max_length=3)

    @model_validator(mode="after")
    def _dims_hold_the_chips(self) -> FigureSlice:
        if math.prod(self.dims) != self.chips:
            raise ValueError(
                f"dims {list(self.dims)} hold {math.prod(self.dims)} chips, not {self.chips}"
            )
        return self


class Speculative(Frozen):
    """Speculative decoding as the server ran it: the drafting ``method``, the
    ``draft_tokens`` proposed per step and, where published, the ``acceptance``
    probability of each draft (``tpusim serve``'s names)."""

    method: Literal["mtp", "eagle", "ngram", "draft_model"]
    draft_tokens: Count
    acceptance: Annotated[float, Field(gt=0, le=1)] | None = None


class Figure(Frozen):
    """One published serving benchmark (see the measurement file's header and the
    module docstring)."""

    id: str = Field(min_length=1)
    split: Literal["fit", "holdout"]
    url: str = Field(pattern=r"^https://")
    published: datetime.date | None = None
    note: str = ""
    chip: str
    slice: FigureSlice
    server: str
    model: str
    tp: Count
    prompt_tokens: Tokens
    output_tokens: Tokens
    requests: Count | None = None
    simulated_requests: Annotated[StrictInt, Field(ge=1, le=MAX_SIMULATED_REQUESTS)]
    rate: Annotated[float, Field(gt=0, allow_inf_nan=True)] = math.inf
    concurrency: Count | None = None
    async_scheduling: StrictBool | None = None
    max_tokens: Count
    max_sequences: Count
    measured: dict[Metric, PositiveFloat] = Field(min_length=1)
    repo: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+$")
    path: str | None = Field(None, min_length=1)
    commit: str | None = Field(None, pattern=r"^[0-9a-f]{40}$")
    line: Count | None = None
    server_command: str = ""
    bench_command: str = ""
    weight_dtype: StoredDtype = "bf16"
    kv_dtype: StoredDtype | None = None
    ep: Count | None = None
    random_range_ratio: Annotated[float, Field(ge=0, lt=1)] | None = None
    random_client: Client = "vllm"
    tpot_definition: TpotDefinition = "vllm"
    speculative: Speculative | None = None
    disaggregate: Split | None = None

    @model_validator(mode="after")
    def _replica_fits(self) -> Figure:
        if self.tp > self.slice.chips:
            raise ValueError(f"tp {self.tp} needs more chips than the slice's {self.slice.chips}")
        if self.ep is not None and self.ep > self.slice.chips:
            raise ValueError(f"ep {self.ep} needs more chips than the slice's {self.slice.chips}")
        given = [k for k in ("repo", "path", "commit", "line") if getattr(self, k) is not None]
        if given and len(given) < 4:
            named = ", ".join(given)
            raise ValueError(f"source {named} given without the rest of repo, path, commit, line")
        if math.isnan(self.rate):
            raise ValueError("rate must be > 0 or .inf")
        span = stream_span_problem(self.rate, self.simulated_requests)  # as serve's rate
        if span is not None:
            raise ValueError(f"rate {span}")
        for metric, value in self.measured.items():
            problem = measured_figure_problem(metric, value)
            if problem is not None:
                raise ValueError(f"measured {metric}: {problem}")
        return self

    @property
    def system_name(self) -> str:
        """The slice's system name (``v6e-2x4``)."""
        return f"{self.chip}-{'x'.join(str(d) for d in self.slice.dims)}"


class FigureFile(Frozen):
    """A measurement file: its source, its split rule and its figures."""

    source: dict[str, str]
    split_rule: SplitRule
    figures: list[Figure] = Field(min_length=1)


def shipped_files() -> list[Path]:
    """``configs/measurements/serving/*.yaml``, sorted."""

    return sorted((configs_dir() / "measurements" / "serving").glob("*.yaml"))


def load_figures(paths: list[Path] | None = None) -> list[Figure]:
    """Every figure of ``paths`` (default: the shipped files). Raises ConfigError
    (``file:line path: problem``, see the module docstring)."""

    out: list[Figure] = []
    first: dict[str, str] = {}
    for path in paths or shipped_files():
        data, lines = load_yaml(path)
        _check_keys(data, str(path), lines)
        figures = validate(FigureFile, data, str(path), lines).figures
        for i, figure in enumerate(figures):
            where = ("figures", i)
            figure = _server_beside(figure, Path(path))
            _check_names(figure, str(path), lines, where)
            line = lines.get((*where, "id"))
            if figure.id in first:
                problem = f"id {figure.id!r} is already the id of a figure ({first[figure.id]})"
                raise ConfigError(problem, str(path), f"figures[{i}].id", line)
            first[figure.id] = f"{path}:{line}"
            out.append(figure)
        check_splits(figures, str(path), lines)
    return out


def _check_keys(data: object, file: str, lines: dict[PathKey, int]) -> None:
    """An unknown key of a figure is named as such (before a required key it may
    misspell is reported missing)."""

    figures = data.get("figures") if isinstance(data, dict) else None
    for i, raw in enumerate(figures if isinstance(figures, list) else []):
        unknown = [k for k in raw if k not in Figure.model_fields] if isinstance(raw, dict) else []
        if unknown:
            path = ("figures", i, str(unknown[0]))
            raise ConfigError("unknown key", file, format_path(path), lines.get(path))


def _server_beside(figure: Figure, file: Path) -> Figure:
    """A relative profile path resolved against the figures' file."""
    server = figure.server
    if not server.endswith((".yaml", ".yml")) or Path(server).is_absolute():
        return figure
    return figure.model_copy(update={"server": str(file.parent / server)})


def _check_names(
    figure: Figure, file: str, lines: dict[PathKey, int], where: tuple[str, int]
) -> None:
    """The figure's chip, model and server exist: ConfigError at their line."""

    for key, load in (("chip", load_chip), ("model", load_model), ("server", load_server)):
        try:
            load(getattr(figure, key))
        except ConfigError as exc:
            path = (*where, key)

            problem = str(exc) if exc.file else exc.problem
            raise ConfigError(problem, file, format_path(path), lines.get(path)) from None


def figure_system(figure: Figure) -> System:
    """The slice the figure ran on: a torus of its dims of its chip (wraparound by the
    chip's rule: none on a v6e-8's 2x4)."""

    spec = SystemSpec.model_validate(
        {
            "name": figure.system_name,
            "chip": figure.chip,
            "topology": {"kind": "torus", "dims": list(figure.slice.dims)},
        }
    )
    return System(spec=spec, chip=load_chip(figure.chip), file=figure.slice.name)
