"""Who reduces, and what each collective step costs on the chip.

Every step of a collective pays, after its data has arrived, an on-chip cost:

    step_time = step_overhead_s + reduce_bytes / reduce_bandwidth_Bps

- ``tensorcore``: the TensorCore's vector unit reduces. A step pays
  ``TENSORCORE_STEP_OVERHEAD_S`` (issue, synchronisation, DMA set-up) and the
  reduction streams two operands in and one result out of HBM, so it runs at
  HBM bandwidth / 3.
- ``sparsecore``: SparseCores run the collective (XLA's SparseCore offload on
  v5p and later): same step overhead, but the reduction of one chunk overlaps the
  transfer of the next, so it adds nothing.
- ``cae`` (TPU 8i): the Collectives Acceleration Engine reduces in line, and its
  step overhead is the TensorCore's divided by ``CAE_LATENCY_GAIN`` = 5, Google's
  "reducing on-chip latency by up to 5x".

``TENSORCORE_STEP_OVERHEAD_S`` = 1.5 us is derived from the scaling book's
measured v5e all-gather: 3 ring steps predicted at 3 us (1 us per hop), measured
"closer to 8 us", i.e. about 1.7 us of on-chip cost per step. All three numbers
are assumptions (nothing finer is published); pass your own :class:`OnChipModel`
to change them, or ``engine="tensorcore"`` to switch the offload off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from tpusim.collectives.base import Step
from tpusim.config.chip import ChipSpec
from tpusim.vocabulary import Engine

TENSORCORE_STEP_OVERHEAD_S = 1.5e-6
CAE_LATENCY_GAIN = 5.0
REDUCE_TRAFFIC_PER_BYTE = 3.0  # read two operands, write one result


@dataclass(frozen=True)
class OnChipModel:
    """Per-step on-chip cost of a collective: fixed overhead (s) plus the reduction
    of ``reduce_bytes`` at ``reduce_bandwidth_Bps`` (inf: overlapped with transfers)."""

    engine: Engine | Literal["none"]
    step_overhead_s: float
    reduce_bandwidth_Bps: float

    def step_time_s(self, step: Step) -> float:
        reduce = step.reduce_bytes / self.reduce_bandwidth_Bps if step.reduce_bytes else 0.0
        return self.step_overhead_s + reduce

    @staticmethod
    def none() -> OnChipModel:
        """No on-chip cost at all: the pure network, for comparing with closed forms."""
        return OnChipModel("none", 0.0, math.inf)

    @staticmethod
    def for_chip(chip: ChipSpec, engine: Engine | Literal["auto"] = "auto") -> OnChipModel:
        """The model of ``engine`` on ``chip``; ``auto`` picks the CAE if the chip has one,
        else SparseCores if it has any, else the TensorCore."""
        if engine == "auto":
            has_sc = chip.sparsecores is not None and chip.sparsecores.count > 0
            engine = "cae" if chip.cae is not None else "sparsecore" if has_sc else "tensorcore"
        if engine == "cae" and chip.cae is None:
            raise ValueError(f"chip {chip.name} has no CAE")
        if engine == "sparsecore" and (chip.sparsecores is None or chip.sparsecores.count == 0):
            raise ValueError(f"chip {chip.name} has no SparseCores")
        if engine == "tensorcore":
            hbm_bw = chip.hbm.bandwidth_Bps or math.inf
            return OnChipModel(engine, TENSORCORE_STEP_OVERHEAD_S, hbm_bw / REDUCE_TRAFFIC_PER_BYTE)
        overhead = TENSORCORE_STEP_OVERHEAD_S / (CAE_LATENCY_GAIN if engine == "cae" else 1.0)
        return OnChipModel(engine, overhead, math.inf)
