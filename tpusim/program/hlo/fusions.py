"""Fusions as XLA's TPU backend emits them: their bytes, and the async collective
fusions.

**Bytes.** A fusion reads its operands and writes its result once, as XLA's
``HloCostAnalysis`` counts it, except where the fused computation touches only part of
an operand: an operand used only by ``dynamic-slice``/``slice``/``gather`` is read for
the slices' bytes (a layer scan's slice of the stacked weights, not the stack), and a
``dynamic-update-slice`` into an operand (in place) writes the update's bytes, not the
buffer's; a bitcast, copy or in-place copy fusion between the parameter and the slice
(a layout change) does not make the whole operand read.

**Async collective fusions.** The TPU backend splits an asynchronous collective into a
*start* fusion (its fused computation holds the collective and a custom call
``AsyncCollectiveStart``), optional *continuation* fusions that run compute while the
transfer proceeds (they hold a copy of the collective) and a *done* fusion (a copy and
``AsyncCollectiveDone``). The copies carry the collective's ``channel_id``: the
collective runs once, from the start fusion, asynchronously; the done fusion is only a
point to wait at (:mod:`.collectives` counts one collective per channel per run).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from tpusim.program.hlo.opcodes import collective_kind
from tpusim.program.hlo.parse import Computation, Instruction
from tpusim.program.hlo.syntax import strip_name

ASYNC_START = "AsyncCollectiveStart"
ASYNC_DONE = "AsyncCollectiveDone"
FusionRole = Literal["collective-start", "collective-done", "compute"]
_SLICING = frozenset({"dynamic-slice", "slice", "gather"})
_THROUGH = frozenset({"bitcast", "copy", "reshape", "tuple", "get-tuple-element"})


def fused(computations: Mapping[str, Computation], ins: Instruction) -> Computation | None:
    """The computation a fusion calls (None for other ops)."""
    if ins.opcode != "fusion":
        return None
    return computations.get(strip_name(ins.attrs.get("calls", "")))


def _targets(comp: Computation) -> set[str]:
    return {
        i.attrs.get("custom_call_target", "").strip('"')
        for i in comp.instructions.values()
        if i.opcode == "custom-call"
    }


def computation_role(comp: Computation) -> FusionRole:
    """What a fused computation is in an async collective (see the module doc)."""
    targets = _targets(comp)
    if ASYNC_START in targets:
        return "collective-start"
    if ASYNC_DONE in targets:
        return "collective-done"
    return "compute"


def fusion_role(computations: Mapping[str, Computation], ins: Instruction) -> FusionRole:
    comp = fused(computations, ins)
    return computation_role(comp) if comp is not None else "compute"


def continuation(computations: Mapping[str, Computation], ins: Instruction) -> Computation | None:
    """The fused computation of a *continuation* fusion (compute that runs while an
    async collective it holds a copy of proceeds; see the module doc), else None."""
    comp = fused(computations, ins)
    if comp is None or computation_role(comp) != "compute":
        return None
    holds = any(collective_kind(i.opcode) for i in comp.instructions.values())
    return comp if holds else None


def computed_elements(comp: Computation) -> tuple[bool, ...]:
    """Per element of a tuple ROOT, whether the computation computes it (False: a
    parameter passed on or a copy of the collective in flight); () for other ROOTs."""
    if comp.root.opcode != "tuple":
        return ()
    parts = (comp.instructions.get(o) for o in comp.root.operands)
    return tuple(
        p is not None and p.opcode != "parameter" and not collective_kind(p.opcode) for p in parts
    )


def _users(comp: Computation) -> dict[str, list[Instruction]]:
    users: dict[str, list[Instruction]] = {name: [] for name in comp.instructions}
    for ins in comp.instructions.values():
        for operand in ins.operands:
            users.setdefault(operand, []).append(ins)
    return users


def _is_relayout(ins: Instruction) -> bool:
    """A bitcast, copy or in-place copy fusion (``output_to_operand_aliasing={{}: (0,
    {})}``, a layout change XLA nests in a fusion) of one operand: its reader reads
    what the users of its result read."""
    if len(ins.operands) != 1:
        return False
    if ins.opcode in ("bitcast", "copy"):
        return True
    aliasing = ins.attrs.get("output_to_operand_aliasing", "").replace(" ", "")
    return ins.opcode == "fusion" and aliasing == "{{}:(0,{})}"


def _readers(
    name: str, users: dict[str, list[Instruction]], depth: int = 0
) -> list[tuple[str, Instruction]]:
    """(the name it reads, the op) of every op that reads ``name``'s data, through
    relayouts (:func:`_is_relayout`)."""
    out = []
    for user in users.get(name, []):
        if _is_relayout(user) and depth < 8:
            out += _readers(user.name, users, depth + 1)
        else:
            out.append((name, user))
    return out


def _param_bytes(param: Instruction, users: dict[str, list[Instruction]]) -> float:
    """Bytes read of one fused parameter (see the module doc)."""
    readers = _readers(param.name, users)
    if readers and all(u.opcode in _SLICING and u.operands[0] == n for n, u in readers):
        return sum(u.shape.bytes for _, u in readers)
    if readers and all(
        u.opcode == "dynamic-update-slice" and u.operands[0] == n for n, u in readers
    ):
        return 0.0  # updated in place: the write is counted with the result
    return param.shape.bytes


def _written(comp: Computation, ins: Instruction, depth: int = 0) -> float:
    """Bytes the fused computation writes through ``ins`` (its ROOT at first)."""
    if ins.opcode in ("parameter", "constant"):
        return 0.0  # passed through (aliased), not written
    if ins.opcode == "dynamic-update-slice" and len(ins.operands) > 1:
        update = comp.instructions.get(ins.operands[1])
        return update.shape.bytes if update is not None else ins.shape.bytes
    if ins.opcode in _THROUGH and ins.operands and depth < 8:
        parts = [comp.instructions.get(o) for o in ins.operands]
        return sum(_written(comp, p, depth + 1) for p in parts if p is not None)
    return ins.shape.bytes


def fusion_bytes(computations: Mapping[str, Computation], ins: Instruction) -> float | None:
    """Bytes a fusion reads and writes (see the module doc); None if not a fusion."""
    comp = fused(computations, ins)
    if comp is None:
        return None
    users = _users(comp)
    read = sum(
        _param_bytes(p, users) for p in comp.instructions.values() if p.opcode == "parameter"
    )
    return read + _written(comp, comp.root)
