"""Chip specification: compute units, memories, ICI and DCN of one TPU generation.

YAML keys are the short names users write (``hbm: {capacity: 192 GB}``); the
Python attributes carry their unit (``hbm.capacity_bytes``). Every number in a
shipped chip file has an entry under ``sources:`` keyed by its YAML path.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PositiveInt, field_validator, model_validator

from tpusim.config.limits import MAX_MEMORY_BYTES, MAX_MXU_SIZE, MAX_UNITS_PER_CHIP
from tpusim.config.types import (
    Bandwidth,
    Bytes,
    FlopRate,
    Frozen,
    HopLatency,
    Power,
    Source,
    Time,
)
from tpusim.vocabulary import Dtype, Engine

WraparoundRule = Literal["cubes-4x4x4", "full-axis-16", "always", "never"]

MIN_EFFICIENCY = 0.01
"""Lowest accepted efficiency term (a fraction of a peak): no real op reaches under 1%
of a peak it is costed against, and a smaller value is a slip (0.9 written 0.009) that
would make the simulation run for days. Grade: assumption (an input limit)."""

MAX_COST_TERM_S = 1.0
"""Longest accepted fixed cost of a collective (launch, step sync), in seconds: they
are microseconds on every chip, and a second is a WAN round trip. Grade: assumption."""

Fraction = Annotated[float, Field(ge=MIN_EFFICIENCY, le=1.0)]
"""An efficiency term: a fraction of a peak in [MIN_EFFICIENCY, 1]."""

CostTime = Annotated[Time, Field(le=MAX_COST_TERM_S)]

MAX_OPS_PER_ELEMENT = 1000.0
"""Most vector operations per element a cost term may charge: an elementwise op does a
handful (a norm about ten, a quantization about six); a thousand is a slip that would
make every step vector bound. Grade: assumption (an input limit)."""

OpsPerElement = Annotated[float, Field(ge=0.0, le=MAX_OPS_PER_ELEMENT, allow_inf_nan=False)]
"""Vector-unit operations per element, in [0, MAX_OPS_PER_ELEMENT]."""
"""A collective's fixed cost: a time in [0, MAX_COST_TERM_S] seconds."""


class TensorCoreSpec(Frozen):
    """TensorCores per chip and their matrix units (MXUs of ``mxu_size`` x ``mxu_size``);
    ``megacore``: the chip's TensorCores run as one JAX device (v4, v5p), else each is
    a device of its own (Ironwood, TPU 8i: vLLM's ``--tensor-parallel-size`` and JAX's
    meshes count them)."""

    count: Annotated[int, Field(ge=1, le=MAX_UNITS_PER_CHIP)]
    mxus_per_core: Annotated[int, Field(ge=1, le=MAX_UNITS_PER_CHIP)]
    mxu_size: Annotated[int, Field(ge=1, le=MAX_MXU_SIZE)]
    megacore: bool = False

    @property
    def devices(self) -> int:
        """The JAX devices one chip is: 1 under megacore, else one per TensorCore."""
        return 1 if self.megacore else self.count


class SparseCoreSpec(Frozen):
    """SparseCores (embedding lookups): count per chip and, where known, their layout."""

    count: int = Field(ge=0)
    subcores: PositiveInt | None = None
    lanes: PositiveInt | None = None
    memory_per_subcore_bytes: Bytes | None = Field(None, alias="memory_per_subcore")


class CaeSpec(Frozen):
    """Collectives Acceleration Engine (TPU 8i): offloads reductions of collectives."""

    count: PositiveInt = 1


class MemorySpec(Frozen):
    """One memory tier (HBM or on-chip SRAM): capacity and, where known, bandwidth."""

    capacity_bytes: Annotated[Bytes, Field(le=MAX_MEMORY_BYTES)] = Field(alias="capacity")
    bandwidth_Bps: Bandwidth | None = Field(None, alias="bandwidth")


class IciSpec(Frozen):
    """Inter-chip interconnect: ports, bandwidth of one link in one direction, per-hop latency."""

    ports: PositiveInt
    link_bandwidth_Bps: Bandwidth = Field(alias="link_bandwidth")
    hop_latency_s: HopLatency = Field(alias="hop_latency")
    wraparound_rule: WraparoundRule = "always"


