"""The time of one serving iteration of a replica, from the chip model and the engine,
cached by batch shape so that long runs stay fast.

An iteration is a strictly sequential chain of ops (:mod:`tpusim.program.builders.serving`),
so its time is the sum of its ops' times, and it splits into three parts:

* the layers without the attention proper (projections, MLPs or experts, tensor
  all-reduces, expert all-to-alls, the embedding): their time depends only on the
  tokens per chip ``t``. One dense and one MoE layer are simulated by the engine
  (:class:`~tpusim.engine.Simulation`, on the real topology with the chip's collective
  engine) once per *bucket* of ``t`` and multiplied by the layer counts;
* the output (final norm, LM head, sampler gather): simulated once per bucket of the
  sequences per chip;
* the attention proper (KV read from its tier, prefill score and value matmuls):
  compute ops only, costed exactly (no bucketing) by the chip's
  :class:`~tpusim.hardware.ChipCostModel`, which is what the engine charges for them.

Buckets: a count ``x`` up to ``EXACT_BUCKETS_UP_TO`` is its own bucket; above, it
rounds *up* to the next point of a geometric grid of ``BUCKETS_PER_DOUBLING`` points
per doubling (``ceil(16 * 2^(j/8))``). Error bound: every term of a bucketed part
(roofline matmuls whose weights do not depend on ``t``, elementwise traffic,
alpha-beta collectives, fixed overheads) is non-decreasing and grows at most linearly
with ``t``, so rounding ``t`` up to ``t'`` overestimates the part by at most
``t'/t - 1``: under ``2^(1/8) - 1 + 1/t`` (9.1% plus the rounding to a whole count),
11.4% at worst (``t = 35``), never underestimates, and is exact up to 16.
``tests/test_serving_costs.py`` measures the error against unbucketed engine runs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tpusim.engine import RunSettings, Simulation
from tpusim.engine.handlers import matmul_cost
from tpusim.hardware import ChipCostModel
from tpusim.network import NetworkSettings
from tpusim.network.routes import RouteCache
from tpusim.program.builders.gmm_ep import padded_tokens
from tpusim.program.builders.oplist import Chain, OpList
from tpusim.program.builders.replica import ReplicaShape
from tpusim.program.builders.serving import (
    IterationBatch,
    attention_ops,
    layer_program,
    output_program,
)
from tpusim.program.ir import Op, Program
from tpusim.serving.overheads import (
    NONE,
    SAMPLER_LOGIT_BYTES,
    IterationOverheads,
    with_hbm_efficiency,
)
from tpusim.topology import build_topology

if TYPE_CHECKING:
    from tpusim.config.loader import System

#: Counts up to this are their own bucket (a design choice: small batches, where one
#: token more is a large relative change, are simulated exactly).
EXACT_BUCKETS_UP_TO = 16
#: The routed experts' compute ops of a MoE layer (by name suffix), which uneven
#: routing lengthens on the busiest rank.
ROUTED_EXPERT_OPS = (".moe.up", ".moe.act", ".moe.down")
#: Geometric grid points per doubling above :data:`EXACT_BUCKETS_UP_TO` (a design
#: choice: a 9.1% worst-case overestimate, 8 engine runs per doubling).
BUCKETS_PER_DOUBLING = 8


def bucket(x: int) -> int:
    """``x`` rounded up to its bucket (see the module docstring); ``x >= 1``."""
    if x <= EXACT_BUCKETS_UP_TO:
        return x
    step = math.ceil(BUCKETS_PER_DOUBLING * math.log2(x / EXACT_BUCKETS_UP_TO) - 1e-9)
    point = math.ceil(EXACT_BUCKETS_UP_TO * 2 ** (step / BUCKETS_PER_DOUBLING) - 1e-9)
    return max(point, x)


@dataclass(frozen=True)
class ReplicaBatch:
    """One iteration of a replica: ``decode`` sequences (one token each), prefill
    ``chunk_tokens`` over ``chunks`` chunks, ``kv_tokens`` cached tokens attended to
    (decode contexts plus each chunk's prior context), ``prefill_pairs`` causal
    (query, key) pairs of the chunks (``sum c (p + (c + 1) / 2)``), ``sram_tokens`` of
    the cached tokens in SRAM (tiered cache)."""

    decode: int
    chunk_tokens: int = 0
    chunks: int = 0
    kv_tokens: int = 0
    prefill_pairs: float = 0.0
    sram_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.decode + self.chunk_tokens

    @property
    def sequences(self) -> int:
        return self.decode + self.chunks

    def per_chip(self, ep: int) -> IterationBatch:
        """One chip's share: ``1/ep`` of everything (attention data parallel over the
        expert groups, balanced), rounded up."""

        def share(x: int) -> int:
            return -(-x // ep)

        keys = self.prefill_pairs / self.chunk_tokens if self.chunk_tokens else 0.0
        return IterationBatch(
            tokens=share(self.tokens),
            sequences=share(self.sequences),
            kv_tokens=share(self.kv_tokens),
            sram_tokens=share(self.sram_tokens),
            prefill_tokens=share(self.chunk_tokens),
            prefill_keys=keys,
        )


def compute_op_time_s(costs: ChipCostModel, op: Op) -> float:
    """What the engine charges for a compute op (matmul, kernel or elementwise), in seconds."""
    if op.kind == "matmul":
        return matmul_cost(costs, op).time_s
    if op.kind == "kernel":
        work = (op.mxu_flops, op.padded_flops, op.vector_ops, op.bytes)
        return costs.kernel(*work, op.dtype, op.memory, op.pad_dims).time_s  # type: ignore[arg-type]
    return costs.elementwise(op.bytes, op.memory, op.gather, op.vector).time_s


#: Flow fidelity at its default tolerance.
DEFAULT_NETWORK = NetworkSettings()


class IterationCosts:
    """Iteration times (s) of one replica of shape ``shape`` on ``system``; the engine
    runs on ``network`` (settings) on ``topology`` and ``routes`` (built once, shared by every
    run). ``engine_runs`` counts the simulations made. ``overheads``
    (:mod:`tpusim.serving.overheads`): the host time, HBM efficiency and sampler
    passes added to every iteration (default none: the engine's time alone);
    ``async_scheduling`` (vLLM's ``--async-scheduling``): the host prepares the next
    iteration while the chips run this one, so an iteration takes the longer of the
    two instead of their sum. ``expert_imbalance`` (>= 1): uneven expert routing, the
    routed tokens of the busiest expert-parallel rank over the mean; that rank's
    routed-expert compute (the batched up and down matmuls and their activation) takes
    as long as ``imbalance`` times the rows, and the layer waits for it (the
    all-to-alls are kept balanced)."""

    def __init__(
        self,
        system: System,
        shape: ReplicaShape,
        network: NetworkSettings = DEFAULT_NETWORK,
        overheads: IterationOverheads = NONE,
        async_scheduling: bool = False,
        expert_imbalance: float = 1.0,
    ):

        self.overheads, self.async_scheduling = overheads, async_scheduling
        self.expert_imbalance = expert_imbalance
        system = with_hbm_efficiency(system, overheads.hbm_efficiency)
        self.system, self.shape, self.network = system, shape, network
        self.topology = build_topology(system)
        self.routes = RouteCache(self.topology)
        self.costs = ChipCostModel(system.chip)
        self.engine_runs = 0
        self._layers: dict[int, tuple[float, float, float]] = {}
        self._output: dict[int, float] = {}
        self._sampling: dict[tuple[int, float], float] = {}

    def simulate(self, program: Program) -> dict[str, float]:
        """Seconds per op name of ``program`` simulated by the engine."""

        self.engine_runs += 1
        settings = RunSettings(self.network, port_rows=False)
        results = Simulation(
            self.system, program, settings, topology=self.topology, routes=self.routes
        ).run()
        return {r.name: r.end_at - r.start_at for r in results.ops}

    def layer_times_s(self, tokens: int) -> tuple[float, float, float]:
        """(the embedding, one dense layer, one MoE layer) without the attention proper,
        at ``tokens`` per chip (bucketed)."""
        key = bucket(tokens)
        if key not in self._layers:
            program = self.with_expert_efficiency(layer_program(self.shape, key))
            times = self.simulate(program)
            embed, dense, moe = (_sum(times, p) for p in (("embed",), ("dense.",), ("moe.",)))
            self._layers[key] = (embed, dense, moe + self.imbalance_s(program))
        return self._layers[key]

    def with_expert_efficiency(self, program: Program) -> Program:
        """``program`` with its routed experts' matmuls at the server's
        ``expert_efficiency`` (:mod:`tpusim.serving.overheads`)."""
        e = self.overheads.expert_efficiency
        if e == 1.0:
            return program
        ops = tuple(
            dataclasses.replace(op, efficiency=e) if _routed_matmul(op) else op
            for op in program.ops
        )
        return dataclasses.replace(program, ops=ops)

    def imbalance_s(self, program: Program) -> float:
        """Seconds uneven routing adds to one MoE layer of ``program``: its routed-expert
        compute ops costed at ``expert_imbalance`` times their rows, less as given."""
        f = self.expert_imbalance
        if f == 1.0:
            return 0.0
        extra = 0.0
        for op in program.ops:
            if op.name.startswith("moe.") and op.name.endswith(ROUTED_EXPERT_OPS):
                scaled = (
                    dataclasses.replace(op, m=math.ceil(op.m * f))  # type: ignore[operator]
                    if op.kind == "matmul"
                    else dataclasses.replace(op, bytes=op.bytes * f)  # type: ignore[operator]
                )
                extra += compute_op_time_s(self.costs, scaled) - compute_op_time_s(self.costs, op)
        return extra

    def output_time_s(self, sequences: int) -> float:
        """Final norm, LM head and sampler at ``sequences`` per chip (bucketed)."""
        key = bucket(sequences)
        if key not in self._output:
            self._output[key] = sum(self.simulate(output_program(self.shape, key)).values())
        return self._output[key]

    def attention_time_s(self, batch: IterationBatch) -> float:
        """The attention proper of one layer (exact, from the cost model)."""
        out = OpList()
        attention_ops(Chain(out), self.shape, batch, "L")
        return sum(compute_op_time_s(self.costs, op) for op in out.ops)

    def time_s(self, batch: ReplicaBatch) -> float:
        """Seconds of one iteration of ``batch``."""
        s, chip = self.shape, batch.per_chip(self.shape.ep)
        embed, dense, moe = self.layer_times_s(chip.tokens)
        moe += self.moe_fixed_s(chip.tokens)
        layers = embed + s.dense_layers * dense + s.moe_layers * moe
        attention = s.layers * self.attention_time_s(chip)
        device = layers + attention + self.output_time_s(chip.sequences)
        device += self.sampling_s(chip.sequences) + self.overheads.step_s
        host = self.overheads.host_s
        return max(device, host) if self.async_scheduling else device + host

    def moe_fixed_s(self, tokens: int) -> float:
        """The server's fixed MoE terms of one layer at ``tokens`` per chip: per layer,
        and per token of the step (padded to the kernel's bucket where the server's
        MoE kernel pads; :mod:`tpusim.serving.overheads`)."""
        kernel = self.shape.moe_kernel
        padded = tokens if kernel is None else padded_tokens(tokens, kernel.min_tokens)
        return self.overheads.moe_layer_s + self.overheads.moe_token_s * padded

    def sampling_s(self, sequences: int) -> float:
        """The sampler's extra passes over the fp32 logits of ``sequences`` per chip
        (seconds; :mod:`tpusim.serving.overheads`)."""
        passes = self.overheads.sampling_passes
        if not passes or not self.shape.vocab:
            return 0.0
        key = (sequences, passes)
        if key not in self._sampling:
            vocab = math.ceil(self.shape.vocab / self.shape.tp)
            logits = sequences * vocab * SAMPLER_LOGIT_BYTES
            self._sampling[key] = passes * self.costs.elementwise(logits).time_s
        return self._sampling[key]


def _routed_matmul(op: Op) -> bool:
    """Whether ``op`` is a routed expert's matmul of a MoE layer."""
    return (
        op.kind == "matmul" and op.name.startswith("moe.") and op.name.endswith(ROUTED_EXPERT_OPS)
    )


def _sum(times: dict[str, float], prefixes: Iterable[str]) -> float:
    """Seconds of the ops whose names start with one of ``prefixes``."""
    starts = tuple(prefixes)
    return sum(t for name, t in times.items() if name.startswith(starts))
