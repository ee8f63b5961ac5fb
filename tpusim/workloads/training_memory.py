"""Whether a training step's peak stage fits in a chip's HBM, through the one memory
checker (:class:`~tpusim.hardware.MemoryTracker`), with a message that says by how
much it does not and what takes the memory."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tpusim.errors import SimulationError
from tpusim.hardware import MemoryTracker
from tpusim.hardware.memory import OutOfMemoryError
from tpusim.program.builders.memory import peak_stage
from tpusim.units import format_bytes

if TYPE_CHECKING:
    from tpusim.config.chip import ChipSpec
    from tpusim.program.builders.training import TrainingStep


def check_fits(step: TrainingStep, chip: ChipSpec) -> None:
    """Allocate the peak stage's weights, optimiser state, gradients, activations and
    buffers on a :class:`MemoryTracker` of ``chip``; raises :class:`SimulationError`
    (exit 1) naming the stage, the shortfall and every part when they do not fit."""

    peak = peak_stage(step)
    tracker = MemoryTracker(chip)
    try:
        for part, nbytes in peak.parts().items():
            tracker.allocate(part, nbytes)
    except OutOfMemoryError:
        capacity = tracker.capacity_bytes()
        parts = ", ".join(f"{part} {format_bytes(b)}" for part, b in peak.parts().items())
        held = step.schedule.in_flight(peak.stage)
        raise SimulationError(
            f"out of memory on chip {chip.name}: training step stage {peak.stage} needs "
            f"{format_bytes(peak.total_bytes)} of HBM per chip but has "
            f"{format_bytes(capacity)} (short by {format_bytes(peak.total_bytes - capacity)}): "
            f"{parts} ({held} microbatch chunks in flight, {step.args.pipeline})"
        ) from None
