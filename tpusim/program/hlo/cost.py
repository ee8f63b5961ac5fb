"""FLOPs and bytes of HLO instructions, per chip (the module is the per-device SPMD program).

- ``dot``: 2 x prod(result dims) x prod(lhs contracting dims);
- ``convolution``: 2 x output elements / output positions x input features x the
  (output, kernel) position pairs that land on real input, padding excluded as XLA
  counts it (:mod:`.convolution`);
- elementwise arithmetic (``add``, ``multiply``, ``compare``, ...): 1 FLOP per output
  element; ``reduce`` and ``all-reduce``/``reduce-scatter``: 1 FLOP per input element
  (the reduction). Transcendentals (``exp``, ``tanh``, ...) and data movement cost no
  FLOPs, as in XLA's ``HloCostAnalysis``;
- ``fusion``/``call``/``async-start``/``custom-call``: the cost of the called
  computation, recursively; a custom call whose work the module says (a Pallas
  ``cost_estimate``, a flash-attention kernel: :mod:`.custom_calls`) adds that work;
  ``conditional``: its costliest branch (as XLA's cost analysis takes the maximum;
  the program and the collective counts take the first);
- ``while``: (body + condition) x trip count, the trip count read from the
  ``backend_config`` ``"known_trip_count":{"n":"10"}`` and 1 when absent.
  ``flops(..., loop_trip_counts=False)`` counts every loop body once, which is what
  XLA's ``compiled.cost_analysis()`` reports.

:func:`movement_bytes` gives the bytes an op without matmul work reads and writes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from tpusim.program.hlo.callgraph import CallRole, Policy, Site, calls, walk
from tpusim.program.hlo.convolution import approximate_flops, convolution_flops
from tpusim.program.hlo.custom_calls import ALLOCATION_TARGETS, custom_call_work, target
from tpusim.program.hlo.fusions import fusion_bytes
from tpusim.program.hlo.opcodes import ELEMENTWISE_FLOP_OPS, KNOWN_OPS, REDUCING_OPS
from tpusim.program.hlo.parse import Computation, Instruction
from tpusim.program.hlo.shapes import Shape
from tpusim.program.hlo.syntax import int_list

#: What FLOPs count: loops, calls, fusions, async and custom-call bodies, not the
#: branches of a conditional (costed as their maximum by the conditional itself).
_COSTED: frozenset[CallRole] = frozenset(
    {"loop_body", "loop_condition", "call", "fused", "async", "custom"}
)
#: (batch, m, n, k, HLO element type) of one matrix multiplication.
MatmulPart = tuple[int, int, int, int, str]


def flops(computations: Mapping[str, Computation], start: str, loop_trip_counts: bool) -> float:
    """FLOPs per chip of one run of ``start`` (see the module doc for the model)."""
    policy = Policy(_COSTED, loop_trip_counts=loop_trip_counts)
    total = 0.0
    for site in walk(computations, start, policy):
        total += site.num_executions * _site_flops(computations, site, loop_trip_counts)
    return total


def _site_flops(computations: Mapping[str, Computation], site: Site, trips: bool) -> float:
    ins = site.instruction
    if ins.opcode != "conditional":
        return instruction_flops(site.frame.computation, ins)
    branches = [c.callee for c in calls(ins)]
    return max((flops(computations, b, trips) for b in branches), default=0.0)


def instruction_flops(comp: Computation, ins: Instruction) -> float:
    """FLOPs of ``ins`` itself, without the computations it calls."""
    op = ins.opcode
    if op == "dot":
        lhs = operand_shape(comp, ins, 0)
        contracting = int_list(ins.attrs.get("lhs_contracting_dims", "{}"))
        k = math.prod(lhs.dims[d] for d in contracting) if lhs else 1
        return 2.0 * ins.shape.num_elements * k
    if op == "convolution":
        kernel = operand_shape(comp, ins, 1)
        exact = convolution_flops(ins, operand_shape(comp, ins, 0), kernel)
        if exact is not None:
            return exact
        out = kernel_out(ins, kernel) if kernel is not None and kernel.dims else 1
        return approximate_flops(ins.shape, kernel, out)
    if op in ELEMENTWISE_FLOP_OPS:
        return float(ins.shape.num_elements)
    if op in REDUCING_OPS:
        return float(sum(_operand_elements(comp, ins)))
    if op == "custom-call" and (work := custom_call_work(comp, ins)) is not None:
        return work.flops
    return 0.0


def check_dot(comp: Computation, ins: Instruction) -> None:
    """A ``dot``'s dimension numbers name axes its operands have; ValueError if not."""
    if ins.opcode != "dot":
        return
    if len(ins.operands) != 2:
        raise ValueError(f"dot '{ins.name}' has {len(ins.operands)} operands, not 2")
    for side, index in (("lhs", 0), ("rhs", 1)):
        shape = operand_shape(comp, ins, index)
        rank = len(shape.dims) if shape is not None else 0
        for kind in ("contracting", "batch"):
            key = f"{side}_{kind}_dims"
            if any(not 0 <= d < rank for d in int_list(ins.attrs.get(key, "{}"))):
                raise ValueError(
                    f"dot '{ins.name}': {key} names an axis its rank-{rank} {side} lacks"
                )


