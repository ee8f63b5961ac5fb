"""How much of its peaks a chip reaches: a small physical model per generation whose
few terms are shared by every generation.

Definition. A chip gives its published peaks (FLOP/s per dtype, HBM bytes/s), its MXU
size ``S`` and its vector unit's rate ``V``; the shared terms
(``configs/cost_terms.yaml``, :mod:`tpusim.config.cost_terms`) say how much of them
XLA's kernels reach. Then:

* a matmul streaming ``m`` rows in ``dtype`` runs its tile-padded FLOPs at
  ``peak[dtype] * mxu * m / (m + rows_half_tiles * S)`` (the systolic array's fill
  and drain amortised over the rows; a 128-wide MXU fills in half the rows of a
  256-wide one), a grouped (megablox) matmul at ``grouped_matmul`` times that, and an
  8-bit one first spends ``quantize_ops_per_element`` vector operations on each operand
  element (amax, scale, round, cast: MaxText's AQT/fp8 quantizes on the fly);
* a streaming op moves HBM bytes at ``hbm * bandwidth``, a row gather or scatter (MoE
  permutes) at ``gather_hbm * bandwidth``, and an elementwise op also does
  ``vector_ops_per_element`` vector operations per element (2-byte elements), so on a
  chip whose vector rate is low against its HBM bandwidth it is vector bound;
* every op pays ``op_overhead_s``; the memory roofline ``bytes / bandwidth`` bounds a
  skinny matmul from below.

Takeaway: the terms are the same numbers on every chip; what differs between
generations is the ratio of their peaks. Ironwood's bf16 peak is 148 times its vector
rate, v5p's 32 times, so the same elementwise and quantization work costs Ironwood a
larger share of its step, which is why whole-model MFU falls from v5p to Ironwood, and
why fp8 gains much less than its 2x peak.

Worked example: an 8192^3 bf16 matmul on Ironwood (the shipped ``mxu = 0.8235``,
``rows_half_tiles = 1``) runs at ``2307e12 * 0.8235 * 8192 / (8192 + 256) = 1842
TFLOP/s``.

:data:`IDEAL` is the roofline itself (every term 1, no shape term, no vector bound);
a chip file without an ``efficiency:`` block runs at it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tpusim.config.chip import ChipSpec
from tpusim.config.cost_terms import shared_terms

EIGHT_BIT = frozenset({"fp8", "int8"})
"""Dtypes MaxText quantizes on the fly (activations and weights stay bf16 in HBM). A
served checkpoint stores its weights quantized instead (:mod:`tpusim.hardware.quantized`,
a matmul with ``weights_stored``)."""

ELEMENT_BYTES = 2.0
"""Bytes of one element of an elementwise op (bf16 activations: the vector work of an
fp32 op, the optimiser's, is counted at twice its element count, an assumption that
matters little since those ops are HBM bound)."""


@dataclass(frozen=True)
class EfficiencyTerms:
    """The terms one chip runs at (module docstring): ``matmul`` per dtype (a dtype
    not given takes ``mxu``), the HBM fractions, ``vector_flops`` the vector rate
    (None: no bound), the vector work per element, the grouped-matmul fraction,
    ``rows_half`` the shape term's half-rate rows (0: no shape term)."""

    matmul: dict[str, float] = field(default_factory=dict)
    mxu: float = 1.0
    hbm: float = 1.0
    gather_hbm: float = 1.0
    vector_flops: float | None = None
    vector_ops_per_element: float = 0.0
    quantize_ops_per_element: float = 0.0
    grouped_matmul: float = 1.0
    rows_half: float = 0.0

    def matmul_fraction(self, dtype: str) -> float:
        """The fraction of ``dtype``'s MXU peak a large, well-tiled matmul reaches
        (fp32 without a term of its own takes bf16's, as it runs at the bf16 rate)."""
        if dtype == "fp32" and dtype not in self.matmul:
            dtype = "bf16"
        return self.matmul.get(dtype, self.mxu)

    def rows(self, m: int) -> float:
        """The shape term for ``m`` streamed rows: ``m / (m + rows_half)``."""
        return m / (m + self.rows_half) if self.rows_half else 1.0


IDEAL = EfficiencyTerms()
"""The roofline: every term 1, no shape term, no vector bound."""


def chip_terms(chip: ChipSpec) -> EfficiencyTerms:
    """The terms ``chip`` runs at: the shipped shared ones (``configs/cost_terms.yaml``;
    :func:`~tpusim.config.cost_terms.with_terms` sets others on a chip) where its
    ``efficiency:`` block does not set them; :data:`IDEAL` for a chip without the
    block."""
    spec = chip.efficiency
    if spec is None:
        return IDEAL
    base = shared_terms()

    def own(value: float | None, default: float) -> float:
        return default if value is None else value

    return EfficiencyTerms(
        matmul={str(d): f for d, f in spec.matmul.items()},
        mxu=base.mxu,
        hbm=own(spec.hbm, base.hbm),
        gather_hbm=own(spec.gather_hbm, base.gather_hbm),
        vector_flops=spec.vector_flops,
        vector_ops_per_element=own(spec.vector_ops_per_element, base.vector_ops_per_element),
        quantize_ops_per_element=own(spec.quantize_ops_per_element, base.quantize_ops_per_element),
        grouped_matmul=own(spec.grouped_matmul, base.grouped_matmul),
        rows_half=base.rows_half_tiles * chip.tensorcores.mxu_size,
    )
