"""Remat (activation checkpointing) policies, with MaxText's names and semantics.

MaxText wraps each decoder layer in ``jax.checkpoint`` with a policy
(``get_remat_policy`` in ``MaxText/layers/decoders.py``): ``save_only_these_names``
or ``save_and_offload_only_these_names`` over the ``checkpoint_name``'d tensors of
the layer. A tensor a policy names is kept for the backward, on device (HBM) or
offloaded to pinned host memory; everything else the backward needs is recomputed
from the layer's input. The names (per layer, per microbatch, tensor-local):

* ``decoder_layer_input`` (``tokens x d_model``): the layer's input, where a
  recomputation restarts; on device under every policy but ``custom``, which may
  offload it (``configs/base.yml``: it cannot be rematerialised);
* ``query_proj``, ``key_proj``, ``value_proj`` (``tokens x heads x head_dim``, K and V
  with ``kv_heads``; MLA: Q and K of ``head_dim + rope_head_dim``), ``qkv_proj`` (the
  fused projection: in ``custom`` it sets the three unless they are given);
* ``context`` (``tokens x heads x head_dim``, attention's output before ``out_proj``);
* ``out_proj`` (``tokens x d_model``);
* ``mlpwi_0``, ``mlpwi_1`` (gated MLP: gate and up, ``rows x d_ff`` each, plus the
  shared experts' ``tokens x shared_d_ff``), ``mlpwi`` (plain MLP: up);
* ``mlpwo`` (``rows x d_model``): a residual of the backward only in a MoE layer
  (the router weights multiply the expert outputs); in a dense pre-norm layer its
  output only feeds the residual add, whose gradient needs no primal value, so
  saving it keeps 0 bytes and JAX (which stores only values the backward reads)
  stores nothing.

Recomputed in the backward (a forward op reruns when the backward needs its output
or its input and neither is kept): the two norms, the attention residual add, the
MLP activation, the MoE router and dispatch, sequence-parallel input all-gathers,
the context-parallel K/V all-gather and the attention core always (the core's
backward needs the probabilities; a kept ``context`` saves the ``attn.context``
matmul only; a fused ``attn.flash`` kernel, whose backward recomputes the scores
itself, reruns unless ``context`` is kept); the Q/K/V projections unless all
of their outputs are kept; ``out_proj`` (with its tensor-parallel collective) unless
kept; ``mlpwi_0``/``mlpwi_1``/``mlpwi`` unless kept; a MoE ``mlpwo`` and its combine
unless kept. Never: the dense MLP's down projection and the layer's last residual add
(their outputs feed only the next layer, whose input is kept). ``none`` keeps every
activation (:func:`~tpusim.program.builders.memory.saved_bytes`) and reruns nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from tpusim.program.builders.layer_shape import LayerShape
from tpusim.program.builders.template import LayerStep
from tpusim.program.ir import ProgramError

Placement = Literal["remat", "device", "offload"]
PLACEMENTS: tuple[Placement, ...] = ("remat", "device", "offload")

TENSOR_NAMES = (
    "decoder_layer_input",
    "query_proj",
    "key_proj",
    "value_proj",
    "qkv_proj",
    "context",
    "out_proj",
    "mlpwi",
    "mlpwi_0",
    "mlpwi_1",
    "mlpwo",
)
"""MaxText's ``checkpoint_name``'d tensors of a decoder layer a policy can keep."""

_QKV = ("query_proj", "key_proj", "value_proj", "qkv_proj")
_MINIMAL = (*_QKV, "out_proj", "mlpwi_0", "mlpwi_1", "mlpwi", "mlpwo")

POLICIES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "full": ((), ()),
    "minimal": (_MINIMAL, ()),
    "minimal_with_context": ((*_MINIMAL, "context"), ()),
    "save_dot_with_context_except_mlp": ((*_QKV, "context", "out_proj"), ()),
    "save_dot_except_mlpwi": ((*_QKV, "out_proj", "mlpwo"), ()),
    "save_dot_except_mlp": ((*_QKV, "out_proj"), ()),
    "save_qkv_proj": (_QKV, ()),
    "save_out_proj": (("out_proj",), ()),
    "qkv_proj_offloaded": ((), _QKV),
    "minimal_offloaded": ((), _MINIMAL),
}
"""Policy -> (tensors kept on device, tensors offloaded to host), as MaxText's
``get_remat_policy`` lists them (``decoder_layer_input`` is on device besides)."""

REMAT_POLICY_NAMES = ("none", *POLICIES, "custom")
"""Every accepted ``remat_policy``: ``none`` (no remat) and MaxText's names."""


