"""The collectives an HLO module runs, with sizes in the nccl-tests convention.

``all-reduce``, ``all-gather``, ``reduce-scatter``, ``all-to-all``,
``collective-permute``, their ``-start``/``-done`` pairs and an ``async-start``
wrapping one are recorded as :class:`HloCollective`: all-reduce, all-to-all and
collective-permute by their operand bytes, all-gather by its gathered output bytes,
reduce-scatter by its full input bytes (a tuple-shaped collective counts all its
elements); with the group size and the explicit device groups. An async pair counts
once. A collective inside a ``while`` body counts once per iteration.

Collectives are found in every computation that runs from ENTRY: loop bodies and
conditions, the first branch of a conditional, called, fused and async-wrapped
computations (:data:`RUNS`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from tpusim.program.hlo.callgraph import Frame, Policy, Site, has_trip_count, walk
from tpusim.program.hlo.cost import operand_bytes
from tpusim.program.hlo.custom_calls import unknown_custom_call
from tpusim.program.hlo.devices import check_groups, check_ids, check_pairs, declared_devices
from tpusim.program.hlo.fusions import computation_role
from tpusim.program.hlo.opcodes import KNOWN_OPS, collective_kind
from tpusim.program.hlo.parse import Computation, Instruction
from tpusim.program.hlo.replica_groups import parse_replica_groups, with_device_ids
from tpusim.program.ir import ProgramError

#: The calls whose computations run when the module runs (what collectives count).
RUNS = Policy(frozenset({"loop_body", "loop_condition", "branch", "call", "fused", "async"}))

Groups = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class HloCollective:
    """One collective instruction (an async pair counts once); ``count`` = executions."""

    name: str
    kind: str
    size_bytes: float
    group_size: int
    groups: Groups
    is_async: bool
    computation: str
    line: int
    count: int = 1


def collective_sites(computations: Mapping[str, Computation], entry: str) -> list[Site]:
    """The collective instructions that run from ``entry``, in program order; of the
    copies of one collective that async collective fusions hold (fused collectives of
    one ``channel_id`` in one run of the computation that holds the fusions, or in a
    computation it runs, such as the windowed einsum loops XLA puts between a layer's
    all-gather start and its done, :mod:`.fusions`), the first. (Unfused collectives
    may share a channel id, as CPU modules' do: each counts.)"""
    seen: set[tuple[str, str]] = set()
    out = []
    for site in walk(computations, entry, RUNS):
        if not collective_kind(site.instruction.opcode):
            continue
        channel = site.instruction.attrs.get("channel_id")
        if channel is not None and site.frame.role == "fused":
            owner = _owner(site.frame)
            if any((frame.prefix, channel) in seen for frame in _enclosing(owner)):
                continue
            seen.add((owner.prefix, channel))
        out.append(site)
    return out


def _enclosing(frame: Frame) -> list[Frame]:
    """``frame`` and the frames that call it, innermost first (a windowed einsum loop's
    body, then the layer body that runs the loop, ...)."""
    out = [frame]
    while frame.caller is not None:
        frame = frame.caller.frame
        out.append(frame)
    return out


def _owner(frame: Frame) -> Frame:
    """The frame whose instructions hold ``frame``'s fusion or async op (itself if none)."""
    while frame.role in ("fused", "async") and frame.caller is not None:
        frame = frame.caller.frame
    return frame


def explicit_groups(site: Site, file: str, declared: int | None = None) -> list[list[int]]:
    """Device groups (or a permute's source-target pairs) as written, ``[]`` for ``{}``.

    Raises ProgramError ``file:line`` if unreadable or not valid device groups (see
    :mod:`.devices`; ids checked against ``declared`` devices when given).
    """
    ins = site.instruction
    try:
        if ins.opcode.startswith("collective-permute"):
            groups = parse_replica_groups(ins.attrs.get("source_target_pairs", "{}"))
            check_pairs(groups)
        else:
            text = ins.attrs.get("replica_groups", "{}")
            if "device_ids" in ins.attrs:
                text = with_device_ids(text, ins.attrs["device_ids"])
            groups = parse_replica_groups(text)
            check_groups(groups)
        check_ids(groups, declared)
    except ValueError as exc:
        raise ProgramError(f"{file}:{ins.line}: {ins.name}: {exc}") from None
    return groups


def num_devices(attrs: Mapping[str, str], sites: list[Site], file: str, line: int = 1) -> int:
    """Devices the module runs on: ``num_partitions`` x ``replica_count`` when declared,
    else the highest device id a collective names + 1 (1 when none).

    Raises ProgramError ``file:line`` (the header's ``line`` for a bad declaration).
    """
    try:
        declared = declared_devices(attrs)
    except ValueError as exc:
        raise ProgramError(f"{file}:{line}: {exc}") from None
    highest = max(
        (d for site in sites for g in explicit_groups(site, file, declared) for d in g),
        default=-1,
    )
    return declared if declared is not None else highest + 1 or 1


def collective_record(site: Site, devices: int, file: str) -> HloCollective:
    """The :class:`HloCollective` of a collective site on a module of ``devices`` devices."""
    ins, frame = site.instruction, site.frame
    found = collective_kind(ins.opcode)
    if found is None:
        raise ValueError(f"'{ins.name}' ({ins.opcode}) is not a collective")
    kind, is_start = found
    is_async = (
        is_start
        or frame.role == "async"
        or (frame.role == "fused" and computation_role(frame.computation) == "collective-start")
    )
    groups = explicit_groups(site, file)
    if kind == "collective-permute":
        group_size = len({d for g in groups for d in g}) if groups else 1
    else:
        groups = groups or [list(range(devices))]
        group_size = len(groups[0]) if groups[0] else devices
    size = _size_bytes(frame.computation, ins, kind, is_async, group_size)
    as_tuples = tuple(tuple(g) for g in groups)
    return HloCollective(
        name=ins.name,
        kind=kind,
        size_bytes=size,
        group_size=group_size,
        groups=as_tuples,
        is_async=is_async,
        computation=frame.computation.name,
        line=ins.line,
        count=site.num_executions,
    )


def _size_bytes(
    comp: Computation, ins: Instruction, kind: str, is_async: bool, group_size: int
) -> float:
    """nccl-tests size: all-gather the gathered output, the others their operands."""
    operands = operand_bytes(comp, ins)
    if kind == "all-gather":
        return float(operands * group_size if is_async else ins.shape.bytes)
    return float(operands)


def unknown_ops(computations: Mapping[str, Computation], entry: str) -> Counter[str]:
    """Opcodes outside :data:`~tpusim.program.hlo.opcodes.KNOWN_OPS` that run, custom
    calls whose work the module does not say (as ``custom-call:<target>``, see
    :mod:`.custom_calls`) and ``while`` loops of unknown trip count, counted once per
    instruction however often it runs."""
    seen: set[tuple[str, str]] = set()
    out: Counter[str] = Counter()
    for site in walk(computations, entry, RUNS):
        ins, comp = site.instruction, site.frame.computation
        key = (comp.name, ins.name)
        label = ins.opcode if ins.opcode not in KNOWN_OPS else unknown_custom_call(comp, ins)
        if ins.opcode == "while" and not has_trip_count(ins):
            label = "while (trip count unknown, run once)"
        if label is not None and key not in seen:
            seen.add(key)
            out[label] += 1
    return out
