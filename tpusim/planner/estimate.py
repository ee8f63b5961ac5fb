"""The screen: a closed-form step time that orders the layouts that fit, so only the
most promising few are simulated.

Built from the builder's own op templates (:func:`~tpusim.program.builders.layers.layer_steps`
turned into ops by :func:`~tpusim.program.builders.template.emit_step`, forward and
backward as the step emits them) costed by the chip's op cost model
(:class:`~tpusim.hardware.ChipCostModel`), with each collective a ring over its mesh
axes (assumption: ``(n - 1) / n`` of the nccl-tests size per all-gather,
reduce-scatter or all-to-all pass, twice for an all-reduce, the whole size for a
permute; at two links per physical axis the mesh axes occupy, one hop latency per
ring step). Per loop iteration, one microbatch through the chunk's layers, forward,
(recomputed forward,) backward; the loop runs ``m v + p - 1`` iterations, so the
pipeline bubble is in the count. Synchronous collectives (tensor all-reduces, MoE
all-to-alls, pipeline permutes) add to the time; the asynchronous ones (FSDP gathers
and reduce-scatters, data-parallel all-reduces) overlap the compute:

    screen_s = max(compute_s, async_s) + sync_s

It is an ordering heuristic (no contention, perfect overlap), never a reported
time: the layouts it keeps are ranked by simulation.
"""

from __future__ import annotations

from dataclasses import dataclass

from tpusim.hardware import ChipCostModel
from tpusim.program.builders.emit import embed_steps, head_steps
from tpusim.program.builders.layers import layer_steps
from tpusim.program.builders.oplist import OpList
from tpusim.program.builders.template import LayerStep, emit_step
from tpusim.program.builders.training import ADAM_STATE_BYTES, TrainingStep
from tpusim.program.ir import Op

#: Ring passes per nccl-tests size of each collective (see the module docstring).
RING_PASSES = {
    "all-reduce": 2.0,
    "all-gather": 1.0,
    "reduce-scatter": 1.0,
    "all-to-all": 1.0,
    "collective-permute": 1.0,
}


@dataclass(frozen=True)
class Screen:
    """A layout's screened times per step (s): compute on the TensorCore, synchronous
    and asynchronous communication, and the screened step."""

    compute_s: float
    sync_s: float
    async_s: float

    @property
    def step_s(self) -> float:
        return max(self.compute_s, self.async_s) + self.sync_s


@dataclass(frozen=True)
class Network:
    """What the screen needs of the system: its ICI link bandwidth (B/s, one
    direction), hop latency (s) and mesh axis -> physical axes (or pieces) occupied."""

    link_bandwidth_Bps: float
    hop_latency_s: float
    pieces: dict[str, list[str]]

    def collective_s(self, op: str, size_bytes: float, axes: tuple[str, ...], mesh: dict) -> float:
        """The ring time of collective ``op`` of ``size_bytes`` over mesh ``axes``."""
        n = 1
        for axis in axes:
            n *= mesh[axis]
        if n <= 1:
            return 0.0
        links = 2 * sum(len(self.pieces.get(axis, [axis])) for axis in axes)
        passes = RING_PASSES.get(op, 1.0)
        share = 1.0 if op == "collective-permute" else (n - 1) / n
        steps = 1 if op == "collective-permute" else passes * (n - 1)
        return passes * share * size_bytes / (links * self.link_bandwidth_Bps) + (
            steps * self.hop_latency_s
        )


LayerMemo = dict[tuple[object, ...], tuple[float, float, float]]
"""Screened (compute, sync, async) seconds of a layer by :meth:`Screener.layer_key`."""

PassMemo = dict[tuple[object, ...], tuple[float, float]]
"""Screened (compute, sync) seconds of a pass by :meth:`Screener.pass_memo`'s key."""


