"""The program IR: ops with explicit dependencies, run SPMD on every chip of a system.

An :class:`Op` is one of

- ``matmul``: ``batch`` x (``m`` x ``k``) @ (``k`` x ``n``) in ``dtype``, operands in
  ``memory`` (HBM or on-chip SRAM), costed by the hardware roofline;
  ``efficiency`` (default 1) divides a matmul's compute term: the fraction of the
  cost model's rate its kernel reaches (a grouped matmul of the MoE experts);
  ``grouped`` marks a grouped (megablox) matmul whose ``m`` rows pad per group,
  ``grouped_k`` one whose contraction ``k`` rows do (its weight gradient);
  ``dropless_rows`` its rows before a MoE capacity dropped some (0: none dropped);
  ``weights_stored`` one whose (``k`` x ``n``) weights are stored in ``dtype`` (a
  quantized checkpoint served: read at that size, never quantized per step, bf16
  activations; :mod:`tpusim.hardware.quantized`), where the default quantizes 8-bit
  operands on the fly (MaxText's training); ``own_weights`` one whose ``batch``
  products each have their own (``k`` x ``n``) weights (a MoE layer's active experts:
  every expert's matrix is read), where the default shares one matrix;
- ``elementwise``: ``bytes`` streamed through the vector unit from ``memory``;
- ``embedding``: ``rows`` lookups of ``row_bytes`` each (SparseCores where present);
- ``collective``: ``collective`` (all-reduce, ...) of ``size_bytes`` (nccl-tests
  convention) over mesh ``axes`` (empty: all chips) or explicit ``groups`` of chip
  indices (as an HLO module's replica groups give them) or the first ``num_chips``
  chips; ``pairs`` (src, dst) of a collective-permute; ``split_ports`` spreads each
  transfer over every port its minimal routes allow (``tpusim collective`` does for a
  permute; programs do not); ``overlap=True`` makes it
  asynchronous (XLA's ``-start``/``-done``): it runs on the ICI/DMA engines while
  the TensorCore goes on with ops that do not depend on it; its DMAs share the
  chip's HBM bandwidth with the memory-bound ops that run beside it; ``engine``
  names the on-chip engine that runs it (a collective XLA put on the SparseCores:
  ``sparsecore``) where the run has not fixed one, None the run's; ``role`` names
  the parallelism role that issued it (a training step builder's collectives:
  ``data``, ``fsdp``, ...; :mod:`tpusim.program.builders.roles`), its purpose in the
  exposed/hidden breakdown (empty: none, as an HLO module's or a YAML program's);
- ``host_transfer``: ``bytes`` over PCIe (``bandwidth_Bps``); synchronous it holds
  the TensorCore, with ``overlap=True`` it runs on the host DMA engines beside compute
  (XLA's async host offload copies).
- ``kernel``: a fused kernel (flash attention, a Pallas custom call) with known work:
  ``mxu_flops`` useful and ``padded_flops`` done on the MXUs in ``dtype``,
  ``vector_ops`` on the vector unit, ``bytes`` to ``memory``; ``pad_dims`` the head
  dimensions of its matmuls, which pad to the MXU tile.

Any compute op (matmul, elementwise, kernel) may carry ``xla_cycles``, the TensorCore
cycles XLA's TPU backend estimated for the compiled op it comes from (times its
runs), and ``fixed_s``, a time that replaces the cost model's (a compiled module
replayed with XLA's own op costs: the cycles over the chip clock).

``after`` names the ops that must finish first. A :class:`Program` is SPMD: every
chip runs the same ops; ``chip_overrides`` make it MPMD (a straggler is slower, chip
0 also logs). ``memory_bytes`` is what each chip keeps resident (weights, optimiser
state, activations, KV cache), checked against capacity before the run.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from tpusim.errors import InputError
from tpusim.vocabulary import OP_KINDS, Engine, MemoryTier, OpKind

DEFAULT_HOST_BANDWIDTH_BPS = 16e9  # PCIe per chip, one way: v4's published 16 GB/s


class ProgramError(InputError):
    """A program that cannot run: unknown op reference, cycle, duplicate name, bad field."""


@dataclass(frozen=True)
class Op:
    """One op of a program; only the fields of its ``kind`` matter (see module doc)."""

    name: str
    kind: OpKind
    after: tuple[str, ...] = ()
    m: int = 0
    n: int = 0
    k: int = 0
    batch: int = 1
    dtype: str = "bf16"
    memory: MemoryTier = "hbm"
    bytes: float = 0.0
    rows: int = 0
    row_bytes: float = 0.0
    collective: str = ""
    size_bytes: float = 0.0
    axes: tuple[str, ...] = ()
    algorithm: str | None = None
    groups: tuple[tuple[int, ...], ...] = ()
    num_chips: int | None = None
    pairs: tuple[tuple[int, int], ...] = ()
    split_ports: bool = False
    overlap: bool = False
    engine: Engine | None = None
    role: str = ""
    efficiency: float = 1.0
    grouped: bool = False
    grouped_k: bool = False
    dropless_rows: int = 0
    weights_stored: bool = False
    own_weights: bool = False
    gather: bool = False
    vector: bool = False
    bandwidth_Bps: float = DEFAULT_HOST_BANDWIDTH_BPS
    mxu_flops: float = 0.0
    padded_flops: float = 0.0
    vector_ops: float = 0.0
    pad_dims: tuple[int, ...] = ()
    xla_cycles: float = 0.0
    fixed_s: float | None = None

    @property
    def flops(self) -> float:
        """Useful FLOPs of a matmul (2 x batch x m x n x k) or a kernel (``mxu_flops``);
        0 for other kinds."""
        if self.kind == "kernel":
            return self.mxu_flops
        return 2.0 * self.batch * self.m * self.n * self.k if self.kind == "matmul" else 0.0


@dataclass(frozen=True)
class ChipOverride:
    """MPMD: chip ``chip`` runs compute ``slowdown`` times slower and/or extra ops
    (appended after the op named in each extra op's ``after``)."""

    slowdown: float = 1.0
    extra_ops: tuple[Op, ...] = ()


@dataclass(frozen=True)
class Program:
    """An SPMD program: ``ops`` in any order (validated into a DAG), an optional logical
    ``mesh`` (axis name -> size), per-chip resident ``memory_bytes`` and MPMD
    ``chip_overrides`` keyed by chip index."""

    name: str
    ops: tuple[Op, ...]
    mesh: dict[str, int] | None = None
    memory_bytes: dict[str, float] = field(default_factory=dict)
    chip_overrides: dict[int, ChipOverride] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for chip, override in self.chip_overrides.items():
            if override.slowdown <= 0:
                raise ProgramError(f"chip {chip}: slowdown must be > 0")
        topological_order(self.ops)  # raises on unknown references, duplicates and cycles
        for extra in (o for ov in self.chip_overrides.values() for o in ov.extra_ops):
            topological_order((*self.ops, extra))

    @property
    def flops_per_chip(self) -> float:
        return sum(op.flops for op in self.ops)

    def ops_for(self, chip: int) -> tuple[Op, ...]:
        """The ops chip ``chip`` runs (the SPMD ops plus its extra ops), in dependency order."""
        override = self.chip_overrides.get(chip)
        ops = self.ops + (override.extra_ops if override else ())
        return tuple(topological_order(ops))


def topological_order(ops: Iterable[Op]) -> list[Op]:
    """``ops`` in an order where every op comes after the ops it names in ``after``.

    Ties keep the given order (deterministic). Raises ProgramError naming a duplicate
    name, an unknown reference or the ops of a cycle.
    """
    ops = list(ops)
    by_name: dict[str, Op] = {}
    for op in ops:
        if op.name in by_name:
            raise ProgramError(f"two ops are named '{op.name}'")
        if op.kind not in OP_KINDS:
            raise ProgramError(
                f"op '{op.name}': unknown kind '{op.kind}' (choose from {', '.join(OP_KINDS)})"
            )
        by_name[op.name] = op
    for op in ops:
        for dep in op.after:
            if dep not in by_name:
                raise ProgramError(f"op '{op.name}' comes after unknown op '{dep}'")
    indegree = {op.name: len(set(op.after)) for op in ops}
    users: dict[str, list[str]] = {op.name: [] for op in ops}
    for op in ops:
        for dep in set(op.after):
            users[dep].append(op.name)
    ready = deque(op.name for op in ops if indegree[op.name] == 0)
    order: list[Op] = []
    while ready:
        name = ready.popleft()
        order.append(by_name[name])
        for user in users[name]:
            indegree[user] -= 1
            if indegree[user] == 0:
                ready.append(user)
    if len(order) != len(ops):
        stuck = sorted(name for name, d in indegree.items() if d > 0)
        raise ProgramError(f"dependency cycle among ops {', '.join(stuck)}")
    return order
