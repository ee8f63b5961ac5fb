"""What a serving run is given, as one typed model shared by ``tpusim serve`` (its flags
fill it) and the ``serving`` workload kind (its YAML keys are these fields).

:class:`ServeSpec` is what a user chooses: the model and its deployment (parallelism,
replicas or a prefill/decode split, the KV tier and the scheduler's limits,
speculative decoding, a shared prefix), the request stream (an open loop at a
``rate``, capped at ``concurrency`` requests in flight, or a ``trace``; token counts,
seed) and the capacity search at an SLO (times with units: ``2 s``, ``50 ms``).
:class:`ServeOptions` adds where it runs: the network (a
:class:`~tpusim.network.NetworkSettings`, read as the tree of :mod:`tpusim.network.tree`)
and the economics (all-in W and USD per chip-hour), which a scenario takes from its
system. Every value is checked here; what needs the loaded deployment (the context,
the cache, the expert-parallel degree) is checked by :func:`~tpusim.serving.run.serve`
and raised as an :class:`~tpusim.serving.option_error.OptionError` naming the field.
A message that names other options than the one it is about lists them (by field
name) in its ``mentions``: the error context's ``mentions`` of a validation error, or
:attr:`~tpusim.serving.option_error.OptionError.mentions`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Literal

from pydantic import Field, PositiveFloat, PositiveInt, field_validator, model_validator

from tpusim.config.limits import (
    MAX_BLOCK_SIZE,
    MAX_DRAFT_TOKENS,
    MAX_POWER_PER_CHIP_W,
    MAX_PRICE_PER_CHIP_HOUR_USD,
    MAX_REQUESTS,
    MAX_TOKEN_COUNT,
    stream_span_problem,
)
from tpusim.config.types import Time
from tpusim.network import NetworkSettings, NetworkTree
from tpusim.network.tree import read_flat
from tpusim.serving.batching import BatchingName
from tpusim.serving.memory import DEFAULT_BLOCK_SIZE, HBM_UTILIZATION
from tpusim.serving.metrics import Slo
from tpusim.serving.option_error import Problem, located_error, problem_error
from tpusim.serving.option_types import (
    TOKENS_HELP,
    Rate,
    Share,
    Split,
    TokenCountValue,
    within,
)
from tpusim.serving.policies import DEFAULT_SCHEDULER, SchedulerName
from tpusim.serving.requests import (
    BURSTINESS_RANGE,
    TokenCount,
    parse_token_count,
)
from tpusim.serving.servers import DEFAULT_SERVER, load_server
from tpusim.serving.service import DEFAULT_MAX_SEQUENCES, DEFAULT_MAX_TOKENS, Deployment
from tpusim.serving.steady import MIN_REQUESTS
from tpusim.serving.vllm_args import RecipeWords
from tpusim.vocabulary import Dtype

if TYPE_CHECKING:
    from tpusim.config.loader import System

#: Default stream: 1,000 requests of 1,024 prompt and 256 output tokens at 1 req/s
#: (a design choice, in the range of vLLM's and MLPerf's serving benchmarks).
DEFAULT_REQUESTS = 1000
DEFAULT_PROMPT_TOKENS = 1024
DEFAULT_OUTPUT_TOKENS = 256
#: The offered rate when none is given (requests/s; a design choice).
DEFAULT_RATE_PER_S = 1.0


class ServeSpec(RecipeWords):
    """The user's choices of a serving run (see the module docstring): each field is
    a ``kind: serving`` key and is set by a ``tpusim serve`` flag generated from it
    (:mod:`tpusim.cli.model_flags`: the description is the flag's help). Raises
    ValidationError naming the field to blame."""

    model: str = Field(description="model preset name or YAML path")
    tp: PositiveInt | None = Field(None, description="tensor-parallel degree")
    tp_devices: PositiveInt | None = Field(
        None,
        description="tensor-parallel degree in JAX devices, as vLLM's --tensor-parallel-size "
        "counts (an Ironwood or TPU 8i chip is 2 devices)",
    )
    expert_parallel: bool | None = Field(
        None,
        description="MoE experts whole over the tensor-parallel devices (vLLM's "
        "--enable-expert-parallel; off: sharded by tensor parallelism; default: the server "
        "profile's MoE kernel)",
    )
    ep: PositiveInt | None = Field(None, description="expert-parallel degree (MoE)")
    chips: PositiveInt | None = Field(None, description="chips per replica (default: fewest)")
    replicas: PositiveInt = Field(1, description="model replicas")
    dtype: Dtype = Field(
        "bf16",
        description="weights as stored (fp8/int8/int4/fp4: quantized; default: a quantized "
        "checkpoint's, else bf16)",
    )
    kv_dtype: Dtype | None = Field(None, description="KV cache dtype (default: the activations')")
    kv_cache: Literal["hbm", "sram", "tiered"] = Field(
        "hbm", description="KV cache tier (tiered: SRAM first, then HBM)"
    )
    rate: Rate | None = Field(
        None, description="requests/s (inf: all at once; default 1, or inf with concurrency)"
    )
    concurrency: PositiveInt | None = Field(
        None, description="at most N requests in flight (vLLM's bench --max-concurrency)"
    )
    arrival: Literal["poisson", "gamma"] = Field("poisson", description="arrival process")
    burstiness: PositiveFloat = Field(1.0, description="gamma arrivals' CV")
    requests: int = Field(DEFAULT_REQUESTS, description="requests in the stream")
    prompt_tokens: TokenCountValue = Field(DEFAULT_PROMPT_TOKENS, description=TOKENS_HELP)
    output_tokens: TokenCountValue = Field(DEFAULT_OUTPUT_TOKENS, description=TOKENS_HELP)
    seed: int = Field(0, description="seeds arrivals and token counts")
    block_size: PositiveInt = Field(
        DEFAULT_BLOCK_SIZE, le=MAX_BLOCK_SIZE, description="tokens per KV block"
    )
    max_model_len: PositiveInt | None = Field(
        None,
        le=MAX_TOKEN_COUNT,
        description="the longest request (prompt + output tokens) the server takes, vLLM's "
        "--max-model-len; a longer one is rejected (default: the model's context)",
    )
    hbm_utilization: Share = Field(
        HBM_UTILIZATION,
        description="share of each chip's HBM the server takes (vLLM's --gpu-memory-utilization)",
    )
    max_tokens: PositiveInt = Field(DEFAULT_MAX_TOKENS, description="tokens per iteration")
    max_sequences: PositiveInt = Field(
        DEFAULT_MAX_SEQUENCES,
        description="sequences per iteration",
        json_schema_extra={"flag": "max-seqs"},
    )
    scheduler: SchedulerName = Field(
        DEFAULT_SCHEDULER, description="scheduler policy admitting waiting requests"
    )
    batching: BatchingName | None = Field(
        None, description="batch policy forming each iteration (default: the server profile's)"
    )
    disaggregate: Split | None = Field(
        None,
        description="P prefill and D decode replicas, KV moved over the network "
        "(replaces replicas)",
    )
    server: str = Field(
        DEFAULT_SERVER, description="server profile: shipped name or YAML path (configs/servers/)"
    )
    async_scheduling: bool | None = Field(
        None,
        description="off: the host schedules between iterations, adding its time to each "
        "(default: the server profile's scheduling mode)",
        json_schema_extra={"flag": "no-async-scheduling"},
    )
    overheads: bool = Field(
        True,
        description="off: iteration time from the chip and network alone (no host, HBM "
        "efficiency, sampler)",
    )
    prefix_tokens: int = Field(0, description="shared prompt prefix in the prefix cache")
    prefix_hit_rate: float = Field(0.0, description="fraction of requests sharing it")
    draft_tokens: int = Field(0, description="speculative decoding: drafts per iteration")
    acceptance: float = Field(
        0.0,
        description="speculative decoding: each draft accepted with this probability",
        json_schema_extra={"flag": "acceptance-rate"},
    )
    expert_imbalance: float = Field(
        1.0, description="MoE: busiest expert-parallel rank's routed tokens over the mean"
    )
    find_capacity: bool = Field(False, description="bisect the rate to the SLO")
    # an SLO of 0 s would be met by nothing and was dropped as "no SLO": above zero
    slo_ttft: Time | None = Field(None, gt=0, description="p99 time-to-first-token SLO (s)")
    slo_tpot: Time | None = Field(None, gt=0, description="p99 time-per-output-token SLO (s)")
    trace: str | None = Field(None, description="CSV of arrival_s,prompt_tokens,output_tokens")

    @field_validator("seed")
    @classmethod
    def _seed(cls, value: int) -> int:
        if value < 0:
            raise ValueError(f"must be >= 0, got {value}")
        return value

    @field_validator("server")
    @classmethod
    def _server(cls, value: str) -> str:
        from tpusim.errors import ConfigError

        try:
            load_server(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("requests")
    @classmethod
    def _requests(cls, value: int) -> int:
        if not 1 <= value <= MAX_REQUESTS:
            raise ValueError(f"must be 1 to {MAX_REQUESTS:,}, got {value}")
        return value

    @field_validator("burstiness")
    @classmethod
    def _burstiness(cls, value: float) -> float:
        return within(value, *BURSTINESS_RANGE)

    @field_validator("rate")
    @classmethod
    def _rate(cls, value: float | None) -> float | None:
        if value is not None and not value > 0:
            raise ValueError(f"must be > 0 (inf: every request at once), got {value:g}")
        return value

    @field_validator("prompt_tokens", "output_tokens")
    @classmethod
    def _token_count(cls, value: TokenCountValue) -> TokenCountValue:
        parse_token_count(value)
        return value

    @field_validator("prefix_tokens")
    @classmethod
    def _prefix_tokens(cls, value: int) -> int:
        if not 0 <= value <= MAX_TOKEN_COUNT:
            raise ValueError(f"must be 0 to {MAX_TOKEN_COUNT:,}, got {value}")
        return value

    @field_validator("prefix_hit_rate", "acceptance")
    @classmethod
    def _fraction(cls, value: float) -> float:
        return within(value, 0.0, 1.0)

    @field_validator("draft_tokens")
    @classmethod
    def _draft_tokens(cls, value: int) -> int:
        if not 0 <= value <= MAX_DRAFT_TOKENS:
            raise ValueError(f"must be 0 to {MAX_DRAFT_TOKENS}, got {value}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ServeSpec:
        problem = self._combination_problem()
        if problem is not None:
            raise problem_error(problem)
        located = self._located_problem()
        if located is not None:
            raise located_error(*located)
        return self

    def _combination_problem(self) -> Problem | None:
        """What is wrong with the options taken together (None: nothing)."""
        if self.find_capacity and (self.slo_ttft is None or self.slo_tpot is None):
            return "find_capacity needs slo_ttft and slo_tpot", (
                "find_capacity",
                "slo_ttft",
                "slo_tpot",
            )
        if self.find_capacity and self.trace:
            return "find_capacity varies the rate; it takes no trace", ("find_capacity", "trace")
        if self.trace and self.rate is not None:
            return "trace gives the arrivals; drop rate", ("trace", "rate")
        if self.trace and "requests" in self.model_fields_set:
            return "trace gives the requests (one per row); drop requests", ("trace", "requests")
        if self.disaggregate and self.replicas != 1:
            return "disaggregate P:D sets the replica counts; drop replicas", (
                "disaggregate",
                "replicas",
            )
        if "burstiness" in self.model_fields_set and self.arrival != "gamma":
            return "burstiness shapes gamma arrivals; give arrival gamma", ("burstiness", "arrival")
        if self.arrival == "gamma" and self.offered_rate_per_s == math.inf:
            return "gamma arrivals space a finite rate; give rate", ("arrival", "rate")
        if self.concurrency and (self.find_capacity or self.disaggregate):
            return (
                "concurrency caps the requests in flight; it takes no find_capacity or "
                "disaggregate",
                ("concurrency", "find_capacity", "disaggregate"),
            )
        return None

    def _located_problem(self) -> tuple[str, Problem] | None:
        """(field, problem) of a value bad only next to another one (None: none)."""
        rate = self.offered_rate_per_s
        span = None if rate is None else stream_span_problem(rate, self.requests)
        if span is not None:
            return "rate", (span, ())
        if self.prefix_hit_rate > 0 and self.prefix_tokens == 0:
            return "prefix_hit_rate", (
                "needs prefix_tokens (the shared prefix)",
                ("prefix_tokens",),
            )
        longest = self._longest_prompt()
        if longest is not None and self.prefix_tokens > longest:
            return "prefix_tokens", (
                f"{self.prefix_tokens:,} tokens is longer than every prompt (at most "
                f"{longest:,} tokens of prompt_tokens); the prefix is part of a prompt",
                ("prompt_tokens",),
            )
        if self.acceptance > 0 and self.draft_tokens == 0:
            return "acceptance", ("needs draft_tokens (the drafts it accepts)", ("draft_tokens",))
        if self.find_capacity and self.requests < MIN_REQUESTS:
            return "requests", (
                f"the capacity search judges each rate in steady state and needs at least "
                f"{MIN_REQUESTS} requests, got {self.requests}",
                (),
            )
        return None

    def _longest_prompt(self) -> int | None:
        """The longest prompt the stream can draw (None: a trace's, or unbounded)."""
        if self.trace:
            return None
        prompt = self.prompt()
        bounds = {"fixed": prompt.a, "uniform": prompt.b}
        return int(bounds[prompt.kind]) if prompt.kind in bounds else None

    @property
    def offered_rate_per_s(self) -> float | None:
        """The arrivals' rate (requests/s): ``rate``; else inf under a ``concurrency`` cap
        (vLLM's benchmark: ``--request-rate`` defaults to inf), else 1; None with a trace."""
        if self.trace:
            return None
        if self.rate is None:
            return math.inf if self.concurrency else DEFAULT_RATE_PER_S
        return self.rate

    def prompt(self) -> TokenCount:
        """The prompt tokens' count or distribution."""
        return parse_token_count(self.prompt_tokens)

    def output(self) -> TokenCount:
        """The output tokens' count or distribution."""
        return parse_token_count(self.output_tokens)

    def slo(self) -> Slo | None:
        """The p99 SLO, when both of its times are given (and > 0)."""
        if self.slo_ttft and self.slo_tpot:
            return Slo(self.slo_ttft, self.slo_tpot)
        return None


class ServeOptions(ServeSpec):
    """:class:`ServeSpec` and where it runs: the ``network`` of the iteration costs (its
    fidelity and that fidelity's options, taken whole), and the all-in power per chip (W) and
    price per chip-hour (USD) of the energy and cost per million tokens."""

    network: NetworkTree = Field(
        default_factory=NetworkSettings, description="network fidelity and its options"
    )

    @model_validator(mode="before")
    @classmethod
    def _flat_network(cls, data: object) -> object:
        return read_flat(data, "ServeOptions")

    power_per_chip_W: PositiveFloat | None = Field(
        None, le=MAX_POWER_PER_CHIP_W, alias="power_per_chip", description="all-in W per chip"
    )
    price_per_chip_hour_usd: PositiveFloat | None = Field(
        None,
        le=MAX_PRICE_PER_CHIP_HOUR_USD,
        alias="price_per_chip_hour",
        description="USD per chip-hour",
    )

    def deployment(self, system: str | System) -> Deployment:
        """The :class:`~tpusim.serving.service.Deployment` of these options on
        ``system`` (a shipped name, a YAML path or a loaded system). Raises OptionError
        for options the system's chip cannot take (:mod:`tpusim.serving.chip_options`)."""
        from tpusim.config.loader import load_model, load_system
        from tpusim.serving.chip_options import check_kv_tier, tp_in_chips

        chip = (load_system(system) if isinstance(system, str) else system).chip
        check_kv_tier(self.kv_cache, chip)
        chosen = self.model_dump(include=DEPLOYMENT_FIELDS)
        if "dtype" not in self.model_fields_set:  # a quantized checkpoint's, else bf16
            chosen["dtype"] = load_model(self.model).checkpoint_dtype or self.dtype
        if self.tp_devices is not None:
            chosen["tp"] = tp_in_chips(self.tp_devices, self.tp, chip)
        return Deployment(system=system, network=self.network, **chosen)

    def economics(self) -> dict[str, float | None]:
        """The economics as :func:`~tpusim.serving.metrics.economics` takes them."""
        return {
            "power_per_chip_W": self.power_per_chip_W,
            "price_per_chip_hour_usd": self.price_per_chip_hour_usd,
        }


#: The options a :class:`~tpusim.serving.service.Deployment` takes (by the same names).
DEPLOYMENT_FIELDS = {f.name for f in dataclasses.fields(Deployment)} - {"system", "network"}


def with_environment(spec: ServeSpec, **environment: object) -> ServeOptions:
    """``spec``'s choices with ``environment`` (the fields :class:`ServeOptions` adds)."""
    chosen = spec.model_dump(include=set(ServeSpec.model_fields), exclude_unset=True)
    return ServeOptions.model_validate(chosen | environment)