class CollectiveCostSpec(Frozen):
    """On-chip and protocol costs of a collective, separate from the network's per-hop
    latency (``ici.hop_latency``) and link bandwidth.

    - ``launch``: fixed cost once per collective (issue, rendezvous of the chips).
    - ``step_sync``: synchronisation cost once per algorithm step.
    - ``link_efficiency``: fraction of the nominal link bandwidth a collective's transfers
      reach (packet headers, flow control, DMA gaps), in (0, 1].
    - ``offload``: who runs collectives by default: ``sparsecore`` where XLA offloads them
      there by default, ``cae`` on a chip with a Collectives Acceleration Engine, else
      ``tensorcore``.

    Defaults (all graded ``assumption`` in :mod:`tpusim.collectives.offload`) apply to a chip
    file that omits the block; shipped chips give calibrated values with sources.
    """

    launch_s: CostTime = Field(2e-6, alias="launch")
    step_sync_s: CostTime = Field(0.5e-6, alias="step_sync")
    link_efficiency: Fraction = 0.9
    offload: Engine = "tensorcore"


class EfficiencySpec(Frozen):
    """How much of its peaks the chip reaches (:mod:`tpusim.hardware.efficiency`).

    The chip's own number is ``vector`` (its vector unit's rate, a physical figure);
    every other term is shared by all generations and comes from
    ``configs/cost_terms.yaml`` (:mod:`tpusim.config.cost_terms`) unless the chip
    file sets it (a user's chip, or a fit overlay):

    - ``matmul``: per dtype, the fraction of the MXU peak a large, well-tiled matmul
      reaches;
    - ``hbm``: the fraction of the HBM bandwidth streaming ops reach;
    - ``gather_hbm``: the fraction row gathers and scatters (MoE permutes) reach;
    - ``vector_ops_per_element``: vector-unit operations per element an elementwise op
      moves (norms, activations, residuals);
    - ``quantize_ops_per_element``: vector-unit operations per operand element an
      8-bit matmul spends quantizing (amax, scale, round, cast);
    - ``grouped_matmul``: a grouped (megablox) matmul's rate over a dense one's.

    A chip file without the block runs at the roofline (every term 1, no shape term).
    """

    matmul: dict[Dtype, Fraction] = Field(default_factory=dict)
    vector_flops: FlopRate | None = Field(default=None, alias="vector")
    hbm: Fraction | None = None
    gather_hbm: Fraction | None = None
    vector_ops_per_element: OpsPerElement | None = None
    quantize_ops_per_element: OpsPerElement | None = None
    grouped_matmul: Fraction | None = None


class DcnSpec(Frozen):
    """Data-centre network bandwidth per chip (one direction)."""

    bandwidth_Bps: Bandwidth = Field(alias="bandwidth")


class HostSpec(Frozen):
    """The link between a chip and its host's memory (PCIe): bytes per second one way
    per chip, what host offload of activations, parameters and optimiser state moves
    over."""

    bandwidth_Bps: Bandwidth = Field(alias="bandwidth")


class PowerSpec(Frozen):
    """Chip power where published: typical (mean measured) and maximum, in watts."""

    typical_W: Power | None = Field(None, alias="typical")
    max_W: Power | None = Field(None, alias="max")


class ChipSpec(Frozen):
    """A TPU chip generation. Peak FLOP/s per dtype are per chip (all TensorCores)."""

    name: str
    full_name: str = ""
    year: int | None = None
    tensorcores: TensorCoreSpec
    peak_flops: dict[Dtype, FlopRate]
    sparsecores: SparseCoreSpec | None = None
    cae: CaeSpec | None = None
    hbm: MemorySpec
    sram: MemorySpec
    ici: IciSpec
    collectives: CollectiveCostSpec = Field(
        default_factory=lambda: CollectiveCostSpec.model_validate({})
    )
    efficiency: EfficiencySpec | None = None
    dcn: DcnSpec
    host: HostSpec | None = None
    power: PowerSpec | None = None
    sources: dict[str, Source] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _needs_bf16(self) -> ChipSpec:
        if "bf16" not in self.peak_flops:
            raise ValueError("peak_flops must give at least bf16")
        return self

    @field_validator("hbm")
    @classmethod
    def _hbm_bandwidth(cls, hbm: MemorySpec) -> MemorySpec:
        """Every op streams its operands from HBM (the roofline's memory bound): a chip
        without the bandwidth would fail at the first op, so it is refused at load."""
        if hbm.bandwidth_Bps is None:
            raise ValueError("bandwidth is required (every op's memory bound uses it)")
        return hbm

    @model_validator(mode="after")
    def _offload_exists(self) -> ChipSpec:
        offload = self.collectives.offload
        if offload == "cae" and self.cae is None:
            raise ValueError("collectives.offload is cae but the chip has no cae")
        if offload == "sparsecore" and (self.sparsecores is None or not self.sparsecores.count):
            raise ValueError("collectives.offload is sparsecore but the chip has no SparseCores")
        return self
