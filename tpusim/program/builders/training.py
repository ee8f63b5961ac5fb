"""The transformer training step (forward, backward, optimiser) on one chip.

Per chip:

* ``tokens = microbatch sequences * seq`` per microbatch, where the global batch
  (``batch`` or ``global_batch``, in sequences of ``seq`` tokens) is split over the
  batch axes (``data``, ``fsdp`` and, when it is a separate axis, ``expert``: the
  expert axis also shards the batch, as in MaxText) and then into ``microbatches``.
  Tensor parallelism (Megatron) divides ``heads``, ``kv_heads`` (K/V heads are
  replicated when there are fewer than tensor ranks), ``d_ff`` and the vocabulary by
  the tensor axis size; activations are replicated across it unless
  ``sequence_parallel`` (then norms and residuals run on sequence-sharded activations
  and each all-reduce becomes a reduce-scatter and an all-gather: :mod:`.parallel`).
* Context parallelism (a ``context`` axis of ``c`` chips, ``context_axis``): each
  chip takes ``seq / c`` positions of every sequence (the batch is not split over
  it) and all-gathers the whole sequence's K and V before attention (their gradients
  reduce-scattered in the backward, :mod:`.parallel`); weights are sharded over it as
  over fsdp (MaxText shards the embed dimension over both).
* Mesh axes play roles: an axis named ``data``, ``fsdp``, ``tensor``, ``expert``,
  ``pipeline`` or ``context`` plays that role; the ``*_axis`` fields name others and
  override.
* Pipeline (``pipeline`` axis of ``p`` chips, see :mod:`.pipeline`): the SPMD loop
  of ``m v + p - 1`` iterations, each one microbatch through the stage's chunk of
  layers then a collective-permute over the pipeline axis of the chunk's output
  activations (``tokens * d_model`` elements); the backward loop mirrors it with the
  activation gradients. Every stage runs the largest chunk (the slowest stage sets
  the pace of a lock-step loop; with dense and MoE layers mixed, as many of its
  layers MoE as any chunk has).
  Without a pipeline axis the loop is plain gradient accumulation over ``m``
  microbatches.
* Elementwise ops (assumption, in units of ``a = tokens * d_model * dtype bytes``):
  each norm 2a (read, write), each residual add 3a (two reads, one write), the MLP
  activation 2 x ``rows * d_ff_local`` x bytes (3 x for SwiGLU: reads gate and up),
  with ``attention_kernel: naive`` the softmax 2 x the score bytes (``seqs *
  heads_local * seq**2``), consistent with the score matmuls writing their output to
  HBM; with ``flash`` (the default) attention is one fused causal kernel per pass
  (:mod:`.attention`). A backward elementwise op moves 1.5x its forward bytes.
* Backward: every forward matmul ``(batch, m, k, n)`` becomes a gradient of its first
  operand ``(batch, m, n, k)`` (``.bwd_input``) and of its second ``(batch, k, m, n)``
  (``.bwd_weight``), so the step does 3x the forward FLOPs. Under a remat policy
  (``remat_policy``, MaxText's names, or ``recompute: true`` = ``full``; :mod:`.remat`)
  the forward ops whose outputs the backward needs and the policy does not keep run
  again just before the layer's backward (MFU counts 3x the forward only), and the
  tensors it offloads cross the host link (``host_bandwidth_Bps``) after the forward
  and before the backward (:mod:`.host_offload`).
* Collectives follow nccl-tests sizes (all-reduce, all-to-all: bytes per chip;
  all-gather: gathered output; reduce-scatter: full input). A collective whose group
  has one chip is left out.
* Tensor parallelism: a synchronous all-reduce over the tensor axis of ``tokens *
  d_model`` activations after attention and after the MLP in the forward, and of
  their gradients at the inputs of both blocks in the backward.
* Gradients are reduced in ``gradient_dtype`` (default bf16). Data parallelism: after
  a layer's last backward its weight gradients are all-reduced asynchronously
  (``overlap=True``) over the batch axes that replicate them, while the backward of
  earlier layers goes on; ``optimizer`` runs after every gradient collective.
* FSDP: a layer's (tensor-local) weights are all-gathered over the fsdp axis before
  its forward and again before its backward in every iteration (async, prefetching
  one layer ahead); its gradients are reduce-scattered over the fsdp axis in every
  backward iteration (into a sharded accumulator), and the shard all-reduced over the
  data axis after the last (reduce-scattered with ``shard_optimizer_over_data``,
  ZeRO-1: the optimiser state is split over the data axes and the updated weights
  are all-gathered after the optimiser). ``optimizer_memory_host_offload`` and
  ``param_memory_host_offload`` keep the optimiser state or the weights in host
  memory (:mod:`.host_offload`, :mod:`.memory`).
* MoE (``experts > 0``; the first ``dense_layers`` layers stay dense): a router matmul
  (``tokens x d_model x experts``), ``shared_experts`` always-on experts as a dense
  MLP of width ``shared_experts * expert_d_ff``, and ``experts / expert-axis size``
  local routed experts of width ``expert_d_ff``. Tokens go to ``top_k`` experts with
  capacity factor 1 and perfect balance: an all-to-all over the expert axis of
  ``tokens * top_k * d_model`` bytes before and after the experts, forward and
  backward. The local experts run as one grouped matmul with ``m = tokens * top_k``.
  The combine's weighted sum is an elementwise op of ``(top_k + 1) * a``. Expert
  weights are sharded over the expert axis so their gradients are not all-reduced
  over it; dense weights are.
* Vocabulary (``vocab > 0``): an embedding lookup before the loop and the LM head
  (``tokens x d_model x vocab_local``) plus its loss after it, on the step's tokens
  split over the pipeline axis too (the embedding and head are not pipelined; their
  weights are replicated over the pipeline axis, as MaxText does, and their gradients
  all-reduced over it). A vocabulary-parallel embedding all-reduces its output over
  the tensor axis; the head all-reduces its input gradient.
* Memory: see :mod:`.memory`; ``memory_bytes["hbm"]`` is the peak stage's total.
* The optimiser is one elementwise op over the chip's parameters (its ``1 / data``
  share under ZeRO-1): 24 + 2 x dtype bytes per parameter (reads the gradient, reads
  and writes the fp32 master, m and v, writes the new weights).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from tpusim.program.builders.args import FSDP_PREFETCH_LAYERS, TrainingArgs
from tpusim.program.builders.checks import CheckedTraining, check_training
from tpusim.program.builders.counts import LocalParameters, local_parameters
from tpusim.program.builders.layer_shape import LayerShape
from tpusim.program.builders.layers import layer_steps
from tpusim.program.builders.mesh import collective_axes, sharding_axes
from tpusim.program.builders.parallel import layout_steps
from tpusim.program.builders.pipeline import PipelineSchedule
from tpusim.program.builders.remat import RematPlacement, recomputed_steps
from tpusim.program.builders.roles import CONTEXT, EXPERT, PIPELINE, TENSOR, Shard, issuer
from tpusim.program.builders.template import BACKWARD_ELEMENTWISE_FACTOR, LayerStep

__all__ = [
    "ADAM_STATE_BYTES",
    "BACKWARD_ELEMENTWISE_FACTOR",
    "FSDP_PREFETCH_LAYERS",
    "TrainingStep",
    "prepare_training",
]

ADAM_STATE_BYTES = 12.0
"""Optimiser bytes per parameter besides the weights: fp32 master copy + two fp32
moments (published: Adam's two moments; the fp32 master is the mixed-precision
recipe of Micikevicius et al. 2018)."""


def prepare_training(**fields: object) -> TrainingStep:
    """The checked, prepared training step (see :func:`training_step`)."""
    args = TrainingArgs.of(fields)
    return TrainingStep.of(args, check_training(args))


@dataclass(frozen=True)
class TrainingStep:
    """What one chip does in a training step.

    ``dense`` and ``moe`` are the local shapes of a dense and a MoE layer for one
    microbatch; gradients are all-reduced over ``dense_axes`` (dense weights: every
    batch axis but fsdp, which shards them), ``expert_axes`` (expert weights: not over
    the expert axis either) and, for the embedding and head, the dense axes then the
    pipeline axis; ``shard`` is the fsdp size (1 without FSDP); ``head_tokens``
    the tokens the embedding and head see per chip.
    """

    args: TrainingArgs
    mesh: dict[str, int]
    gradient_bytes: float
    dense: LayerShape
    moe: LayerShape | None
    local_experts: int
    schedule: PipelineSchedule
    fsdp_group: tuple[str, ...]
    dense_axes: tuple[str, ...]
    expert_axes: tuple[str, ...]
    pipeline_group: tuple[str, ...]
    shard: int
    vocab_local: int
    head_tokens: int
    remat: RematPlacement
    context_group: tuple[str, ...] = ()
    zero_group: tuple[str, ...] = ()
    zero_shard: int = 1
    role_axes: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def of(cls, args: TrainingArgs, checked: CheckedTraining) -> TrainingStep:
        """The step of checked arguments."""
        mesh, axes = checked.mesh, checked.axes
        batch = sharding_axes(axes, "batch")
        shards = math.prod(mesh[axis] for axis in batch)
        p, m = checked.size(PIPELINE), args.microbatches
        virtual = args.virtual_stages if args.pipeline == "interleaved" else 1
        seqs = args.sequences // shards // m
        dense = _dense_shape(args, checked, seqs)
        moe = (
            _moe_shape(args, dense, checked.size(TENSOR), checked.size(EXPERT))
            if args.experts
            else None
        )
        sharded = sharding_axes(axes, "weights")
        dense_axes = collective_axes(mesh, [a for a in batch if a not in sharded])
        context = collective_axes(mesh, sharding_axes(axes, "sequence"))
        fsdp_group = collective_axes(mesh, sharded)
        experts = sharding_axes(axes, "experts")
        zero = dense_axes if args.shard_optimizer_over_data else ()
        return cls(
            args=args,
            mesh=mesh,
            gradient_bytes=checked.gradient_bytes,
            dense=dense,
            moe=moe,
            local_experts=args.experts // checked.size(EXPERT),
            schedule=PipelineSchedule.of(args.layers, p, virtual, m, args.pipeline),
            fsdp_group=fsdp_group,
            dense_axes=dense_axes,
            expert_axes=collective_axes(mesh, [a for a in batch if a not in sharded + experts]),
            pipeline_group=collective_axes(mesh, sharding_axes(axes, "layers")),
            shard=math.prod(mesh[a] for a in fsdp_group),
            vocab_local=-(-args.vocab // checked.size(TENSOR)),
            head_tokens=-(-m * seqs * dense.seq // p),
            remat=checked.remat,
            context_group=context,
            zero_group=zero,
            zero_shard=math.prod(mesh[a] for a in zero),
            role_axes=axes,
        )

    @property
    def dtype(self) -> str:
        return self.args.dtype

    @property
    def optimizer_state_bytes(self) -> float:
        """Optimiser bytes per parameter besides the weights: :data:`ADAM_STATE_BYTES`
        with ``weight_dtype: fp32`` (the default: an fp32 master and fp32 moments);
        with ``weight_dtype: bf16`` (MaxText's ``weight_dtype: bfloat16``) the weights
        are kept in bf16, with no fp32 master, and Adam's two moments take the weights'
        dtype (optax's default ``mu_dtype``): 2 x 2 bytes."""
        if self.args.weight_dtype == "fp32":
            return ADAM_STATE_BYTES
        return 2.0 * 2.0

    @property
    def layers(self) -> int:
        return self.args.layers

    @property
    def bytes_per_element(self) -> float:
        return self.dense.bytes_per_element

    def shape(self, layer: int) -> LayerShape:
        """The local shape of layer ``layer`` (dense for the first ``dense_layers``)."""
        if self.moe is None or layer < self.args.dense_layers:
            return self.dense
        return self.moe

    def steps(self, layer: int) -> list[LayerStep]:
        """Layer ``layer``'s forward templates, with sequence and context parallelism
        (:mod:`.parallel`)."""
        shape = self.shape(layer)
        return self.issued(layout_steps(layer_steps(shape), shape, self.context_group))

    def issuer(self, shards: tuple[Shard, ...], group: tuple[str, ...]) -> str:
        """The role that issues a collective over ``group`` whose axes shard one of
        ``shards`` (:func:`~.roles.issuer`, on this step's role axes)."""
        return issuer(shards, group, self.role_axes)

    def issued(self, steps: list[LayerStep]) -> list[LayerStep]:
        """``steps`` with each collective template's issuing role set."""
        return [
            replace(t, role=self.issuer((t.shard,), t.axes)) if t.shard is not None else t
            for t in steps
        ]

    def recompute_steps(self, layer: int) -> list[LayerStep]:
        """The forward templates of layer ``layer`` rerun before its backward under
        the remat policy (:mod:`.remat`; none without recomputation)."""
        return recomputed_steps(self.remat, self.shape(layer), self.steps(layer))

    def offloaded_bytes(self, layer: int) -> float:
        """Bytes of layer ``layer``'s activations (one microbatch) the remat policy
        offloads to host memory after its forward and fetches before its backward."""
        return self.remat.bytes_at(self.shape(layer), "offload")

    @property
    def experts_on_fsdp(self) -> bool:
        """Whether the expert axis is the fsdp axis (MaxText's ``fsdp_shard_on_exp``):
        each chip keeps its own experts whole, so they are neither gathered nor
        reduce-scattered over it."""
        return (
            self.moe is not None
            and bool(self.moe.expert)
            and self.moe.expert[0] in (self.fsdp_group)
        )

    def params(self, layer: int) -> LocalParameters:
        """Parameters of layer ``layer`` the chip computes with (whole over fsdp). With
        :attr:`experts_on_fsdp` its own experts count ``shard`` times, so that over the
        fsdp shard they are what the chip holds, as every other weight."""
        shape = self.shape(layer)
        params = local_parameters(shape, self.local_experts if shape.experts else 0)
        if self.experts_on_fsdp and shape.experts:
            return replace(params, expert=params.expert * self.shard)
        return params

    def gathered_params(self, layer: int) -> float:
        """Parameters of layer ``layer`` the FSDP all-gather brings (whole over fsdp):
        all of them, or the dense ones with :attr:`experts_on_fsdp`."""
        params = self.params(layer)
        return params.total - params.expert if self.experts_on_fsdp else params.total

    def chunk(self) -> list[int]:
        """Layer indices of the chunk every stage runs: as many layers as the largest
        chunk, as many of them MoE as any chunk has (dense ones first). A lock-step
        loop runs at its slowest stage's pace, and this chunk is at least as long as
        every stage's (exactly one stage's when the layers are of one kind)."""
        s = self.schedule
        chunks = [s.chunk_range(c) for c in range(len(s.chunk_layers))]
        length = max(len(c) for c in chunks)
        moe = max(sum(self.shape(layer).experts > 0 for layer in c) for c in chunks)
        dense = list(range(length - moe))
        return dense + list(range(self.layers - moe, self.layers))

    @property
    def head_params(self) -> int:
        """Embedding and LM head parameters the chip holds (tensor-local, whole over fsdp)."""
        return 2 * self.vocab_local * self.args.d_model

    def layer_runs(self, layers: range) -> list[tuple[int, int]]:
        """The consecutive ``layers`` as runs of one shape (:meth:`shape`: dense layers,
        then MoE ones): (first layer of the run, layers in it), empty runs left out."""
        end = self.layers if self.moe is None else self.args.dense_layers
        dense = max(0, min(layers.stop, end) - layers.start)
        runs = [(layers.start, dense), (layers.start + dense, len(layers) - dense)]
        return [(first, n) for first, n in runs if n > 0]

    def stage_params(self, stage: int) -> int:
        """Parameters stage ``stage`` holds (whole over fsdp): its layers, embedding, head
        (per run of one shape: a layer's count depends only on its shape)."""
        s = self.schedule
        runs = [r for c in s.stage_chunks(stage) for r in self.layer_runs(s.chunk_range(c))]
        return sum(n * self.params(first).total for first, n in runs) + self.head_params

    @property
    def local_params(self) -> float:
        """Parameters the chip holds and updates (fsdp-sharded), on the largest stage."""
        stages = range(self.schedule.stages)
        return max(self.stage_params(s) for s in stages) / self.shard


def _dense_shape(args: TrainingArgs, checked: CheckedTraining, seqs: int) -> LayerShape:
    """The local shape of a dense layer for one microbatch of ``seqs`` sequences (of
    ``seq / context`` positions each, attending over ``seq`` keys)."""
    mesh, axes, tp = checked.mesh, checked.axes, checked.size(TENSOR)
    kv = args.kv_heads if args.kv_heads is not None else args.heads
    context = checked.size(CONTEXT)
    return LayerShape(
        seqs=seqs,
        seq=args.seq // context,
        kv_seq=args.seq if context > 1 else 0,
        sequence_shards=tp if args.sequence_parallel else 1,
        d_model=args.d_model,
        heads=args.heads // tp,
        head_dim=args.head_dim,
        d_ff=args.d_ff // tp,
        experts=0,
        top_k=args.top_k,
        bytes_per_element=checked.bytes_per_element,
        tensor=collective_axes(mesh, sharding_axes(axes, "matrices")),
        expert=collective_axes(mesh, sharding_axes(axes, "experts")),
        kv_heads=max(1, kv // tp),
        mlp=args.mlp,
        attention=args.attention,
        q_lora_rank=args.q_lora_rank,
        kv_lora_rank=args.kv_lora_rank,
        rope_head_dim=args.rope_head_dim,
        attention_kernel=args.attention_kernel,  # type: ignore[arg-type]
    )


def _moe_shape(args: TrainingArgs, dense: LayerShape, tp: int, ep: int) -> LayerShape:
    """The local shape of a MoE layer: routed experts of width ``expert_d_ff``, ``ep``
    the expert axis size; the MoE cost fields as given (see :func:`.mlp.moe_steps`)."""
    width = (args.expert_d_ff or args.d_ff) // tp
    return replace(
        dense,
        experts=args.experts,
        d_ff=width,
        shared_d_ff=args.shared_experts * width,
        local_experts=args.experts // ep,
        capacity_factor=args.capacity_factor,
        routing_skew=args.routing_skew,
        sparse_matmul=args.sparse_matmul,
    )
