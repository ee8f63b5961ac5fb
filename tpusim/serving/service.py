"""A deployment (model, system, parallelism, KV tier) and the run of a request stream
on it: replicas fed round-robin, each a loop over iterations (the scheduler's plan,
timed by :class:`~tpusim.serving.costs.IterationCosts`) in plain Python, seeded and
deterministic.

The loop also integrates, as it goes, the number of requests waiting and in the
system over time (request-seconds), an account independent of the per-request
timestamps: Little's law (``area = sum of per-request times``) checks one against the
other.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Protocol

from tpusim.config.loader import System, load_model, load_system
from tpusim.config.model import ModelSpec
from tpusim.errors import InputError, SimulationError
from tpusim.network import NetworkSettings
from tpusim.program.builders.replica import ReplicaShape, replica_shape
from tpusim.program.ir import ProgramError
from tpusim.serving.costs import IterationCosts
from tpusim.serving.memory import DEFAULT_BLOCK_SIZE, KvCapacity, kv_capacity
from tpusim.serving.option_error import OptionError
from tpusim.serving.overheads import NONE, IterationOverheads
from tpusim.serving.placement import replica_chip_order
from tpusim.serving.scheduler import Request, Scheduler
from tpusim.serving.servers import DEFAULT_SERVER, ServerProfile, load_server

#: Tokens per iteration: vLLM V1's ``max_num_batched_tokens`` default for online
#: serving (published default; chunked prefill splits longer prompts).
DEFAULT_MAX_TOKENS = 8192
#: Sequences per iteration: vLLM's ``max_num_seqs`` default (published default).
DEFAULT_MAX_SEQUENCES = 256


@dataclass(frozen=True)
class Deployment:
    """What to serve where: ``system`` and ``model`` (shipped names or YAML paths),
    ``tp`` x ``ep`` chips per replica (None: from ``chips``, else the fewest that fit),
    ``replicas``, the weights' ``dtype``, the KV tier and the scheduler limits;
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
    :class:`~tpusim.serving.costs.IterationCosts`)."""

    system: str | System
    model: str
    tp: int | None = None
    ep: int | None = None
    chips: int | None = None
    replicas: int = 1
    dtype: str = "bf16"
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


@dataclass(frozen=True)
class IterationRecord:
    """One iteration of a replica: when it started (s), how long it took (s), its
    ``decode`` sequences and its prefill ``chunks`` of ``prefill_tokens`` in all."""

    start_at: float
    duration_s: float
    decode: int
    chunks: int
    prefill_tokens: int

    @property
    def sequences(self) -> int:
        """The batch size: decode sequences plus prefill chunks."""
        return self.decode + self.chunks

    @property
    def tokens(self) -> int:
        """Tokens the iteration computes: one per decode sequence plus the chunks'."""
        return self.decode + self.prefill_tokens


@dataclass
class ReplicaRun:
    """What one replica's loop measured (request-seconds, counts) and its iterations
    (``batches``, in order)."""

    iterations: int = 0
    busy_s: float = 0.0
    queue_area: float = 0.0
    system_area: float = 0.0
    preemptions: int = 0
    free_blocks: int = 0
    batches: list[IterationRecord] = field(default_factory=list)


@dataclass
class ServingRun:
    """A finished run: every request (completed or rejected) and the loops' counts."""

    requests: list[Request]
    replicas: list[ReplicaRun] = field(default_factory=list)


class Runner(Protocol):
    """What serves a stream: a :class:`Service` or a disaggregated one."""

    deployment: Deployment
    costs: IterationCosts

    @property
    def chips(self) -> int: ...

    def run(self, requests: list[Request]) -> ServingRun: ...

    def describe(self) -> dict[str, Any]: ...


def check_clients(concurrency: int | None, replicas: int) -> None:
    """Raise OptionError when a closed loop has fewer clients than ``replicas`` (each
    replica needs one)."""
    if concurrency is not None and concurrency < replicas:
        raise OptionError("concurrency", f"{concurrency} is below the {replicas} replicas")


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
        )

    def run(self, requests: list[Request], concurrency: int | None = None) -> ServingRun:
        """Serve ``requests`` (sorted by arrival), replica ``i mod replicas`` taking the
        ``i``-th; every request ends completed or rejected. ``concurrency``: a closed
        loop of that many clients (vLLM's benchmark ``--max-concurrency``), split
        evenly over the replicas: a request is sent at its arrival time or when a
        client is free, whichever is later, and its TTFT counts from the sending (as
        that benchmark measures it). Raises InputError for fewer clients than replicas."""
        n = self.deployment.replicas
        check_clients(concurrency, n)
        run = ServingRun(requests)
        for r in range(n):
            clients = None if concurrency is None else concurrency // n + (r < concurrency % n)
            run.replicas.append(self.run_replica(requests[r::n], clients))
        return run

    def _arrive(self, sched: Scheduler, req: Request, now: float, stats: ReplicaRun) -> bool:
        """Admit ``req`` (arrived by ``now``) to the queue, or reject it (it cannot fit
        the cache alone or the context); True when admitted."""
        if not sched.fits_alone(req) or req.total_tokens + 1 > self.model.context_length:
            req.rejected = True
            return False
        sched.enqueue(req, req.arrival_at)
        stats.queue_area += now - req.arrival_at
        stats.system_area += now - req.arrival_at
        return True

    def run_replica(self, requests: list[Request], clients: int | None = None) -> ReplicaRun:
        """One replica's loop over iterations (see the module docstring); ``clients``:
        the closed loop's clients (see :meth:`run`)."""
        sched, stats = self.scheduler(), ReplicaRun()
        now, i, in_system = 0.0, 0, 0
        while i < len(requests) or not sched.idle:
            if sched.idle and now < requests[i].arrival_at:
                now = requests[i].arrival_at
            while i < len(requests) and requests[i].arrival_at <= now:
                if clients is not None and in_system >= clients:
                    break
                req, i = requests[i], i + 1
                if clients is not None:
                    req.arrival_at = now  # sent when a client is free
                in_system += self._arrive(sched, req, now, stats)
            plan = sched.schedule(now)
            if not plan.chunks:
                if sched.idle:
                    continue  # every arrival so far was rejected: wait for the next
                raise SimulationError("serving: the scheduler made no progress")
            dt = self.costs.time_s(plan.batch)  # type: ignore[arg-type]
            stats.batches.append(_record(plan.batch, now, dt))
            stats.queue_area += len(sched.waiting) * dt
            stats.system_area += in_system * dt
            now += dt
            stats.busy_s += dt
            stats.iterations += 1
            in_system -= len(sched.finish(plan, now))
        stats.preemptions, stats.free_blocks = sched.preemptions, sched.free_blocks
        return stats

    def describe(self) -> dict[str, Any]:
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
            "async_scheduling": self.async_scheduling,
            "host_s_per_iteration": self.costs.overheads.host_s,
            "hbm_efficiency": self.costs.overheads.hbm_efficiency,
        }


def _record(batch: Any, start_at: float, duration_s: float) -> IterationRecord:
    """The :class:`IterationRecord` of a scheduled batch."""
    return IterationRecord(start_at, duration_s, batch.decode, batch.chunks, batch.chunk_tokens)