def operand_shape(comp: Computation, ins: Instruction, index: int) -> Shape | None:
    """Shape of operand ``index`` of ``ins`` (None when absent)."""
    if index >= len(ins.operands):
        return None
    src = comp.instructions.get(ins.operands[index])
    return src.shape if src else None


def _operand_elements(comp: Computation, ins: Instruction) -> list[int]:
    """Elements of the data operands (reduce: the first half, the rest are inits)."""
    shapes = [comp.instructions[o].shape for o in ins.operands if o in comp.instructions]
    if ins.opcode == "reduce":
        shapes = shapes[: max(1, len(shapes) // 2)]
    return [leaf.num_elements for s in shapes for leaf in s.leaves()]


def operand_bytes(comp: Computation, ins: Instruction) -> float:
    """Bytes of all operands of ``ins`` (tuples: all their elements)."""
    return sum(comp.instructions[o].shape.bytes for o in ins.operands if o in comp.instructions)


def kernel_out(ins: Instruction, kernel: Shape) -> int:
    """Output features of a convolution's kernel (``o`` in ``dim_labels``, else the last)."""
    labels = ins.attrs.get("dim_labels", "")
    parts = re.match(r"[^_]*_([^-]*)->", labels)
    if parts and "o" in parts.group(1) and len(parts.group(1)) == len(kernel.dims):
        return kernel.dims[parts.group(1).index("o")]
    return kernel.dims[-1]


def dot_dims(comp: Computation, ins: Instruction) -> tuple[int, int, int, int]:
    """(batch, m, n, k) of a dot with 2*batch*m*n*k == its FLOPs."""
    lhs = comp.instructions[ins.operands[0]].shape.dims if ins.operands else ()
    rhs_ins = comp.instructions.get(ins.operands[1]) if len(ins.operands) > 1 else None
    rhs = rhs_ins.shape.dims if rhs_ins else ()
    lc = int_list(ins.attrs.get("lhs_contracting_dims", "{}"))
    lb = int_list(ins.attrs.get("lhs_batch_dims", "{}"))
    rc = int_list(ins.attrs.get("rhs_contracting_dims", "{}"))
    rb = int_list(ins.attrs.get("rhs_batch_dims", "{}"))
    k = math.prod(lhs[d] for d in lc if d < len(lhs))
    batch = math.prod(lhs[d] for d in lb if d < len(lhs))
    m = math.prod(d for i, d in enumerate(lhs) if i not in lc and i not in lb)
    n = math.prod(d for i, d in enumerate(rhs) if i not in rc and i not in rb)
    if batch * m * n != ins.shape.num_elements:  # odd layouts: keep the FLOPs exact
        batch, m, n = 1, ins.shape.num_elements, 1
    return batch, m, n, k


def matmul_parts(computations: Mapping[str, Computation], site: Site) -> list[MatmulPart]:
    """(batch, m, n, k, dtype) of each dot/convolution the site's instruction is or fuses."""
    if site.instruction.opcode != "fusion":
        return _own_matmul(site.frame.computation, site.instruction)
    policy = Policy(frozenset({"fused"}))
    fused = [c.callee for c in calls(site.instruction) if c.role == "fused"]
    return [
        part
        for callee in fused
        for inner in walk(computations, callee, policy)
        for part in _own_matmul(inner.frame.computation, inner.instruction)
    ]


def _own_matmul(comp: Computation, ins: Instruction) -> list[MatmulPart]:
    if ins.opcode == "dot":
        return [(*dot_dims(comp, ins), ins.shape.dtype)]
    if ins.opcode != "convolution":
        return []
    total = instruction_flops(comp, ins)
    kernel = operand_shape(comp, ins, 1)
    lhs, out = operand_shape(comp, ins, 0), ins.shape.num_elements
    if lhs is not None and lhs.num_elements and out and "dim_labels" in ins.attrs:
        # k: the products summed per output element; m: the input's rows (a head axis
        # XLA runs along a padded window belongs to the kernel: the input is read once)
        k = max(1, round(total / (2 * out)))
        m = max(1, lhs.num_elements // k)
        n = max(1, round(total / (2 * m * k)))
        return [(1, m, n, k, ins.shape.dtype)]
    n = kernel_out(ins, kernel) if kernel and kernel.dims else 1
    m = max(1, ins.shape.num_elements // max(n, 1))
    k = max(1, round(total / (2 * m * n)))
    return [(1, m, n, k, ins.shape.dtype)]


def movement_bytes(
    computations: Mapping[str, Computation], comp: Computation, ins: Instruction
) -> float:
    """Bytes an op without matmul work reads and writes: a fusion's as
    :func:`~tpusim.program.hlo.fusions.fusion_bytes` counts them, an async slice's
    (``slice-start``) its slice read and written, an unfused slice's as
    :func:`slicing_bytes` counts them, none for an uninitialised buffer
    (:data:`~tpusim.program.hlo.custom_calls.ALLOCATION_TARGETS`), a known op its
    operands and result, an unknown one its result."""
    if (fusion := fusion_bytes(computations, ins)) is not None:
        return fusion
    if (sliced := slicing_bytes(comp, ins)) is not None:
        return sliced
    if ins.opcode == "custom-call" and target(ins) in ALLOCATION_TARGETS:
        return 0.0
    if ins.opcode == "slice-start" and len(ins.shape.elements) > 1:
        return 2.0 * ins.shape.elements[1].bytes
    if ins.opcode in ASYNC_SLICES:
        return 2.0 * async_slice_bytes(ins)
    if ins.opcode in KNOWN_OPS:
        return ins.shape.bytes + operand_bytes(comp, ins)
    return ins.shape.bytes


def slicing_bytes(comp: Computation, ins: Instruction) -> float | None:
    """Bytes an unfused ``slice``, ``dynamic-slice`` or ``dynamic-update-slice`` reads
    and writes, as XLA's ``HloCostAnalysis`` counts them (``HandleSlice``,
    ``HandleDynamicSlice``, ``HandleDynamicUpdateSlice`` in
    ``xla/service/hlo_cost_analysis.cc``): the slice read and written (twice the
    result), the update read and written in place (twice operand 1: operand 0 aliases
    the result and is neither read nor copied), plus the start indices; None for
    another op."""
    if ins.opcode == "slice":
        return 2.0 * ins.shape.bytes
    shapes = [comp.instructions[o].shape for o in ins.operands if o in comp.instructions]
    if ins.opcode == "dynamic-slice" and len(shapes) == len(ins.operands):
        return 2.0 * ins.shape.bytes + sum(s.bytes for s in shapes[1:])
    if ins.opcode == "dynamic-update-slice" and len(shapes) == len(ins.operands) > 1:
        return 2.0 * shapes[1].bytes + sum(s.bytes for s in shapes[2:])
    return None


#: Asynchronous dynamic slices (host offload of a layer's saved activations reads and
#: writes one layer of a stack kept in host memory).
ASYNC_SLICES = frozenset({"dynamic-slice-start", "dynamic-update-slice-start"})


def async_slice_bytes(ins: Instruction) -> float:
    """Bytes an asynchronous dynamic slice moves: the slice (``dynamic-slice-start``'s
    result, the tuple's second element) or the update (``dynamic-update-slice-start``'s
    second operand, its first element's second)."""
    elements = ins.shape.elements
    if ins.opcode == "dynamic-slice-start" and len(elements) > 1:
        return elements[1].bytes
    if elements and len(elements[0].elements) > 1:
        return elements[0].elements[1].bytes
    return ins.shape.bytes
