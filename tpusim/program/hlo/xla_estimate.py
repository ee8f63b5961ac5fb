"""XLA's own time estimate of a TPU-compiled module, beside tpusim's replay.

XLA's TPU backend writes its cost model's estimate of each op it schedules into the
op's ``backend_config`` (``"window_config": {..., "estimated_cycles": "4748031", ...}``
on fusions, convolutions, copies and reductions). :func:`estimated_cycles` sums them
over the ops that run on one device, loop bodies times their trip counts, fusions as
one op each (the estimate of the fusion, not of what it fuses). Collectives, custom
calls (Pallas kernels such as splash attention) and the few small unfused ops carry
no estimate and are not in the sum: it is the device's TensorCore time as XLA's
scheduler sees it, with every collective hidden.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tpusim.program.hlo.callgraph import Policy, walk
from tpusim.program.hlo.parse import Instruction

if TYPE_CHECKING:
    from tpusim.program.hlo.module import HloModule

_CYCLES = re.compile(r'"estimated_cycles"\s*:\s*"?(\d+)')
#: Loop bodies, taken branches and calls run; fusions are one op (their estimate).
_OPS = Policy(frozenset({"loop_body", "branch", "call"}), unroll_up_to=1)


@dataclass(frozen=True)
class CycleEstimate:
    """XLA's estimated TensorCore cycles of one device's run of the module (loops times
    their trip counts) and the op runs that carry an estimate."""

    cycles: float
    estimated_runs: int


def xla_cycles(ins: Instruction) -> float:
    """XLA's estimated cycles of one run of ``ins`` (0 when it gives none)."""
    found = _CYCLES.search(ins.attrs.get("backend_config", ""))
    return float(found.group(1)) if found is not None else 0.0


def estimated_cycles(module: HloModule) -> CycleEstimate:
    """The sum of XLA's ``estimated_cycles`` over the module's op runs (module doc)."""
    cycles, runs = 0.0, 0
    for site in walk(module.computations, module.entry, _OPS):
        found = xla_cycles(site.instruction)
        if found and site.num_executions:
            cycles += found * site.num_executions
            runs += site.num_executions
    return CycleEstimate(cycles, runs)
