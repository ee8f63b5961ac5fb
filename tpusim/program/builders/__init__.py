"""Builders of common programs: a transformer training step and an LLM decode step.

Both are pure functions of the model shape and the logical mesh, returning an SPMD
:class:`~tpusim.program.ir.Program` of what *one chip* runs. Every op names its
dependencies; names are ``L<layer>.<block>.<op>.<phase>`` (``L3.attn.qkv.fwd``).

Model (both builders): a pre-norm transformer layer of attention (QKV projection,
scores, attention x V, output projection) and an MLP of two matrices (up, down; no
biases), plus two norms. The training step also takes grouped-query or multi-head
latent attention, a gated (SwiGLU) MLP, MoE layers with shared experts, and an
embedding and LM head (``vocab``).

Modules, one concept each:

* :mod:`.counts`: parameter counts and FLOPs of a program;
* :mod:`.checks`: argument checks of the Python API (one function per builder);
  :mod:`.moe_checks`: those of the MoE cost fields;
* :mod:`.mesh`: which mesh axes a collective spans;
* :mod:`.oplist`: an op accumulator that checks names and chains dependencies;
* :mod:`.layer_shape`: a layer's per-chip sizes, the input of its templates;
* :mod:`.template`: one op template and how it becomes forward or backward ops;
* :mod:`.layers`: a layer's templates (the attention block, then the MLP block);
  :mod:`.mlp`: the MLP block, dense or MoE; :mod:`.attention`: fused attention
  kernels' work and HBM traffic;
* :mod:`.parallel`: sequence and context parallelism as rewrites of the templates;
* :mod:`.remat`: remat (activation checkpointing) policies;
* :mod:`.passes`: one layer pass as ops, with its collectives' overlap;
* :mod:`.host_offload`: host transfers and the optimiser step's collectives;
* :mod:`.roles`: the parallelism roles (what each mesh axis plays), a registry;
* :mod:`.fields`: a step's fields, declared once (the role axes from the registry);
  :mod:`.args`: the training step's keywords as one record of them;
* :mod:`.pipeline`: pipeline schedules (chunks, loop iterations, bubble, in-flight
  activations);
* :mod:`.memory`: the training step's HBM per stage and over the step;
* :mod:`.training`: the checked, prepared :class:`TrainingStep` (see its module
  docstring for the model); :mod:`.emit`: its ops and :func:`training_step`;
  :mod:`.gradients`: its gradient collectives;
* :mod:`.decode`: :func:`decode_step`;
* :mod:`.replica`: a model replica as one chip holds it (per-chip shape on ``tp * ep``
  chips, its collective groups); :mod:`.serving`: one continuous-batching serving
  iteration (decode sequences plus prefill chunks) on a replica.
"""

from tpusim.program.builders.counts import parameters_per_layer, step_flops
from tpusim.program.builders.decode import decode_step
from tpusim.program.builders.emit import training_step
from tpusim.program.builders.training import (
    ADAM_STATE_BYTES,
    BACKWARD_ELEMENTWISE_FACTOR,
    FSDP_PREFETCH_LAYERS,
    TrainingStep,
    prepare_training,
)

__all__ = [
    "ADAM_STATE_BYTES",
    "BACKWARD_ELEMENTWISE_FACTOR",
    "FSDP_PREFETCH_LAYERS",
    "TrainingStep",
    "decode_step",
    "parameters_per_layer",
    "prepare_training",
    "step_flops",
    "training_step",
]
