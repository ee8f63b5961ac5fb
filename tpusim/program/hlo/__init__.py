"""Import XLA's compiled HLO text (``jax.jit(f).lower(...).compile().as_text()``) as a program.

One concept per module:

- :mod:`.syntax`, :mod:`.shapes`, :mod:`.replica_groups`, :mod:`.parse`: text ->
  computations of instructions with shapes (tuples, layouts), operands, attributes,
  and device groups in every form XLA prints;
- :mod:`.opcodes`: opcodes by what they cost;
- :mod:`.callgraph`: which computation calls which, and the one walk all analyses use;
- :mod:`.cost`: FLOPs and bytes (dots, convolutions, fusions, loop trip counts);
- :mod:`.collectives`: the collectives that run, sized as nccl-tests does;
- :mod:`.module`: :class:`HloModule` and :func:`parse_hlo`;
- :mod:`.lower`: :func:`hlo_to_program` (to :mod:`tpusim.program.ir`) and :func:`load_hlo`;
- :mod:`.replay`: :func:`replay_program`, the program's groups on a system's chips.

Each step takes what it needs as arguments: ``replay_program(module, program, ...)``
reads the groups the lowering put on each collective op, so it works whatever was
called before it.
"""

from tpusim.program.hlo.callgraph import MAX_UNROLL
from tpusim.program.hlo.collectives import HloCollective
from tpusim.program.hlo.lower import hlo_to_program, load_hlo
from tpusim.program.hlo.module import HloModule, parse_hlo
from tpusim.program.hlo.opcodes import COLLECTIVE_KINDS
from tpusim.program.hlo.parse import Computation, Instruction
from tpusim.program.hlo.replay import replay_program
from tpusim.program.hlo.replica_groups import parse_replica_groups
from tpusim.program.hlo.shapes import Shape, parse_shape

__all__ = [
    "COLLECTIVE_KINDS",
    "MAX_UNROLL",
    "Computation",
    "HloCollective",
    "HloModule",
    "Instruction",
    "Shape",
    "hlo_to_program",
    "load_hlo",
    "parse_hlo",
    "parse_replica_groups",
    "parse_shape",
    "replay_program",
]