@dataclass(frozen=True)
class RematPlacement:
    """Where a policy puts each of :data:`TENSOR_NAMES` (``qkv_proj`` folded into
    the three projections); ``policy`` is ``none`` when nothing is recomputed."""

    policy: str
    placement: Mapping[str, Placement]

    @property
    def recomputes(self) -> bool:
        return self.policy != "none"

    def kept(self, *names: str) -> bool:
        """Whether every tensor of ``names`` is kept (on device or offloaded)."""
        return all(self.placement[n] != "remat" for n in names)

    def bytes_at(self, s: LayerShape, where: Placement, skip: tuple[str, ...] = ()) -> float:
        """Bytes of one layer's tensors placed ``where`` (one microbatch), but those
        in ``skip``."""
        names = [n for n in TENSOR_NAMES if n not in skip and self.placement[n] == where]
        return sum(tensor_elements(s, n) for n in names) * s.bytes_per_element


def remat_placement(
    policy: str | None, recompute: bool, tensors: Mapping[str, str] | None = None
) -> RematPlacement:
    """The placement of ``remat_policy`` (``None``: ``full`` with ``recompute``, else
    ``none``) and, for ``custom``, ``remat_tensors`` (name -> remat|device|offload;
    MaxText's defaults: ``decoder_layer_input`` on device, the rest ``remat``).
    Raises :class:`ProgramError` for an unknown policy, tensor or placement, for
    ``remat_tensors`` without ``custom`` and for ``recompute: true`` with a policy
    other than ``full``."""
    if policy is None:
        policy = "full" if recompute else "none"
    elif recompute and policy != "full":
        raise ProgramError(f"recompute: true means remat_policy full; got remat_policy '{policy}'")
    if policy not in REMAT_POLICY_NAMES:
        names = ", ".join(REMAT_POLICY_NAMES)
        raise ProgramError(f"remat_policy '{policy}' is unknown (choose from {names})")
    if tensors and policy != "custom":
        raise ProgramError(f"remat_tensors needs remat_policy: custom (got '{policy}')")
    if policy == "none":
        return RematPlacement("none", dict.fromkeys(TENSOR_NAMES, "device"))
    if policy == "custom":
        return RematPlacement(policy, _custom(tensors or {}))
    device, offload = POLICIES[policy]
    placement: dict[str, Placement] = dict.fromkeys(TENSOR_NAMES, "remat")
    placement.update(dict.fromkeys(device, "device"))
    placement.update(dict.fromkeys(offload, "offload"))
    placement["decoder_layer_input"] = "device"
    return RematPlacement(policy, placement)


def _custom(tensors: Mapping[str, str]) -> dict[str, Placement]:
    """``custom``'s placement: MaxText's defaults, ``qkv_proj`` for the projections
    not given, then ``tensors``; ProgramError naming a bad tensor or placement."""
    for name, where in tensors.items():
        if name not in TENSOR_NAMES:
            names = ", ".join(TENSOR_NAMES)
            raise ProgramError(f"remat_tensors: unknown tensor '{name}' (choose from {names})")
        if where not in PLACEMENTS:
            raise ProgramError(
                f"remat_tensors.{name}: '{where}' is not one of {', '.join(PLACEMENTS)}"
            )
    placement: dict[str, Placement] = dict.fromkeys(TENSOR_NAMES, "remat")
    placement["decoder_layer_input"] = "device"
    fused = tensors.get("qkv_proj")
    if fused is not None:
        placement.update(dict.fromkeys(_QKV, fused))  # type: ignore[arg-type]
    placement.update(tensors)  # type: ignore[arg-type]
    return placement


