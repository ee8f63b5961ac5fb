"""Put a lowered HLO program on a system's chips: ``replay_program``."""

from __future__ import annotations

import dataclasses

from tpusim.program.hlo.module import HloModule
from tpusim.program.ir import Program, ProgramError

Groups = tuple[tuple[int, ...], ...]


def replay_program(
    module: HloModule, program: Program, num_chips: int, device_chips: list[int] | None = None
) -> Program:
    """``program`` (as :func:`~tpusim.program.hlo.lower.hlo_to_program` made it from
    ``module``, collective groups in device ids) with its groups on chips, for the engine.

    Device ``d`` of the module runs on chip ``d`` of the system (the order
    ``jax.devices()`` lists TPU chips in, x fastest), or on ``device_chips[d]``.
    A collective over all devices (``replica_groups={}``) gets one group of every
    device; a collective-permute's source-target pairs become groups of two chips
    exchanging data (each pair costed as a two-way exchange, an upper bound).
    Only the module's device count and file name are read, so any call order works.
    Raises ProgramError, naming the file, when the module needs more devices than
    the system has chips or the device order is not a list of distinct chips.
    """
    chips = _device_chips(module, num_chips, device_chips)
    everyone = (tuple(range(len(chips))),)

    def on_chips(groups: Groups) -> Groups:
        return tuple(tuple(chips[d] for d in group) for group in groups)

    ops = tuple(
        dataclasses.replace(op, groups=on_chips(op.groups or everyone))
        if op.kind == "collective"
        else op
        for op in program.ops
    )
    return dataclasses.replace(program, ops=ops)


def _device_chips(module: HloModule, num_chips: int, device_chips: list[int] | None) -> list[int]:
    """The chip of each device; ProgramError ``file:1: ...`` if it cannot be."""
    devices = module.num_devices
    if devices > num_chips:
        raise ProgramError(
            f"{module.file}:{module.line}: the module runs on {devices} devices but the "
            f"system has {num_chips} chips"
        )
    chips = list(range(devices)) if device_chips is None else list(device_chips)
    if (
        len(chips) != devices
        or len(set(chips)) != devices
        or not all(0 <= c < num_chips for c in chips)
    ):
        raise ProgramError(
            f"{module.file}:{module.line}: the device order must list {devices} distinct chips "
            f"in 0..{num_chips - 1}"
        )
    return chips
