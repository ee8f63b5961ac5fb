"""How much of its peak a chip reaches: the per-chip terms and the shape dependence.

Definition: a matmul of ``m`` streamed rows in ``dtype`` runs at

    ``peak_flops[dtype] * matmul[dtype] * rows_efficiency(m)``

(on top of the MXU tile padding the roofline already charges), a streaming op moves
HBM bytes at ``hbm * bandwidth`` and a vector op runs at most at the chip's
``vector`` rate. ``matmul``, ``hbm`` and ``vector`` are the ``efficiency:`` block of a
chip file (each with a source and a grade); :class:`EfficiencyTerms` holds them, and
:data:`IDEAL` is the roofline itself (every term 1, no shape term, no vector bound).

Takeaway: the fp8/bf16 speed-up of a matmul is ``2 * matmul[fp8] / matmul[bf16]`` on a
chip whose fp8 peak is twice its bf16 peak, not the peak ratio.

Worked example: an 8192^3 bf16 matmul on Ironwood (``matmul.bf16 = 0.83``) runs at
``2307e12 * 0.83 * 8192 / (8192 + 256) = 1857 TFLOP/s``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tpusim.config.chip import ChipSpec

MATMUL_HALF_ROWS = 256
"""Streamed rows at which a matmul reaches half its large-matmul rate (shape term).

Fitted on the AI-Hypercomputer/accelerator-microbenchmarks Ironwood bf16 GEMM sweep
(``Ironwood/Ironwood_Microbenchmarks_readme.md``, "GEMM Results", m = n = k): with
``matmul.bf16 = 0.83`` and the 0.5 us op overhead, ``m / (m + 256)`` reproduces the
published 892.9, 950.1 and 956.4 TFLOP/s per device at 4096, 16384 and 32768 within
1%. The 1024 and 2048 points (349.7, 679.3 TFLOP/s) are dominated by the per-call
launch time an isolated benchmarked call pays and a pipelined program hides; the
model is 1.9x and 1.2x faster there. Which dimension carries the term is an
assumption (the sweep moves all three together): the streamed rows, as the weight
tile's load and the MXU pipeline fill are amortised over them, so decode-sized
matmuls stay memory-bound. Grade: derived (constant), assumption (form).
"""


def rows_efficiency(m: int) -> float:
    """The shape term of a matmul streaming ``m`` rows: ``m / (m + MATMUL_HALF_ROWS)``."""
    return m / (m + MATMUL_HALF_ROWS)


@dataclass(frozen=True)
class EfficiencyTerms:
    """Fractions of peak a chip reaches: ``matmul`` per dtype (a dtype not given runs
    at 1.0), ``hbm`` of the HBM bandwidth, ``vector_flops`` the vector unit's bound in
    FLOP/s (None: no bound), ``shape`` whether :func:`rows_efficiency` applies."""

    matmul: dict[str, float] = field(default_factory=dict)
    hbm: float = 1.0
    vector_flops: float | None = None
    shape: bool = True

    def matmul_fraction(self, dtype: str) -> float:
        """The fraction of ``dtype``'s MXU peak a large, well-tiled matmul reaches
        (fp32 without a term of its own takes bf16's, as it runs at the bf16 rate)."""
        if dtype == "fp32" and dtype not in self.matmul:
            dtype = "bf16"
        return self.matmul.get(dtype, 1.0)

    def rows(self, m: int) -> float:
        """The shape term for ``m`` streamed rows (1.0 when ``shape`` is off)."""
        return rows_efficiency(m) if self.shape else 1.0


IDEAL = EfficiencyTerms(shape=False)
"""The roofline: every term 1, no shape term, no vector bound."""


def chip_terms(chip: ChipSpec) -> EfficiencyTerms:
    """The efficiency terms ``chip``'s file gives (its ``efficiency:`` block), with the
    shape term; :data:`IDEAL` for a chip without the block."""
    spec = chip.efficiency
    if spec is None:
        return IDEAL
    matmul = {str(d): f for d, f in spec.matmul.items()}
    return EfficiencyTerms(matmul=matmul, hbm=spec.hbm, vector_flops=spec.vector_flops)
