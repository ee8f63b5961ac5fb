"""Where a replica's chips sit: compact blocks of a torus.

A replica's chips are numbered 0 .. tp*ep-1 by the iteration builder (tensor groups of
``tp`` consecutive numbers; expert groups ``tp`` apart). On a torus, numbering chips
by index puts a replica on a run of the fastest axis: eight chips of Ironwood's
16x24x24 pod become half of a 16-chip ring, so a ring all-reduce closes over seven
hops. Cloud TPU serves from compact slices instead (Ironwood's smallest topologies
are 2x2x1 and 2x2x2), so :func:`replica_chip_order` places each replica of 2, 4 or 8
chips on a 2, 2x2 or 2x2x2 block, its chips in Gray-code order: consecutive chips,
and the last and the first, are one hop apart, a ring of single hops. Other sizes,
other topologies (Boardfly's boards are already compact) and tori with an odd axis
keep the index order.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tpusim.topology import Topology


def replica_chip_order(
    topology: Topology, chips_per_replica: int, replicas: int
) -> tuple[int, ...]:
    """The system chip of each replica chip, replica after replica (``()``: index
    order). Blocks of ``2^k`` chips (k = 1..3, at most one per axis) tile the torus's
    first k axes in index order."""
    dims = getattr(topology, "dims", None)
    k = chips_per_replica.bit_length() - 1
    if dims is None or chips_per_replica != 2**k or not 1 <= k <= min(3, len(dims)):
        return ()
    if any(d % 2 for d in dims[:k]):
        return ()
    block = [2] * k + [1] * (len(dims) - k)
    tiles = [d // b for d, b in zip(dims, block, strict=True)]
    strides = [math.prod(dims[:i]) for i in range(len(dims))]  # index order
    needed = chips_per_replica * replicas
    order: list[int] = []
    for reversed_tile in itertools.product(*(range(t) for t in reversed(tiles))):
        tile = reversed_tile[::-1]  # the first axis varies fastest, as chip indices do
        for i in range(chips_per_replica):
            gray = i ^ (i >> 1)
            coord = [
                t * b + ((gray >> a) & 1 if a < k else 0)
                for a, (t, b) in enumerate(zip(tile, block, strict=True))
            ]
            order.append(sum(c * s for c, s in zip(coord, strides, strict=True)))
        if len(order) >= needed:
            return tuple(order[:needed])
    return ()
