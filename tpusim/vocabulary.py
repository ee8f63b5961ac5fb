"""The words tpusim's inputs use, defined once.

Closed vocabularies (fixed by physics or by the contract) live here as ``Literal``
types with a tuple of their values for CLI choices and messages; schemas, the CLI and
the engine import them from here and nowhere else. Open families that grow by one file
and one registration (topology kinds, collective algorithms, network fidelities, workload
kinds, output writers) are registries in their own packages
(:mod:`tpusim.topology.registry`, :mod:`tpusim.collectives.registry`,
:mod:`tpusim.network.backends`, :mod:`tpusim.workloads`, :mod:`tpusim.study.outputs`).
"""

from __future__ import annotations

from typing import Literal, get_args

#: Collective operations (sizes follow nccl-tests; see :mod:`tpusim.collectives.base`).
Op = Literal[
    "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute", "broadcast"
]
OPS: tuple[Op, ...] = get_args(Op)

#: Number formats a chip lists peak FLOP/s for.
Dtype = Literal["fp32", "bf16", "fp8", "int8", "int4", "fp4"]
DTYPES: tuple[Dtype, ...] = get_args(Dtype)

#: Who runs a collective's reductions and pays its per-step overhead.
Engine = Literal["tensorcore", "sparsecore", "cae"]
ENGINES: tuple[Engine, ...] = get_args(Engine)
#: ``Engine`` or ``none`` (no cost beyond the network): what a cost model was built for.
CostEngine = Literal["tensorcore", "sparsecore", "cae", "none"]
#: ``Engine``, ``none`` or ``auto``: the chip's default (its ``collectives.offload``).
EngineChoice = Literal["auto", "tensorcore", "sparsecore", "cae", "none"]
ENGINE_CHOICES: tuple[EngineChoice, ...] = get_args(EngineChoice)

#: Memory tiers an op's operands live in.
MemoryTier = Literal["hbm", "sram"]
MEMORY_TIERS: tuple[MemoryTier, ...] = get_args(MemoryTier)

#: Kinds of program ops (:mod:`tpusim.program.ir`); the engine has one handler each.
OpKind = Literal["matmul", "elementwise", "embedding", "collective", "host_transfer", "kernel"]
OP_KINDS: tuple[OpKind, ...] = get_args(OpKind)
