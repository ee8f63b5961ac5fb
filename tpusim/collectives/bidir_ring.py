"""Bidirectional ring: every step uses both directions of every ring link.

All-gather in ceil((n-1)/2) steps: in step s every chip sends a whole shard V/n to
BOTH neighbours (the shard that originated s - 1 positions behind it on that side);
for even n the antipodal shard goes half each way in one last step. Reduce-scatter
is the mirror, all-reduce the two in turn. On a wrapped ring of n chips with
one-direction link bandwidth W and hop latency a (V: nccl-tests size):

- reduce-scatter / all-gather: ceil((n-1)/2) a + (n-1)/n V / (2W)
- all-reduce: 2 ceil((n-1)/2) a + (n-1)/n V / W
- all-to-all (each chunk the shorter way, antipodal half each way, relayed along its
  own direction only): floor(n/2) a + n V / (8W) for even n, (n^2-1)/n V / (8W) for
  odd n (formulas.md 1.2, 1.6).

Ring order as :mod:`tpusim.collectives.ring` (one axis, or a snake over several);
on a line the folded ring's two directions share links, which flow and packet see.
"""

from __future__ import annotations

from tpusim.collectives.base import Group, Op, Step
from tpusim.collectives.ring import ring_chips, ring_pipeline


def build(op: Op, size: float, group: Group) -> list[list[Step]]:
    return [ring_pipeline(op, size, ring_chips(group), bidirectional=True)]
