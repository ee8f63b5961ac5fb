"""An HLO module: its parsed computations and what follows from them.

Everything derived (devices, collectives, unknown ops, FLOPs) is computed from the
computations when first asked for, so no call has to happen before another.
:func:`parse_hlo` asks for the collectives at once, so a bad replica group or a call
cycle is a :class:`ProgramError` ``file:line: ...`` at parse time.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property

from tpusim.program.hlo import collectives as coll
from tpusim.program.hlo.callgraph import (
    CallGraphError,
    Site,
    calls,
    check_call_graph,
    unroll_limit,
)
from tpusim.program.hlo.cost import check_dot, flops
from tpusim.program.hlo.loops import infer_trip_counts
from tpusim.program.hlo.parse import Computation, parse_text
from tpusim.program.ir import ProgramError


@dataclass(frozen=True, eq=False)
class HloModule:
    """A parsed module (``file``: where it came from, for messages); read-only."""

    name: str
    file: str
    attrs: dict[str, str]
    computations: dict[str, Computation]
    entry: str
    line: int = 1  # of the ``HloModule`` header

    @cached_property
    def _collective_sites(self) -> list[Site]:
        return coll.collective_sites(self.computations, self.entry)

    @cached_property
    def unroll_up_to(self) -> int:
        """The longest loop the lowering unrolls (:func:`~tpusim.program.hlo.callgraph.
        unroll_limit`)."""
        return unroll_limit(self.computations, self.entry)

    @cached_property
    def num_devices(self) -> int:
        """Devices of the SPMD program (declared, or the highest device id named + 1)."""
        return coll.num_devices(self.attrs, self._collective_sites, self.file, self.line)

    @cached_property
    def collective_list(self) -> tuple[coll.HloCollective, ...]:
        """Every collective that runs, in program order (see :mod:`.collectives`)."""
        devices = self.num_devices
        return tuple(coll.collective_record(s, devices, self.file) for s in self._collective_sites)

    @cached_property
    def unknown_ops(self) -> Counter[str]:
        """Opcodes the cost model does not know, costed by their result bytes."""
        return coll.unknown_ops(self.computations, self.entry)

    @property
    def flops_per_chip(self) -> float:
        """FLOPs per chip of one run of ENTRY, loops times their trip counts."""
        return self.flops(loop_trip_counts=True)

    def flops(self, loop_trip_counts: bool = True) -> float:
        """FLOPs per chip of the ENTRY computation (see :mod:`.cost` for the model)."""
        return flops(self.computations, self.entry, loop_trip_counts)

    @property
    def collectives(self) -> Counter[str]:
        """Count per kind (executions; an async pair counts once)."""
        out: Counter[str] = Counter()
        for c in self.collective_list:
            out[c.kind] += c.count
        return out

    @property
    def collective_bytes_per_chip(self) -> float:
        """Sum over executed collectives of their nccl-tests size, bytes."""
        return sum(c.size_bytes * c.count for c in self.collective_list)


def parse_hlo(text: str, file: str = "<hlo>") -> HloModule:
    """Parse HLO module text; :class:`ProgramError` ``file:line: ...`` on bad input
    (syntax, unknown operands or computations, a call graph no walk can run, see
    :func:`~tpusim.program.hlo.callgraph.check_call_graph`, bad device groups, see
    :mod:`.devices`)."""
    parsed = parse_text(text, file)
    infer_trip_counts(parsed.computations)
    module = HloModule(
        parsed.name, file, parsed.attrs, parsed.computations, parsed.entry, parsed.line
    )
    try:
        _check_references(module)
        check_call_graph(module.computations, module.entry)
    except CallGraphError as exc:
        raise ProgramError(f"{file}:{exc.line}: {exc}") from None
    module.collective_list  # noqa: B018  (reads every replica group: errors now, not later)
    return module


def _check_references(module: HloModule) -> None:
    for comp in module.computations.values():
        for ins in comp.instructions.values():
            for op in ins.operands:
                if op not in comp.instructions:
                    raise ProgramError(
                        f"{module.file}:{ins.line}: '{ins.name}' uses unknown operand '{op}'"
                    )
            try:
                check_dot(comp, ins)
            except ValueError as exc:
                raise ProgramError(f"{module.file}:{ins.line}: {exc}") from None
            for call in calls(ins):
                if call.callee not in module.computations:
                    raise ProgramError(
                        f"{module.file}:{ins.line}: '{ins.name}' calls unknown computation "
                        f"'{call.callee}'"
                    )
