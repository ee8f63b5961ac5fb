"""An HLO module's ENTRY computation as a :class:`~tpusim.program.ir.Program`.

Dots, convolutions and fusions with dots become ``matmul`` ops (one per dot),
collectives ``collective`` ops carrying their device groups (device ids; see
:func:`~tpusim.program.hlo.replay.replay_program`), other costly ops ``elementwise``
ops of their operand + result bytes (an unknown opcode: its result bytes), a custom
call whose work the module says a ``kernel`` op (:mod:`.custom_calls`); an op with
no work (a zero-size array, a loop run zero times) becomes no op. Parameters,
constants, tuples, get-tuple-element, bitcast, copy and ``-done`` halves become no op;
a ``copy-start`` to or from host memory (layout ``S(5)``) an asynchronous
``host_transfer`` (host offload);
dependencies pass through them. ``while`` loops of up to :data:`MAX_UNROLL` iterations
are unrolled (one copy of the body per iteration, named ``<while>/<i>/<op>``); longer
ones become one copy whose ops stand for every iteration (``<while>/<op>``, sizes and
batch scaled by the trip count); where unrolling them all would walk over a million
instruction runs, only loops up to a shorter trip count are
(``HloModule.unroll_up_to``). A ``call`` or ``conditional`` runs its (first) callee.
A scheduled module's ops also wait for the TensorCore ops before them in XLA's order
and for the async ops whose ``-done`` they come after (:mod:`.schedule`); the compute
of an async collective's *continuation* fusion runs while the collective proceeds
(:func:`~tpusim.program.hlo.fusions.continuation`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from tpusim.program.builders.attention import KernelWork
from tpusim.program.hlo.callgraph import CallRole, Frame, Policy, Site, calls, walk
from tpusim.program.hlo.collectives import HloCollective
from tpusim.program.hlo.cost import (
    ASYNC_SLICES,
    async_slice_bytes,
    matmul_parts,
    movement_bytes,
)
from tpusim.program.hlo.custom_calls import custom_call_work
from tpusim.program.hlo.fusions import computed_elements, continuation, fusion_role
from tpusim.program.hlo.module import HloModule, parse_hlo
from tpusim.program.hlo.opcodes import (
    CONTROL_FLOW_OPS,
    PASS_THROUGH_OPS,
    collective_kind,
)
from tpusim.program.hlo.parse import Computation
from tpusim.program.hlo.schedule import CoreOrder
from tpusim.program.hlo.xla_estimate import xla_cycles
from tpusim.program.ir import Op, Program, ProgramError
from tpusim.vocabulary import Dtype, Engine

#: Largest HLO text file read, bytes (256 MiB; assumption: compiled modules of the
#: largest models, metadata included, are tens of MB; the parsed module takes ~10x its
#: text in memory, and a device such as /dev/zero must not be read forever).
MAX_HLO_FILE_BYTES = 256 * 2**20
#: The program runs the loop bodies, the taken branch and called computations; fusions
#: and async-wrapped computations are single ops.
_LOWERED: frozenset[CallRole] = frozenset({"loop_body", "branch", "call"})
_CHIP_DTYPE: dict[str, Dtype] = {
    "bf16": "bf16",
    "f16": "bf16",
    "s8": "int8",
    "u8": "int8",
    "s4": "int4",
    "u4": "int4",
}

Deps = frozenset[str]


@dataclass(frozen=True, eq=False)
class TupleDeps:
    """What each element of a tuple value waits for (a loop's carried state): a
    ``get-tuple-element`` waits only for its element's ops."""

    elements: tuple[Value, ...]


Value = Deps | TupleDeps


def chip_dtype(dtype: str) -> Dtype:
    """The chip dtype an HLO element type runs as (f8* -> fp8, f4* -> fp4, else fp32)."""
    if dtype.startswith("f8"):
        return "fp8"
    if dtype.startswith("f4"):
        return "fp4"
    return _CHIP_DTYPE.get(dtype, "fp32")


def _engine(comp: Computation) -> Engine | None:
    """``sparsecore`` for a computation on XLA's SparseCore thread, else None."""
    return "sparsecore" if comp.execution_thread == "sparsecore" else None


def hlo_to_program(module: HloModule, name: str | None = None) -> Program:
    """The ENTRY computation of ``module`` as a :class:`Program` (see the module doc)."""
    lowering = _Lowering(module)
    policy = Policy(_LOWERED, unroll_up_to=module.unroll_up_to)
    for site in walk(module.computations, module.entry, policy):
        lowering.visit(site)
    return Program(name or module.name or "hlo", tuple(lowering.ops))


def load_hlo(path: str | Path) -> tuple[HloModule, Program]:
    """Read an HLO text file; :class:`ProgramError` if it cannot be read or parsed, or is
    over :data:`MAX_HLO_FILE_BYTES`."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            data = f.read(MAX_HLO_FILE_BYTES + 1)
    except OSError as exc:
        raise ProgramError(f"{path}: cannot read HLO file: {exc}") from None
    if len(data) > MAX_HLO_FILE_BYTES:
        limit = MAX_HLO_FILE_BYTES // 2**20
        raise ProgramError(f"{path}: HLO file larger than {limit} MiB, the limit")
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ProgramError(f"{path}:{line}: not UTF-8 text (byte {exc.start})") from None
    module = parse_hlo(text, str(path))
    return module, hlo_to_program(module, path.name.split(".")[0])


class _Lowering:
    """Ops emitted so far and, per site name, the ops a use of its value waits for."""

    def __init__(self, module: HloModule) -> None:
        self.module = module
        self.records = {(c.computation, c.name): c for c in module.collective_list}
        self.ops: list[Op] = []
        self.deps: dict[str, Value] = {}
        self._flat: dict[int, Deps] = {}
        self.order = CoreOrder(module.attrs.get("is_scheduled") == "true")
        #: Asynchronous collectives emitted (their ``-done`` may be yet to come).
        self._in_flight: set[str] = set()

    def visit(self, site: Site) -> None:
        """Lower one instruction run: its ops, in the module's TensorCore order when
        the module is scheduled (:mod:`.schedule`), and what a use of its value waits
        for."""
        first = len(self.ops)
        self._lower(site)
        self.order.issued(self.ops[first:])

    def _lower(self, site: Site) -> None:
        ins = site.instruction
        opc = ins.opcode
        if opc == "parameter":
            self.deps[site.op_name] = self._frame_input(site.frame)
        elif opc == "tuple":
            prefix = site.frame.prefix
            elements = (self.deps.get(prefix + o, frozenset()) for o in ins.operands)
            self.deps[site.op_name] = TupleDeps(tuple(elements))
        elif opc == "get-tuple-element":
            self.deps[site.op_name] = self._element(site)
        elif opc == "copy-start" and ins.host_memory:
            self._emit_host_copy(site)
        elif opc in ASYNC_SLICES and ins.host_memory:
            self._emit_host_copy(site, async_slice_bytes(ins))
        elif opc == "custom-call-update" and (record := self._started(site)) is not None:
            self._emit_collective(site, record)  # the data arrives at the update
        elif opc in PASS_THROUGH_OPS or opc == "async-update":
            self._pass_through(site, waits=opc.endswith("-done"))
        elif (
            opc.endswith("-done") or fusion_role(self.module.computations, ins) == "collective-done"
        ):
            self._pass_through(site, waits=True)
        elif opc in CONTROL_FLOW_OPS:
            last = site.runs[-1] if site.runs else None
            self.deps[site.op_name] = self._root_deps(last) if last else self._before(site)
        elif (record := self._collective(site)) is not None:
            self._emit_collective(site, record)
        elif (work := custom_call_work(site.frame.computation, ins)) is not None:
            self._emit_kernel(site, work)
        elif parts := matmul_parts(self.module.computations, site):
            self._estimated(site, len(self.ops), lambda: self._emit_matmuls(site, parts))
            self._carry_in_flight(site)
        else:
            self._estimated(site, len(self.ops), lambda: self._emit_elementwise(site))
            self._carry_in_flight(site)

    def _inputs(self, site: Site) -> Deps:
        """What a compute op waits for: its operands' ops, but for a continuation fusion
        (:func:`~tpusim.program.hlo.fusions.continuation`) not the collectives in
        flight whose buffers it carries: it runs while they proceed."""
        before = self._before(site)
        if before.isdisjoint(self._in_flight):
            return before
        if continuation(self.module.computations, site.instruction) is None:
            return before
        return before - self._in_flight

    def _carry_in_flight(self, site: Site) -> None:
        """A continuation fusion's value: each element it computes waits for its
        compute ops, each it passes on (the collective's buffers) for the collectives
        in flight it carries as well."""
        carried = self._before(site) - self._inputs(site)
        comp = continuation(self.module.computations, site.instruction) if carried else None
        if comp is None:
            return
        ops = self.flat(self.deps[site.op_name])
        elements = tuple(ops if c else ops | carried for c in computed_elements(comp))
        self.deps[site.op_name] = TupleDeps(elements) if elements else ops | carried

    def _pass_through(self, site: Site, waits: bool) -> None:
        """An op with no work: a use of its value waits for its operands; ``waits``: a
        ``-done``, where the TensorCore waits for what its ``-start`` began."""
        self.deps[site.op_name] = before = self._before(site)
        if waits:
            self.order.waited(before)

    def _estimated(self, site: Site, first: int, emit: Callable[[], None]) -> None:
        """Run ``emit`` and give the compute ops it added XLA's estimated cycles of the
        site's instruction (times its runs), split evenly among them."""
        emit()
        cycles = xla_cycles(site.instruction) * site.num_executions
        added = len(self.ops) - first
        if cycles > 0 and added:
            share = cycles / added
            self.ops[first:] = [replace(op, xla_cycles=share) for op in self.ops[first:]]

    def flat(self, value: Value) -> Deps:
        """Every op ``value`` waits for (a tuple's: its elements' together)."""
        if not isinstance(value, TupleDeps):
            return value
        found = self._flat.get(id(value))
        if found is None:
            found = frozenset().union(*(self.flat(v) for v in value.elements))
            self._flat[id(value)] = found
        return found

    def _before(self, site: Site) -> Deps:
        prefix = site.frame.prefix
        return frozenset().union(
            *(self.flat(self.deps.get(prefix + o, frozenset())) for o in site.instruction.operands)
        )

    def _element(self, site: Site) -> Value:
        """A ``get-tuple-element``'s value: its element of a tuple value, else what its
        operand waits for."""
        ins = site.instruction
        value = (
            self.deps.get(site.frame.prefix + ins.operands[0], frozenset())
            if ins.operands
            else frozenset()
        )
        index = ins.attrs.get("index", "")
        if isinstance(value, TupleDeps) and index.isdigit() and int(index) < len(value.elements):
            return value.elements[int(index)]
        return self.flat(value)

    def _root_deps(self, frame: Frame) -> Value:
        return self.deps.get(frame.prefix + frame.computation.root.name, frozenset())

    def _frame_input(self, frame: Frame) -> Value:
        """What a computation's parameters stand for: the previous iteration's result,
        the call site's operand (a loop's state, element by element) or operands, or
        nothing at ENTRY."""
        if frame.previous is not None:
            return self._root_deps(frame.previous)
        caller = frame.caller
        if caller is not None and len(caller.instruction.operands) == 1:
            return self.deps.get(caller.frame.prefix + caller.instruction.operands[0], frozenset())
        return self._before(caller) if caller is not None else frozenset()

    def _collective(self, site: Site) -> HloCollective | None:
        ins = site.instruction
        if collective_kind(ins.opcode):
            return self.records.get((site.frame.computation.name, ins.name))
        if ins.opcode not in ("async-start", "call-start", "fusion"):
            return None
        record = None
        for callee in (c.callee for c in calls(ins) if c.role in ("async", "fused")):
            for inner in self.module.computations[callee].instructions:
                record = self.records.get((callee, inner), record)
        return record

    def _started(self, site: Site) -> HloCollective | None:
        """The collective an async custom call runs (``custom-call-start`` calls its
        computation with no operand; the ``custom-call-update`` that follows hands it
        the data), or None."""
        ins = site.instruction
        start = site.frame.computation.instructions.get(ins.operands[0]) if ins.operands else None
        if start is None or start.opcode != "custom-call-start":
            return None
        record = None
        for callee in (c.callee for c in calls(start)):
            for inner in self.module.computations[callee].instructions:
                record = self.records.get((callee, inner), record)
        return record

    def _emit_collective(self, site: Site, record: HloCollective) -> None:
        if record.size_bytes * site.num_executions <= 0:  # zero-size, or a loop run 0 times
            self.deps[site.op_name] = self._before(site)
            return
        op = Op(
            site.op_name,
            "collective",
            after=self.order.after(self._before(site)),
            collective=record.kind,
            size_bytes=record.size_bytes * site.num_executions,
            axes=(),
            groups=record.groups,
            overlap=record.is_async,
            engine=_engine(self.module.computations[record.computation]),
        )
        self.ops.append(op)
        self.deps[site.op_name] = frozenset({site.op_name})
        if op.overlap:
            self._in_flight.add(op.name)

    def _emit_matmuls(self, site: Site, parts: list[tuple[int, int, int, int, str]]) -> None:
        prev = self.order.after(self._inputs(site))
        if site.num_executions == 0:
            parts = []
        parts = [part for part in parts if min(part[:4]) > 0]  # zero-size: no work
        for j, (batch, m, n, k, dtype) in enumerate(parts):
            name = site.op_name if len(parts) == 1 else f"{site.op_name}/dot{j}"
            scaled = batch * site.num_executions
            op = Op(
                name, "matmul", after=prev, m=m, n=n, k=k, batch=scaled, dtype=chip_dtype(dtype)
            )
            self.ops.append(op)
            prev = (name,)
        self.deps[site.op_name] = frozenset(prev)

    def _emit_kernel(self, site: Site, work: KernelWork) -> None:
        """A custom call with known work: one ``kernel`` op in its first operand's dtype."""
        ins, comp = site.instruction, site.frame.computation
        before = self._before(site)
        n = float(site.num_executions)
        if n == 0:
            self.deps[site.op_name] = before
            return
        first = comp.instructions.get(ins.operands[0]) if ins.operands else None
        dtype = chip_dtype(first.shape.dtype if first is not None else ins.shape.dtype)
        after = self.order.after(before)
        self.ops.append(Op(site.op_name, "kernel", after, dtype=dtype, **work.op_fields(n)))
        self.deps[site.op_name] = frozenset({site.op_name})

    def _emit_host_copy(self, site: Site, moved: float | None = None) -> None:
        """A host-offload copy (to or from host memory) of ``moved`` bytes (default:
        the copied array): an asynchronous host transfer, on the host DMA engines beside
        compute."""
        ins = site.instruction
        if moved is None:
            leaves = ins.shape.elements[0].leaves() if ins.shape.elements else ins.shape.leaves()
            moved = sum(leaf.bytes for leaf in leaves)
        nbytes = moved * site.num_executions
        before = self._before(site)
        if nbytes <= 0:
            self.deps[site.op_name] = before
            return
        after = self.order.after(before)
        self.ops.append(Op(site.op_name, "host_transfer", after, bytes=nbytes, overlap=True))
        self.deps[site.op_name] = frozenset({site.op_name})

    def _emit_elementwise(self, site: Site) -> None:
        ins, comp = site.instruction, site.frame.computation
        nbytes = movement_bytes(self.module.computations, comp, ins)
        before = self._inputs(site)
        scaled = float(nbytes) * site.num_executions
        if scaled <= 0:
            self.deps[site.op_name] = before
            return
        self.ops.append(
            Op(site.op_name, "elementwise", after=self.order.after(before), bytes=scaled)
        )
        self.deps[site.op_name] = frozenset({site.op_name})