def tensor_elements(s: LayerShape, name: str) -> int:
    """Elements of tensor ``name`` of one layer of local shape ``s`` (see the module
    docstring); 0 for a tensor the layer does not have (``mlpwi`` of a gated MLP)."""
    qk = s.head_dim + (s.rope_head_dim if s.attention == "mla" else 0)
    kv = s.heads if s.attention == "mla" else s.kv
    hidden = s.rows * s.d_ff + s.tokens * s.shared_d_ff
    gated = s.mlp == "gated"
    sizes = {
        "decoder_layer_input": s.tokens * s.d_model // s.sequence_shards,
        "query_proj": s.tokens * s.heads * qk,
        "key_proj": s.tokens * kv * (qk if s.attention == "mla" else s.head_dim),
        "value_proj": s.tokens * kv * s.head_dim,
        "qkv_proj": 0,
        "context": s.tokens * s.heads * s.head_dim,
        "out_proj": s.tokens * s.d_model // s.sequence_shards,
        "mlpwi": 0 if gated else hidden,
        "mlpwi_0": hidden if gated else 0,
        "mlpwi_1": hidden if gated else 0,
        "mlpwo": s.rows * s.d_model if s.experts else 0,
    }
    return sizes[name]


_ALWAYS = ("attn.norm", "attn.residual", "mlp.norm", "moe.router", "moe.dispatch", "attn.cp_kv")
_NEVER = ("mlp.residual", "moe.combine_sum", "mlp.tp_allreduce", "mlp.sp_out")


def reruns(remat: RematPlacement, step: LayerStep, gated: bool) -> bool:
    """Whether the forward template ``step`` (of a ``gated`` MLP layer or not) runs
    again before the layer's backward under ``remat`` (the rules of the module
    docstring; an unknown step reruns)."""
    name = step.name
    dense_down = name.endswith(".down") and name != "moe.down"
    if not remat.recomputes or name in _NEVER or dense_down:
        return False
    if name in _ALWAYS or name.endswith((".act", ".sp_in")):
        return True
    kept = remat.kept
    if name == "attn.qkv":
        return not kept("query_proj", "key_proj", "value_proj")
    if name in ("attn.q", "attn.q_down", "attn.q_norm", "attn.q_up"):
        return not kept("query_proj")
    if name in ("attn.kv_down", "attn.kv_norm", "attn.kv_up"):
        return not kept("key_proj", "value_proj")
    if name in ("attn.out", "attn.tp_allreduce", "attn.sp_out"):
        return not kept("out_proj")
    if name.endswith(".gate"):
        return not kept("mlpwi_0")
    if name.endswith(".up"):
        return not kept("mlpwi_1" if gated else "mlpwi")
    if name in ("moe.down", "moe.combine"):
        return not kept("mlpwo")
    if name == "attn.context":
        return not kept("context")
    if name == "attn.flash":
        # The fused kernel's backward recomputes the scores itself from Q, K and the
        # logsumexp; its forward reruns only to rebuild the output it needs.
        return not kept("context")
    return True


def recomputed_steps(
    remat: RematPlacement, s: LayerShape, steps: list[LayerStep]
) -> list[LayerStep]:
    """The forward templates of ``steps`` (a layer of shape ``s``) that rerun before
    the layer's backward."""
    gated = s.mlp == "gated"
    return [step for step in steps if step.phase != "bwd" and reruns(remat, step, gated)]


def recomputed_flops(remat: RematPlacement, s: LayerShape, steps: list[LayerStep]) -> float:
    """Useful FLOPs of one layer's recomputed forward (``2 batch m k n`` per matmul, a
    fused kernel's useful FLOPs)."""
    return sum(st.forward_flops for st in recomputed_steps(remat, s, steps))
