"""Bytes in use in one chip's HBM and SRAM, against the capacities of its spec.

A plain counter rather than a SimPy ``Container``: an allocation never waits for
memory to be freed, so a program that does not fit is an error
(:class:`OutOfMemoryError`), not a queue.
"""

from __future__ import annotations

from tpusim.config.chip import ChipSpec
from tpusim.errors import SimulationError
from tpusim.hardware.costs import MEMORIES, Memory
from tpusim.units import format_bytes


class OutOfMemoryError(SimulationError):
    """An allocation that would take a chip's memory past its capacity.

    The message names the chip (and its index, if given), the memory tier, the bytes
    needed (already in use plus requested) and the bytes the tier holds.
    """

    def __init__(
        self,
        chip: str,
        memory: Memory,
        in_use_bytes: float,
        requested_bytes: float,
        capacity_bytes: float,
        chip_index: int | None = None,
        name: str = "",
    ):
        self.chip, self.chip_index, self.memory = chip, chip_index, memory
        self.needed_bytes = in_use_bytes + requested_bytes
        self.available_bytes = capacity_bytes
        where = f"chip {chip}" + (f" #{chip_index}" if chip_index is not None else "")
        what = f" for '{name}'" if name else ""
        super().__init__(
            f"out of memory on {where}: {memory.upper()} needs "
            f"{format_bytes(self.needed_bytes)} ({self.needed_bytes:.0f} B = "
            f"{format_bytes(in_use_bytes)} in use + {format_bytes(requested_bytes)}{what}) "
            f"but has {format_bytes(capacity_bytes)} ({capacity_bytes:.0f} B)"
        )


class MemoryTracker:
    """Named allocations in one chip's memories; sizes in bytes.

    ``chip_index`` (optional) identifies the chip in error messages. Names are unique
    across both tiers while live.
    """

    def __init__(self, chip: ChipSpec, chip_index: int | None = None):
        self.chip = chip
        self.chip_index = chip_index
        self._live: dict[str, tuple[Memory, float]] = {}
        self._used_bytes: dict[Memory, float] = dict.fromkeys(MEMORIES, 0.0)
        self._peak_bytes: dict[Memory, float] = dict.fromkeys(MEMORIES, 0.0)

    def capacity_bytes(self, memory: Memory = "hbm") -> float:
        """Capacity of ``memory`` from the chip spec, in bytes."""
        _check_memory(memory)
        return (self.chip.hbm if memory == "hbm" else self.chip.sram).capacity_bytes

    def used_bytes(self, memory: Memory = "hbm") -> float:
        """Bytes of ``memory`` held by live allocations."""
        _check_memory(memory)
        return self._used_bytes[memory]

    def peak_bytes(self, memory: Memory = "hbm") -> float:
        """Highest ``used_bytes(memory)`` seen so far."""
        _check_memory(memory)
        return self._peak_bytes[memory]

    def allocate(self, name: str, bytes: float, memory: Memory = "hbm") -> None:
        """Hold ``bytes`` of ``memory`` under ``name``.

        Raises OutOfMemoryError (and allocates nothing) past the capacity, ValueError
        for a live name, negative bytes or an unknown memory.
        """
        _check_memory(memory)
        if name in self._live:
            raise ValueError(f"allocation '{name}' is already live on chip {self.chip.name}")
        if bytes < 0:
            raise ValueError(f"allocation '{name}' has negative size {bytes} B")
        used = self._used_bytes[memory]
        if used + bytes > self.capacity_bytes(memory):
            raise OutOfMemoryError(
                self.chip.name,
                memory,
                used,
                bytes,
                self.capacity_bytes(memory),
                chip_index=self.chip_index,
                name=name,
            )
        self._live[name] = (memory, bytes)
        self._used_bytes[memory] = used + bytes
        self._peak_bytes[memory] = max(self._peak_bytes[memory], used + bytes)

    def free(self, name: str) -> None:
        """Release the allocation ``name``; KeyError if it is not live."""
        try:
            memory, nbytes = self._live.pop(name)
        except KeyError:
            raise KeyError(f"no live allocation '{name}' on chip {self.chip.name}") from None
        self._used_bytes[memory] -= nbytes


def _check_memory(memory: str) -> None:
    if memory not in MEMORIES:
        raise ValueError(f"unknown memory '{memory}' (choose from {', '.join(MEMORIES)})")
