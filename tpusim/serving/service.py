"""A deployment (model, system, parallelism, KV tier) and the run of a request stream
on it: replicas fed round-robin, each a SimPy process over iterations
(:mod:`tpusim.serving.replica`: the scheduler's plan, timed by
:class:`~tpusim.serving.costs.IterationCosts`) on the engine's environment
(:mod:`tpusim.serving.shared`), seeded and deterministic.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Protocol

import simpy

from tpusim.config.chip import ChipSpec
from tpusim.config.loader import System, load_model, load_system
from tpusim.config.model import ModelSpec
from tpusim.engine import Simulation
from tpusim.errors import InputError
from tpusim.hardware.quantized import QUANTIZED, native_activation_dtype
from tpusim.network import NetworkSettings
from tpusim.program.builders.gmm_ep import GmmEp, row_tile
from tpusim.program.builders.replica import ReplicaShape, replica_shape
from tpusim.program.ir import ProgramError
from tpusim.serving.batching import BATCH_POLICIES
from tpusim.serving.costs import IterationCosts
from tpusim.serving.memory import DEFAULT_BLOCK_SIZE, HBM_UTILIZATION, KvCapacity, kv_capacity
from tpusim.serving.option_error import OptionError
from tpusim.serving.overheads import NONE, IterationOverheads
from tpusim.serving.placement import replica_chip_order
from tpusim.serving.policies import DEFAULT_SCHEDULER, SCHEDULERS
from tpusim.serving.replica import (
    Collect,
    Completed,
    IterationRecord,
    Replica,
    ReplicaRun,
    ServingRun,
)
from tpusim.serving.rows import Row
from tpusim.serving.scheduler import Request, Scheduler
from tpusim.serving.servers import DEFAULT_SERVER, ServerProfile, load_server
from tpusim.serving.shared import host_for

#: Tokens per iteration: vLLM V1's ``max_num_batched_tokens`` default for online
#: serving (published default; chunked prefill splits longer prompts).
DEFAULT_MAX_TOKENS = 8192
#: Sequences per iteration: vLLM's ``max_num_seqs`` default (published default).
DEFAULT_MAX_SEQUENCES = 256


@dataclass(frozen=True)
class Deployment:
    """What to serve where: ``system`` and ``model`` (shipped names or YAML paths),
    ``tp`` x ``ep`` chips per replica (None: from ``chips``, else the fewest that fit),
    ``replicas``, the weights' ``dtype`` (as stored: a quantized checkpoint's is read
    at its size, :mod:`tpusim.hardware.quantized`), the KV cache's ``kv_dtype`` (None:
    the activations', vLLM's ``--kv-cache-dtype auto``), the KV tier and the
    scheduler limits;
    ``system`` may also be a loaded system. ``server``: the server profile (a
    shipped name or a YAML path, :mod:`tpusim.serving.servers`) whose per-iteration
    overheads for the chip are added (``overheads`` False: the engine's iteration
    time alone; or give the overheads) and whose scheduling mode applies;
    ``async_scheduling`` overrides that mode (True: the host overlaps the next
    iteration's scheduling with this one's device time, vLLM's
    ``--async-scheduling``; None: the profile's); ``prefix_tokens``: the
    shared prompt prefix the prefix cache holds (0: no prefix caching; see
    :mod:`tpusim.serving.scheduler`); ``draft_tokens`` and ``acceptance``:
    speculative decoding (0 drafts: none; the same module); ``expert_imbalance``: the
    busiest expert-parallel rank's routed tokens over the mean (1: uniform routing;
    :class:`~tpusim.serving.costs.IterationCosts`); ``scheduler``: the policy admitting
    waiting requests (a name of :data:`~tpusim.serving.policies.SCHEDULERS`);
    ``batching``: how an iteration's batch is formed (a name of
    :data:`~tpusim.serving.batching.BATCH_POLICIES`; None: the server profile's);
    ``expert_parallel``: a MoE model's experts held whole by the replica's devices, as
    the server profile's ``moe_kernel`` runs them (vLLM's ``--enable-expert-parallel``;
    False: sharded by tensor parallelism; None: the profile's kernel wherever it can
    run, :func:`with_moe_kernel`); ``hbm_utilization``: the fraction of each chip's HBM
    the server takes for weights, activations and KV cache (vLLM's
    ``--gpu-memory-utilization``); ``max_model_len``: the longest request (prompt and
    output tokens) the server takes, vLLM's ``--max-model-len`` (None: the model's
    context)."""

    system: str | System
    model: str
    tp: int | None = None
    ep: int | None = None
    chips: int | None = None
    replicas: int = 1
    dtype: str = "bf16"
    kv_dtype: str | None = None
    kv_cache: str = "hbm"
    block_size: int = DEFAULT_BLOCK_SIZE
    max_tokens: int = DEFAULT_MAX_TOKENS
    max_sequences: int = DEFAULT_MAX_SEQUENCES
    network: NetworkSettings = field(default_factory=NetworkSettings)
    server: str = DEFAULT_SERVER
    overheads: bool | IterationOverheads = True
    async_scheduling: bool | None = None
    prefix_tokens: int = 0
    draft_tokens: int = 0
    acceptance: float = 0.0
    expert_imbalance: float = 1.0
    scheduler: str = DEFAULT_SCHEDULER
    batching: str | None = None
    expert_parallel: bool | None = None
    hbm_utilization: float = HBM_UTILIZATION
    max_model_len: int | None = None


class Runner(Protocol):
    """What serves a stream: a :class:`Service` or a disaggregated one."""

    deployment: Deployment
    costs: IterationCosts

    @property
    def chips(self) -> int: ...

    def run(self, requests: list[Request]) -> ServingRun: ...

    def start(self, requests: list[Request], host: Simulation) -> Collect: ...

    def describe(self) -> Row: ...


def check_clients(concurrency: int | None, replicas: int) -> None:
    """Raise OptionError when a closed loop has fewer clients than ``replicas`` (each
    replica needs one)."""
    if concurrency is not None and concurrency < replicas:
        raise OptionError("concurrency", f"{concurrency} is below the {replicas} replicas")


def with_moe_kernel(
    shape: ReplicaShape,
    server: ServerProfile,
    chip: ChipSpec,
    expert_parallel: bool | None = None,
) -> ReplicaShape:
    """``shape`` with the server's MoE kernel on ``chip``: ``gmm_v2``'s row tile from the
    bits of the activations as it multiplies them (8 where the chip's MXU has the
    weights' 8-bit dtype and the kernel quantizes them, else bf16's 16) and of the
    weights. Unchanged for a dense model, a profile that names no kernel, or a replica
    whose devices (TensorCores, or one megacore device a chip) do not divide the
    experts (``GMM_EP`` shards whole experts, so tpu-inference cannot run expert
    parallelism there and the experts stay tensor-parallel, its ``GMM_TP``).
    ``expert_parallel`` False keeps them tensor-parallel (vLLM without
    ``--enable-expert-parallel``); True asks for the kernel and raises OptionError
    where it cannot run."""
    spec = server.moe_kernel
    cores = chip.tensorcores.devices
    devices = shape.tp * cores
    divides = shape.experts_local % devices == 0
    if expert_parallel and shape.experts and spec is None:
        raise OptionError(
            "expert_parallel",
            f"server profile {server.name} names no expert-parallel MoE kernel "
            "(moe_kernel in its file); drop --expert-parallel",
        )
    if expert_parallel and shape.experts and not divides:
        raise OptionError(
            "expert_parallel",
            f"{devices} devices (tp {shape.tp} x {cores} a chip) do not divide the "
            f"{shape.experts_local} experts of a replica",
        )
    if expert_parallel is False or spec is None or not shape.experts or not divides:
        return shape
    act_bits = 8 if native_activation_dtype(chip, shape.dtype) else 16
    weight_bits = round(shape.weight_bytes_per_element * 8)
    tile = row_tile(act_bits if shape.dtype in QUANTIZED else weight_bits, weight_bits)
    return dataclasses.replace(shape, moe_kernel=GmmEp(cores, tile, spec.min_tokens))


class Service:
    """A loaded :class:`Deployment`: the system, the model preset, the replica's shape,
    its KV capacity and its (cached) iteration costs. Raises :class:`InputError` for an
    unknown system or model, a parallelism that does not divide the model, a model
    that does not fit or more chips than the system has."""

    def __init__(self, deployment: Deployment):
        d = deployment
        self.deployment = d
        self.system: System = load_system(d.system) if isinstance(d.system, str) else d.system
        self.model: ModelSpec = load_model(d.model)
        self.server: ServerProfile = load_server(d.server)
        self.shape, self.capacity = self._fit()
        self.shape = with_moe_kernel(self.shape, self.server, self.system.chip, d.expert_parallel)
        if self.shape.chips * d.replicas > self.system.num_chips:
            raise InputError(
                f"{d.replicas} replicas of {self.shape.chips} chips need "
                f"{self.shape.chips * d.replicas} chips; {self.system.name} has "
                f"{self.system.num_chips}"
            )
        self.costs = IterationCosts(
            self.system,
            self.shape,
            d.network,
            self._overheads(),
            self.async_scheduling,
            d.expert_imbalance,
        )
        order = replica_chip_order(self.costs.topology, self.shape.chips, d.replicas)
        if order:
            self.shape = dataclasses.replace(self.shape, chip_order=order)
            self.costs.shape = self.shape

    def _overheads(self) -> IterationOverheads:
        given = self.deployment.overheads
        if isinstance(given, IterationOverheads):
            return given
        return self.server.overheads(self.system.chip.name) if given else NONE

    @property
    def async_scheduling(self) -> bool:
        """The scheduling mode: as the deployment overrides it, else the profile's."""
        given = self.deployment.async_scheduling
        return self.server.async_scheduling if given is None else given

    @property
    def batching(self) -> str:
        """The batch policy's name: as the deployment gives it, else the profile's."""
        return self.deployment.batching or self.server.batching.value

    @property
    def chips(self) -> int:
        """Chips of every replica."""
        return self.shape.chips * self.deployment.replicas

    def _shape(self, tp: int, ep: int) -> tuple[ReplicaShape, KvCapacity]:
        d = self.deployment
        try:
            shape = replica_shape(
                self.model.builder_fields(),
                tp=tp,
                ep=ep,
                replicas=d.replicas,
                dtype=d.dtype,
                kv_cache=d.kv_cache,
                kv_dtype=d.kv_dtype,
            )
        except ProgramError as exc:
            raise InputError(f"{self.model.name} on tp={tp}, ep={ep}: {exc}") from None
        try:
            capacity = kv_capacity(
                shape,
                self.system.chip,
                block_size=d.block_size,
                max_tokens=d.max_tokens,
                max_sequences=d.max_sequences,
                tied_embeddings=self.model.tied_embeddings,
                hbm_utilization=d.hbm_utilization,
            )
        except InputError as exc:
            raise InputError(f"{self.model.name} in {d.dtype}: {exc}") from None
        return shape, capacity

    def _fit(self) -> tuple[ReplicaShape, KvCapacity]:
        """The replica's shape: as given, or the fewest chips (powers of two) that fit."""
        d, moe = self.deployment, self.model.moe is not None
        if d.tp or d.ep:
            tp, ep = d.tp or 1, d.ep or 1
            if d.chips and d.chips != tp * ep:
                raise OptionError("chips", f"{d.chips} is not tp x ep = {tp} x {ep}")
            return self._shape(tp, ep)
        if d.chips:
            return self._shape(1, d.chips) if moe else self._shape(d.chips, 1)
        n, last = 1, None
        while n <= self.system.num_chips:
            try:
                return self._shape(1, n) if moe else self._shape(n, 1)
            except InputError as exc:
                last = exc
            n *= 2
        raise InputError(f"{self.model.name} fits no replica of {self.system.name}: {last}")

    def scheduler(self) -> Scheduler:
        """A fresh scheduler with this replica's cache and limits."""
        d, cap = self.deployment, self.capacity
        return Scheduler(
            cap.blocks,
            cap.block_size,
            d.max_tokens,
            d.max_sequences,
            cap.sram_blocks,
            d.prefix_tokens,
            d.draft_tokens,
            d.acceptance,
            policy=SCHEDULERS.get(d.scheduler),
            batching=BATCH_POLICIES.get(self.batching),
        )

    def run(self, requests: list[Request], concurrency: int | None = None) -> ServingRun:
        """Serve ``requests`` (sorted by arrival) alone, on a host of its own
        (:func:`~tpusim.serving.shared.host_for`); see :meth:`start`."""
        host = host_for(self.costs)
        collect = self.start(requests, host, concurrency)
        host.env.run()
        return collect()

    def start(
        self, requests: list[Request], host: Simulation, concurrency: int | None = None
    ) -> Collect:
        """Start one replica process per replica on ``host``'s environment, replica
        ``i mod replicas`` taking the ``i``-th of ``requests`` (sorted by arrival);
        every request ends completed or rejected. ``concurrency``: a closed loop of
        that many clients (vLLM's benchmark ``--max-concurrency``), split evenly over
        the replicas: a request is sent at its arrival time or when a client is free,
        whichever is later, and its TTFT counts from the sending (as that benchmark
        measures it). Returns what collects the run once the environment has run.
        Raises InputError for fewer clients than replicas."""
        n = self.deployment.replicas
        check_clients(concurrency, n)
        replicas = []
        for r in range(n):
            clients = None if concurrency is None else concurrency // n + (r < concurrency % n)
            replicas.append(self.replica(host.env, requests[r::n], clients))
        return lambda: ServingRun(requests, [replica.stats for replica in replicas])

    def replica(
        self,
        env: simpy.Environment,
        requests: list[Request],
        clients: int | None = None,
        completed: Completed | None = None,
    ) -> Replica:
        """A replica's process on ``env`` with a fresh scheduler (see :class:`Replica`)."""
        return Replica(
            env,
            self.scheduler(),
            self.costs,
            self.context_length,
            requests,
            clients,
            completed,
            async_scheduling=self.async_scheduling,
        )

    @property
    def context_length(self) -> int:
        """The longest request the server takes: the model's context, or the
        deployment's ``max_model_len`` when shorter."""
        limit = self.deployment.max_model_len
        context = self.model.context_length
        return context if limit is None else min(context, limit)

    def describe(self) -> Row:
        """The deployment's fixed figures (JSON fields)."""
        s, cap = self.shape, self.capacity
        return {
            "system": self.system.name,
            "model": self.model.name,
            "replicas": self.deployment.replicas,
            "chips_per_replica": s.chips,
            "chips": self.chips,
            "tp": s.tp,
            "ep": s.ep,
            "dtype": s.dtype,
            "kv_dtype": s.kv_dtype,
            "kv_cache": s.kv_cache,
            "kv_cache_capacity_tokens": cap.tokens * self.deployment.replicas,
            "kv_cache_capacity_tokens_per_replica": cap.tokens,
            "kv_cache_sram_tokens_per_replica": cap.sram_tokens,
            "weights_bytes_per_chip": cap.weights_bytes,
            "activation_bytes_per_chip": cap.activation_bytes,
            "kv_bytes_per_token_per_chip": cap.bytes_per_token_per_chip,
            "prefix_tokens": self.deployment.prefix_tokens,
            "draft_tokens": self.deployment.draft_tokens,
            "acceptance": self.deployment.acceptance,
            "expert_imbalance": self.deployment.expert_imbalance,
            "server": self.server.name,
            "server_terms": self.server.basis(self.system.chip.name),
            "async_scheduling": self.async_scheduling,
            "host_s_per_iteration": self.costs.overheads.host_s,
            "hbm_efficiency": self.costs.overheads.hbm_efficiency,
        }


__all__ = [
    "Deployment",
    "IterationRecord",
    "ReplicaRun",
    "Runner",
    "Service",
    "ServingRun",
    "check_clients",
]
