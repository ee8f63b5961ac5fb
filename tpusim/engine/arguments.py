"""The Python API's arguments checked at the door, as the command line checks its
flags: a system, an op, a size and a collective's options of the wrong type or out of
range is one :class:`~tpusim.errors.InputError` naming the argument, never an
AttributeError from deep inside (``tpusim.Session`` and
:func:`~tpusim.engine.simulate_collective` call :func:`collective_arguments`)."""

from __future__ import annotations

import numbers
import os
from decimal import Decimal

from tpusim import units
from tpusim.collectives import fewest_sends_per_chip
from tpusim.collectives.offload import OnChipModel
from tpusim.config.limits import whole_bytes_problem
from tpusim.config.loader import System, load_system
from tpusim.engine.settings import CollectiveOptions
from tpusim.errors import InputError
from tpusim.vocabulary import OPS, Op

__all__ = ["collective_arguments", "op_of", "size_of", "system_of"]


def collective_arguments(
    op: object,
    size: object,
    options: object,
    onchip: object,
    system_name: str,
    num_chips: int,
) -> tuple[Op, float, CollectiveOptions]:
    """``(op, size in bytes, options)`` checked (options None: the defaults), and the
    collective within its fidelity's work limit on a system of ``num_chips``; raises
    InputError naming the argument."""
    op, size_bytes = op_of(op), size_of(size)
    options = CollectiveOptions() if options is None else options  # the defaults
    if not isinstance(options, CollectiveOptions):
        raise InputError(f"options: expected a CollectiveOptions, got {options!r}")
    if onchip is not None and not isinstance(onchip, OnChipModel):
        raise InputError(f"onchip: expected an OnChipModel or None, got {onchip!r}")
    chips = min(options.chips or num_chips, num_chips)
    sends = fewest_sends_per_chip(op, chips, options.algorithm)
    problem = options.network.work_problem(chips, size_bytes, sends)
    if problem is not None:
        raise InputError(f"{system_name}: {problem}")
    return op, size_bytes, options


def system_of(system: object) -> System:
    """The system ``system`` names or is; InputError for another type."""
    if isinstance(system, System):
        return system
    if isinstance(system, os.PathLike):
        system = os.fspath(system)
    if not isinstance(system, str):
        raise InputError(
            f"system: expected a System, a shipped system name or a YAML path, got {system!r}"
        )
    return load_system(system)


def op_of(op: object) -> Op:
    """``op`` if it names a collective; InputError naming the choices."""
    if not isinstance(op, str) or op not in OPS:
        raise InputError(f"op: expected one of {', '.join(OPS)}, got {op!r}")
    return op  # type: ignore[return-value]


def size_of(size: object) -> float:
    """``size`` in bytes (a number, or a string with a unit); InputError unless a whole
    number of bytes in (0, MAX_BYTES]."""
    if isinstance(size, str):
        try:
            value = units.parse_bytes(size)
        except ValueError as exc:
            raise InputError(f"size {exc}") from None
    elif isinstance(size, (numbers.Real, Decimal)) and not isinstance(size, bool):
        value = float(size)
    else:
        raise InputError(
            f"size: expected a number of bytes or a size such as '1 GiB', got {size!r}"
        )
    problem = whole_bytes_problem(value)
    if problem is not None:
        raise InputError(f"size: {problem}")
    return value
