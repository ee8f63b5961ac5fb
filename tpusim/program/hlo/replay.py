"""Put a lowered HLO program on a system's chips: ``replay_program``.

A chip may run several devices of the module (Ironwood's two TensorCores are two JAX
devices on one chip): each chip then runs every op of its devices, the same SPMD ops,
so its compute ops do ``devices_per_chip`` times the work; a collective's groups
become groups of distinct chips, its devices on one chip combining on the chip first
(all-gather, reduce-scatter and all-reduce keep their nccl-tests size, which is a
per-group figure; all-to-all and collective-permute, sized per device, carry the
chip's devices' bytes together). A collective whose every group lies on one chip
moves its bytes through HBM (an ``elementwise`` op of its size).
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from tpusim.program.hlo.module import HloModule
from tpusim.program.ir import Op, Program, ProgramError

Groups = tuple[tuple[int, ...], ...]
#: Collectives whose nccl-tests size is per device, so a chip sends its devices' sum.
_PER_DEVICE_SIZE = frozenset({"all-to-all", "collective-permute"})


def replay_program(
    module: HloModule,
    program: Program,
    num_chips: int,
    device_chips: list[int] | None = None,
    clock_hz: float | None = None,
) -> Program:
    """``program`` (as :func:`~tpusim.program.hlo.lower.hlo_to_program` made it from
    ``module``, collective groups in device ids) with its groups on chips, for the engine.

    Device ``d`` of the module runs on chip ``d`` of the system (the order
    ``jax.devices()`` lists TPU chips in, x fastest), or on ``device_chips[d]``, where
    every chip named runs the same number of devices (see the module doc).
    A collective over all devices (``replica_groups={}``) gets one group of every
    device; a collective-permute's source-target pairs become groups of two chips
    exchanging data (each pair costed as a two-way exchange, an upper bound).
    With ``clock_hz`` every compute op XLA estimated (``xla_cycles``) takes its cycles
    over the clock as its time (``fixed_s``: XLA's op costs instead of tpusim's; the
    chip's devices run on their own TensorCores at once, so the time is one device's).
    Only the module's device count and file name are read, so any call order works.
    Raises ProgramError, naming the file, when the module needs more chips than the
    system has or the device order is not a list of chips each named equally often.
    """
    chips = _device_chips(module, num_chips, device_chips)
    per_chip = len(chips) // len(set(chips))
    everyone = (tuple(range(len(chips))),)

    def on_chips(groups: Groups) -> Groups:
        placed = (tuple(dict.fromkeys(chips[d] for d in group)) for group in groups)
        return tuple(dict.fromkeys(placed))

    ops = tuple(_placed(op, on_chips, everyone, per_chip) for op in program.ops)
    if clock_hz is not None:
        ops = tuple(_timed(op, clock_hz) for op in ops)
    return dataclasses.replace(program, ops=ops)


def _timed(op: Op, clock_hz: float) -> Op:
    """``op`` timed by XLA's estimate when it has one (a compute op), else as it is."""
    if op.xla_cycles <= 0 or op.kind == "collective":
        return op
    return dataclasses.replace(op, fixed_s=op.xla_cycles / clock_hz)


def _placed(op: Op, on_chips, everyone: Groups, per_chip: int) -> Op:  # type: ignore[no-untyped-def]
    if op.kind == "collective":
        groups = on_chips(op.groups or everyone)
        size = op.size_bytes * (per_chip if op.collective in _PER_DEVICE_SIZE else 1)
        moving = tuple(g for g in groups if len(g) > 1)  # a chip sending to itself: HBM
        if not moving:
            return Op(op.name, "elementwise", op.after, bytes=size * per_chip)
        return dataclasses.replace(op, groups=moving, size_bytes=size)
    return _scaled(op, per_chip) if per_chip > 1 else op


def _scaled(op: Op, times: int) -> Op:
    """``op`` doing ``times`` its work (a chip running ``times`` devices' copies)."""
    if op.kind == "matmul":
        return dataclasses.replace(op, batch=op.batch * times)
    fields = ("bytes", "mxu_flops", "padded_flops", "vector_ops")
    return dataclasses.replace(op, **{f: getattr(op, f) * times for f in fields})


def _device_chips(module: HloModule, num_chips: int, device_chips: list[int] | None) -> list[int]:
    """The chip of each device; ProgramError ``file:1: ...`` if it cannot be."""
    devices = module.num_devices
    if devices > num_chips and device_chips is None:
        raise ProgramError(
            f"{module.file}:{module.line}: the module runs on {devices} devices but the "
            f"system has {num_chips} chips"
        )
    chips = list(range(devices)) if device_chips is None else list(device_chips)
    counts = set(Counter(chips).values())
    if len(chips) != devices or len(counts) > 1 or not all(0 <= c < num_chips for c in chips):
        raise ProgramError(
            f"{module.file}:{module.line}: the device order must list {devices} chips "
            f"in 0..{num_chips - 1}, each as often as the others"
        )
    return chips
