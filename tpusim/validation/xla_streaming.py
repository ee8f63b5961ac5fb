"""The ``hbm`` cost term from XLA's own TPU cost model: the share of a device's nominal
HBM bandwidth at which XLA's estimates stream the elementwise fusions of the shipped
compiled steps (``configs/measurements/compiled/``), not fitted on any measured step.

For each compiled program, over its elementwise ops that XLA estimated (the
``estimated_cycles`` of their ``backend_config``) and that move HBM bytes (gathers, the
``gather_hbm`` term's, left out): ``share = bytes / (cycles / clock) / (HBM bandwidth /
devices per chip)``, the two TensorCores of an Ironwood chip (two JAX devices) sharing
its HBM evenly (an assumption). The term is the median share over the programs
(:func:`derived_hbm_share`); ``tools/xla_hbm_share.py`` prints each. XLA's estimate of
a fusion includes its vector work where that bounds it, so the share is XLA's average
streaming rate of whole fusions, which is what the term stands for in tpusim's model
(the ``vector_ops_per_element`` term, fitted, adds what a chip's vector rate bounds).
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

from tpusim.config.loader import load_chip
from tpusim.program.hlo.artifact import load_compiled
from tpusim.validation.compiled import CLOCK_HZ, CompiledRecord, compiled_records
from tpusim.validation.workloads import load_workload_cases


@dataclass(frozen=True)
class StreamingShare:
    """One compiled program's elementwise ops as XLA estimates them: their count, HBM
    bytes and seconds per device, and the share of the device's HBM bandwidth."""

    case: str
    chip: str
    ops: int
    bytes: float
    xla_s: float
    share: float


def streaming_share(record: CompiledRecord, chip_name: str) -> StreamingShare:
    """``record``'s program on ``chip_name`` (see the module docstring)."""
    _, program, artifact = load_compiled(record.artifact)
    ops = [
        op
        for op in program.ops
        if op.kind == "elementwise" and op.xla_cycles > 0 and op.memory == "hbm" and not op.gather
    ]
    nbytes = sum(op.bytes for op in ops)
    seconds = sum(op.xla_cycles for op in ops) / CLOCK_HZ[chip_name]
    chip_Bps = load_chip(chip_name).hbm.bandwidth_Bps
    if chip_Bps is None:
        raise ValueError(f"{chip_name}: the chip file gives no HBM bandwidth")
    bandwidth_Bps = chip_Bps / artifact.devices_per_chip
    return StreamingShare(
        record.case, chip_name, len(ops), nbytes, seconds, nbytes / seconds / bandwidth_Bps
    )


def streaming_shares() -> list[StreamingShare]:
    """:func:`streaming_share` of every shipped compiled program, by case id."""
    chips = {case.id: case.spec.chip for case in load_workload_cases()}
    return [streaming_share(r, chips[case]) for case, r in sorted(compiled_records().items())]


def derived_hbm_share(shares: list[StreamingShare]) -> float:
    """The ``hbm`` term: the median of the programs' shares."""
    return float(median(s.share for s in shares))