class Screener:
    """Screens plans on one chip (``costs``) and network (``network``)."""

    def __init__(
        self,
        costs: ChipCostModel,
        network: Network,
        memo: LayerMemo | None = None,
        passes: PassMemo | None = None,
    ):
        self.costs, self.network = costs, network
        self.memo = {} if memo is None else memo
        self.passes = {} if passes is None else passes

    def layer_key(self, step: TrainingStep, layer: int) -> tuple[object, ...]:
        """What :meth:`layer_s` reads: the layer's shape, the mesh (the network's
        pieces follow from it), the recompute flag, the dtypes and the FSDP group; a
        ``memo`` shared by the layouts of one search keys their layers by it (remat
        policies and data/fsdp splits share most layers)."""
        args = step.args
        return (
            step.shape(layer),
            tuple(step.mesh.items()),
            getattr(args, "recompute", False),
            step.dtype,
            step.bytes_per_element,
            step.gradient_bytes,
            step.fsdp_group,
            step.params(layer).total,
        )

    def layer_memo(self, step: TrainingStep, layer: int) -> tuple[float, float, float]:
        """:meth:`layer_s`, memoised by :meth:`layer_key`."""
        key = self.layer_key(step, layer)
        if key not in self.memo:
            self.memo[key] = self.layer_s(step, layer)
        return self.memo[key]

    def layer_terms(self, step: TrainingStep, layer: int) -> tuple[float, float, float, float]:
        """A layer's (compute, sync, async) seconds (:meth:`layer_memo`) and the
        all-reduce of its gradients over the dense axes (s): what :meth:`screen` adds
        per layer, the same for every layer of one shape."""
        c, s, a = self.layer_memo(step, layer)
        grads = step.params(layer).total * step.gradient_bytes / step.shard
        return c, s, a, self.network.collective_s("all-reduce", grads, step.dense_axes, step.mesh)

    def pass_memo(
        self, step: TrainingStep, steps: list[LayerStep], phase: str
    ) -> tuple[float, float]:
        """:meth:`pass_s`, memoised by what it reads: the templates, the phase, the
        dtype and the mesh (the network's pieces follow from it)."""
        key = (tuple(steps), phase, step.dtype, tuple(step.mesh.items()))
        if key not in self.passes:
            self.passes[key] = self.pass_s(step, steps, phase)
        return self.passes[key]

    def op_s(self, op: Op, mesh: dict[str, int]) -> float:
        """One op's time: compute ops by the cost model, collectives as rings."""
        if op.kind == "collective":
            return self.network.collective_s(op.collective, op.size_bytes, op.axes, mesh)
        if op.kind == "matmul":
            return self.costs.matmul(op.m, op.n, op.k, op.dtype, op.memory, op.batch).time_s  # type: ignore[arg-type]
        if op.kind == "embedding":
            return self.costs.embedding_lookup(op.rows, op.row_bytes, op.memory).time_s
        return self.costs.elementwise(op.bytes, op.memory).time_s

    def pass_s(self, step: TrainingStep, steps: list[LayerStep], phase: str) -> tuple[float, float]:
        """(compute, synchronous communication) seconds of one pass of ``steps``."""
        out = OpList()
        ordered = steps if phase == "fwd" else list(reversed(steps))
        for i, template in enumerate(ordered):
            if template.phase in ("both", phase):
                emit_step(out, template, f"s{i}", phase, [], step.dtype)  # type: ignore[arg-type]
        compute = sum(self.op_s(op, step.mesh) for op in out.ops if op.kind != "collective")
        sync = sum(self.op_s(op, step.mesh) for op in out.ops if op.kind == "collective")
        return compute, sync

    def layer_s(self, step: TrainingStep, layer: int) -> tuple[float, float, float]:
        """(compute, sync, async) seconds of one microbatch through ``layer``, forward,
        recomputed forward (with ``recompute``) and backward."""
        steps = layer_steps(step.shape(layer))
        fwd, bwd = self.pass_s(step, steps, "fwd"), self.pass_s(step, steps, "bwd")
        again = 2 if getattr(step.args, "recompute", False) else 1
        compute = again * fwd[0] + bwd[0]
        sync = again * fwd[1] + bwd[1]
        weights = step.params(layer).total
        gather = self.network.collective_s(
            "all-gather", weights * step.bytes_per_element, step.fsdp_group, step.mesh
        )
        scatter = self.network.collective_s(
            "reduce-scatter", weights * step.gradient_bytes, step.fsdp_group, step.mesh
        )
        return compute, sync, 2 * gather + scatter

    def screen(self, step: TrainingStep) -> Screen:
        """The step's screened step (see the module docstring)."""
        n = step.schedule.iterations
        kinds: dict[int, tuple[float, float, float, float]] = {}
        compute = sync = async_ = 0.0
        for layer in step.chunk():
            shape = id(step.shape(layer))
            if shape not in kinds:
                kinds[shape] = self.layer_terms(step, layer)
            c, s, a, reduce_s = kinds[shape]
            compute, sync, async_ = compute + n * c, sync + n * s, async_ + n * a
            async_ += reduce_s
        for steps in (embed_steps(step), head_steps(step)):
            for phase in ("fwd", "bwd"):
                c, s = self.pass_memo(step, steps, phase)
                compute, sync = compute + c, sync + s
        if step.pipeline_group:
            permute = self.network.collective_s(
                "collective-permute", step.dense.act_bytes, step.pipeline_group, step.mesh
            )
            sync += 2 * n * permute
        optimizer = step.local_params * (2 * ADAM_STATE_BYTES + 2 * step.bytes_per_element)
        compute += self.costs.elementwise(optimizer).time_s
        return Screen(compute, sync, async_)
