"""What each registered algorithm declares: the ops and group shapes it supports and its
cost class, from which ``auto`` bounds its time before building it.

A :class:`CostClass` gives, for an op on a group of n chips and V bytes (nccl-tests
size), closed forms that no schedule of the algorithm can beat:

- ``min_steps``: steps on the critical path (each pays at least the smallest hop
  latency and the step synchronisation);
- ``sent_bytes``: bytes the busiest chip sends, at least (over its links' bandwidth:
  the injection bound);
- ``pair_bytes``: for all-pairs exchanges, bytes every ordered pair of the group's
  chips sends the other directly (over the bandwidth of a cut between two halves of
  the group: the bisection bound; 0 when the algorithm is not all-pairs);
- ``all_pairs_steps``: how many of those steps are each an exchange between every
  ordered pair of the group (each then pays at least the group's diameter in hops
  times the smallest hop latency: the latency bound of a small all-pairs exchange);
- ``messages``: messages the busiest chip sends in one step (a direct exchange sends
  n - 1; see :data:`tpusim.collectives.offload.MESSAGE_S`);
- ``transfers``: transfers the schedule holds per group over all its steps (what
  building and routing it costs in memory: n (n - 1) per all-pairs step; 0: small).

``steps`` and ``transfer_class`` name the class (``O(n)`` steps, ``O(n^2)`` transfers) for
the CLI and the docs. Bounds may be loose (a multi-axis algorithm declares one step);
they must never exceed what the algorithm does, or ``auto`` could drop the fastest.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from tpusim.vocabulary import OPS, Op

Shape = str
"""``any`` (every group), ``torus-axes`` (a group made of torus axes only)."""


def _lg(n: int) -> int:
    return max(0, n.bit_length() - 1)


def generic_sent_bytes(op: Op, size: float, n: int) -> float:
    """Bytes the busiest chip sends in any algorithm of ``op`` (the average over chips,
    which every chip's share cannot all be below): what the others must receive."""
    if n <= 1:
        return 0.0
    if op in ("collective-permute",):
        return size
    return (n - 1) / n * size


@dataclass(frozen=True)
class CostClass:
    """An algorithm's supported ops and group shapes and its cost class (module doc)."""

    ops: frozenset[str] = frozenset(OPS) - {"collective-permute"}
    shape: Shape = "any"
    steps: str = "O(log n)"
    transfer_class: str = "O(n)"
    min_steps: Callable[[Op, int], int] = field(default=lambda op, n: 1 if n > 1 else 0)
    sent_bytes: Callable[[Op, float, int], float] = field(default=generic_sent_bytes)
    pair_bytes: Callable[[Op, float, int], float] = field(default=lambda op, size, n: 0.0)
    messages: Callable[[Op, int], int] = field(default=lambda op, n: 1)
    all_pairs_steps: Callable[[Op, int], int] = field(default=lambda op, n: 0)
    transfers: Callable[[Op, int], int] = field(default=lambda op, n: 0)

    def supports(self, op: Op, on_torus_axes: bool) -> bool:
        """Whether the algorithm runs ``op`` on a group of this shape."""
        return op in self.ops and (self.shape == "any" or on_torus_axes)


def _ring_steps(op: Op, n: int) -> int:
    return 0 if n <= 1 else (2 * (n - 1) if op == "all-reduce" else n - 1)


def _bidir_steps(op: Op, n: int) -> int:
    half = math.ceil((n - 1) / 2)
    if n <= 1:
        return 0
    if op == "all-to-all":
        return n // 2
    return 2 * half if op == "all-reduce" else half


def _ring_sent(op: Op, size: float, n: int) -> float:
    """A unidirectional relay all-to-all forwards the chunk for distance d d times."""
    if op == "all-to-all" and n > 1:
        return size * (n - 1) / 2
    return generic_sent_bytes(op, size, n)


def _bidir_sent(op: Op, size: float, n: int) -> float:
    """A bidirectional relay sends each chunk the shorter way: sum of min(d, n - d)."""
    if op == "all-to-all" and n > 1:
        return size * (n * n // 4) / n
    return generic_sent_bytes(op, size, n)


def _direct_sent(op: Op, size: float, n: int) -> float:
    if op == "all-reduce" and n > 1:
        return 2 * (n - 1) / n * size
    if op == "broadcast":
        return (n - 1) * size  # the root sends every copy
    return generic_sent_bytes(op, size, n)


def _direct_pairs(op: Op, size: float, n: int) -> float:
    if op in ("collective-permute", "broadcast") or n <= 1:
        return 0.0
    return (2 if op == "all-reduce" else 1) * size / n


def _relay_transfers(op: Op, n: int) -> int:
    """A relay all-to-all forwards n transfers a step for ~n steps."""
    return n * (n - 1) if op == "all-to-all" else 0


def _direct_transfers(op: Op, n: int) -> int:
    if op in ("collective-permute", "broadcast"):
        return n
    return (2 if op == "all-reduce" else 1) * n * (n - 1)


def _direct_all_pairs_steps(op: Op, n: int) -> int:
    """Direct's steps that exchange between every pair (all-reduce: its reduce-scatter
    and its all-gather; a permute or a broadcast: none)."""
    if op in ("collective-permute", "broadcast") or n <= 1:
        return 0
    return 2 if op == "all-reduce" else 1


def _all_pairs_messages(op: Op, n: int) -> int:
    return 1 if op == "collective-permute" else max(1, n - 1)


AXIS_OPS = frozenset({"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast"})
"""The ops an axis-by-axis algorithm runs (broadcast as a scatter then its all-gather)."""

DECLARED: dict[str, CostClass] = {
    "ring": CostClass(
        steps="O(n)",
        transfer_class="O(n) (all-to-all: O(n^2))",
        min_steps=_ring_steps,
        sent_bytes=_ring_sent,
        transfers=_relay_transfers,
    ),
    "bidir-ring": CostClass(
        steps="O(n)",
        transfer_class="O(n) (all-to-all: O(n^2))",
        min_steps=_bidir_steps,
        sent_bytes=_bidir_sent,
        transfers=_relay_transfers,
    ),
    "torus": CostClass(ops=AXIS_OPS, shape="torus-axes", steps="O(sum of k_i)"),
    "halving-doubling": CostClass(
        ops=frozenset({"all-reduce", "reduce-scatter", "all-gather", "broadcast"}),
        min_steps=lambda op, n: _lg(n),
    ),
    "direct": CostClass(
        ops=frozenset(OPS),
        steps="O(1)",
        transfer_class="O(n^2)",
        sent_bytes=_direct_sent,
        pair_bytes=_direct_pairs,
        messages=_all_pairs_messages,
        transfers=_direct_transfers,
        min_steps=lambda op, n: 0 if n <= 1 else (2 if op == "all-reduce" else 1),
        all_pairs_steps=_direct_all_pairs_steps,
    ),
    "hierarchical": CostClass(ops=AXIS_OPS, steps="O(levels)"),
    "recursive-doubling": CostClass(
        ops=frozenset({"all-reduce", "all-gather", "broadcast"}), min_steps=lambda op, n: _lg(n)
    ),
    "tree": CostClass(ops=frozenset({"all-reduce", "broadcast"}), min_steps=lambda op, n: _lg(n)),
    "direct-axes": CostClass(
        ops=AXIS_OPS,
        steps="O(axes)",
        transfer_class="O(n sum of k_i)",
        messages=lambda op, n: 1,
    ),
    "one-shot": CostClass(
        ops=frozenset({"all-reduce"}),
        steps="O(1)",
        transfer_class="O(n^2)",
        sent_bytes=lambda op, size, n: (n - 1) * size,
        pair_bytes=lambda op, size, n: size if n > 1 else 0.0,
        messages=_all_pairs_messages,
        transfers=lambda op, n: n * (n - 1),
        all_pairs_steps=lambda op, n: 1 if n > 1 else 0,
    ),
}
"""The cost classes of the shipped algorithms (registry.py registers them)."""
