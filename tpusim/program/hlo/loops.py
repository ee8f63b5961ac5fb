"""Trip counts of ``while`` loops whose ``backend_config`` does not say them.

XLA's TPU backend prints ``"known_trip_count":{"n":"N"}`` on some loops only (the
modules ``libtpu`` 0.0.4x compiles for a layer scan have none). As XLA's own
``WhileLoopAnalysis`` does, the count is read from the induction variable: the
condition's ROOT compares tuple element ``i`` of its parameter with a constant
(``LT``, ``LE``, ``GT``, ``GE``, ``NE``), the loop's initial tuple sets element ``i`` to a
constant, and the body's ROOT tuple sets it to itself plus (or minus) a constant.
Copies, bitcasts and converts between them are looked through. A loop that fits no
such pattern keeps no count (the callers take 1 and name it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from tpusim.program.hlo.parse import Computation, Instruction
from tpusim.program.hlo.syntax import int_list, strip_name

_THROUGH = frozenset({"copy", "bitcast", "convert", "reshape"})
_FLIP = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE", "NE": "NE"}
#: Deepest chain of copies looked through (assumption: XLA leaves a few).
_MAX_CHAIN = 16


def _source(comp: Computation, name: str) -> Instruction | None:
    """The instruction ``name`` stands for, past copies, bitcasts and converts."""
    ins = comp.instructions.get(name)
    for _ in range(_MAX_CHAIN):
        if ins is None or ins.opcode not in _THROUGH or not ins.operands:
            return ins
        ins = comp.instructions.get(ins.operands[0])
    return ins


def _constant(ins: Instruction | None) -> int | None:
    if ins is None or ins.opcode != "constant" or ins.shape.dims:
        return None
    values = int_list(ins.literal)
    return values[0] if len(values) == 1 and ins.literal.strip().lstrip("-").isdigit() else None


def _element(ins: Instruction | None) -> int | None:
    """``i`` of ``get-tuple-element(parameter(0)), index=i``."""
    if ins is None or ins.opcode != "get-tuple-element":
        return None
    index = int_list(ins.attrs.get("index", ""))
    return index[0] if len(index) == 1 else None


def _condition(cond: Computation) -> tuple[int, str, int] | None:
    """(element, direction, limit) of ``element DIRECTION limit``."""
    root = cond.root
    if root.opcode != "compare" or len(root.operands) != 2:
        return None
    direction = root.attrs.get("direction", "")
    lhs, rhs = (_source(cond, o) for o in root.operands)
    if _element(lhs) is not None and _constant(rhs) is not None:
        return _element(lhs), direction, _constant(rhs)  # type: ignore[return-value]
    if _element(rhs) is not None and _constant(lhs) is not None and direction in _FLIP:
        return _element(rhs), _FLIP[direction], _constant(lhs)  # type: ignore[return-value]
    return None


def _step(body: Computation, element: int) -> int | None:
    root = body.root
    if root.opcode != "tuple" or element >= len(root.operands):
        return None
    update = _source(body, root.operands[element])
    if update is None or update.opcode not in ("add", "subtract") or len(update.operands) != 2:
        return None
    a, b = (_source(body, o) for o in update.operands)
    sign = 1 if update.opcode == "add" else -1
    if _element(a) == element and _constant(b) is not None:
        return sign * _constant(b)  # type: ignore[operator]
    if update.opcode == "add" and _element(b) == element and _constant(a) is not None:
        return _constant(a)
    return None


def _initial(caller: Computation, loop: Instruction, element: int) -> int | None:
    init = _source(caller, loop.operands[0]) if loop.operands else None
    if init is None or init.opcode != "tuple" or element >= len(init.operands):
        return None
    return _constant(_source(caller, init.operands[element]))


def _count(start: int, direction: str, limit: int, step: int) -> int | None:
    """Iterations of ``for (i = start; i DIRECTION limit; i += step)``; None for a
    loop that never ends by that test (a step the wrong way, or 0)."""
    up = {"LT": limit - start, "LE": limit - start + 1}
    down = {"GT": start - limit, "GE": start - limit + 1}
    if direction in up and step > 0:
        return max(0, math.ceil(up[direction] / step))
    if direction in down and step < 0:
        return max(0, math.ceil(down[direction] / -step))
    if direction == "NE" and step and (limit - start) % step == 0 and (limit - start) / step >= 0:
        return (limit - start) // step
    return None


def induction_trips(
    computations: Mapping[str, Computation], caller: Computation, loop: Instruction
) -> int | None:
    """The trip count of ``loop`` (a ``while`` in ``caller``) from its induction
    variable, or None when its condition, initial value or step is not found."""
    cond = computations.get(strip_name(loop.attrs.get("condition", "")))
    body = computations.get(strip_name(loop.attrs.get("body", "")))
    found = _condition(cond) if cond is not None else None
    if body is None or found is None:
        return None
    element, direction, limit = found
    start, step = _initial(caller, loop, element), _step(body, element)
    if start is None or step is None:
        return None
    return _count(start, direction, limit, step)


def infer_trip_counts(computations: Mapping[str, Computation]) -> None:
    """Set :attr:`Instruction.inferred_trips` on every ``while`` (in place)."""
    for comp in computations.values():
        for ins in comp.instructions.values():
            if ins.opcode == "while":
                ins.inferred_trips = induction_trips(computations, comp, ins)
