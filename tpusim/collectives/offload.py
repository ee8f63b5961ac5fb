"""The cost model of a collective beyond the network: who reduces, and what it costs.

The network (:mod:`tpusim.network`) charges each transfer its route's per-hop latency
(``ici.hop_latency``) and bytes / bandwidth. On top of it a collective pays, from the
chip's ``collectives:`` block (:class:`~tpusim.config.chip.CollectiveCostSpec`):

    time = launch_s + sum over steps of [ transfer_s / link_efficiency
                                          + step_sync_s + messages_s
                                          + max(0, reduce_s - transfer_s) ]

- ``launch_s``: once per collective (issue and rendezvous).
- ``step_sync_s``: once per algorithm step (the chips agree the step is done).
- ``messages_s``: a step whose busiest chip sends m messages (one per destination) on
  p ports issues them p at a time: (ceil(m / p) - 1) x ``MESSAGE_S``. The first
  message on each port is inside ``step_sync_s`` (it was calibrated on ring and torus
  algorithms, which send at most one message per port a step), so only direct
  exchanges (n - 1 destinations) pay it.
- ``link_efficiency``: the fraction of nominal link bandwidth transfers reach; the
  network runs at ``link_bandwidth * link_efficiency``.
- reductions are pipelined with the transfers (a chunk is reduced while the next one
  arrives), so only the part of ``reduce_s = reduce_bytes / reduce_bandwidth_Bps`` that
  outlasts the step's transfer costs time.

Who reduces (``engine``):

- ``tensorcore``: the vector unit reads two operands and writes one result in HBM, so
  it reduces at HBM bandwidth / 3 (``REDUCE_TRAFFIC_PER_BYTE``; derived).
- ``sparsecore``: SparseCores run the collective and reduce in line (no reduction cost;
  assumption). XLA offloads all-gather, reduce-scatter and all-reduce to SparseCores by
  default on Ironwood only; on v5p and v6e the offload is opt-in (MaxText
  ``benchmarks/xla_flags_library.py``: "On Ironwood, by default:
  xla_tpu_enable_sparse_core_collective_offload_all_gather as True ... reduce_scatter
  ... all_reduce as True"; the ``ENABLE_SPARSECORE_OFFLOADING_*`` flag sets turn it on
  elsewhere), so shipped chip files set ``offload: sparsecore`` for Ironwood and 8t only.
- ``cae`` (TPU 8i): the Collectives Acceleration Engine reduces in line and divides the
  launch and step costs by ``CAE_LATENCY_GAIN`` = 5, Google's "reducing on-chip latency
  by up to 5x" (published claim used as the model: the CAE verdict holds by construction).
- ``none``: no cost beyond the network at nominal bandwidth, for checking closed forms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tpusim.collectives.base import Step
from tpusim.config.chip import ChipSpec
from tpusim.vocabulary import CostEngine, Engine, EngineChoice

CAE_LATENCY_GAIN = 5.0
"""On-chip latency gain of TPU 8i's CAE (dimensionless; published "up to 5x", TPU8)."""

MESSAGE_S = 1 / 215e6
"""Seconds to issue one more message (DMA descriptor) on a port, about 4.65 ns: the
published message rate of an RDMA NIC (NVIDIA ConnectX-6: "215 million messages per
second") standing in for a TPU's per-port DMA issue rate, which is not published.
Grade: assumption (an analog)."""

REDUCE_TRAFFIC_PER_BYTE = 3.0
"""HBM bytes moved per byte reduced on the TensorCore: read two operands, write one
(dimensionless; derived)."""


@dataclass(frozen=True)
class OnChipModel:
    """Costs of a collective beyond the network (see the module docstring). Times in s."""

    engine: CostEngine
    launch_s: float
    step_sync_s: float
    reduce_bandwidth_Bps: float
    link_efficiency: float = 1.0
    ports: int = 1
    message_s: float = 0.0

    def messages_s(self, step: Step) -> float:
        """Seconds the busiest chip of ``step`` spends issuing messages beyond one per port
        (see the module docstring); 0 without a message cost."""
        if not self.message_s or step.src.size <= self.ports:
            return 0.0
        most = int(np.bincount(step.src).max())
        return max(0, math.ceil(most / self.ports) - 1) * self.message_s

    def reduce_time_s(self, step: Step) -> float:
        """Seconds to reduce what a chip receives in ``step`` (0 when nothing is reduced)."""
        return step.reduce_bytes / self.reduce_bandwidth_Bps if step.reduce_bytes else 0.0

    def after_transfer_s(self, step: Step, transfer_s: float) -> float:
        """Seconds a step costs after its last byte arrived ``transfer_s`` after it began:
        the synchronisation plus the reduction that did not overlap the transfer."""
        unhidden = max(0.0, self.reduce_time_s(step) - transfer_s)
        return self.step_sync_s + self.messages_s(step) + unhidden

    @staticmethod
    def none() -> OnChipModel:
        """No cost beyond the network, at nominal bandwidth: for closed forms."""
        return OnChipModel("none", 0.0, 0.0, math.inf, 1.0)

    @staticmethod
    def for_chip(chip: ChipSpec, engine: EngineChoice = "auto") -> OnChipModel:
        """The model of ``engine`` on ``chip``; ``auto`` is the chip's ``collectives.offload``.

        Raises ValueError when the chip lacks the engine asked for."""
        if engine == "none":
            return OnChipModel.none()
        costs = chip.collectives
        picked = costs.offload if engine == "auto" else engine
        if picked == "cae" and chip.cae is None:
            raise ValueError(f"chip {chip.name} has no CAE")
        if picked == "sparsecore" and (chip.sparsecores is None or chip.sparsecores.count == 0):
            raise ValueError(f"chip {chip.name} has no SparseCores")
        gain = CAE_LATENCY_GAIN if picked == "cae" else 1.0
        reduce_Bps = math.inf
        if picked == "tensorcore":
            reduce_Bps = (chip.hbm.bandwidth_Bps or math.inf) / REDUCE_TRAFFIC_PER_BYTE
        return OnChipModel(
            picked,
            costs.launch_s / gain,
            costs.step_sync_s / gain,
            reduce_Bps,
            costs.link_efficiency,
            chip.ici.ports,
            MESSAGE_S,
        )


def engine_model(chip: ChipSpec, engine: Engine, default: OnChipModel) -> OnChipModel:
    """``engine``'s model on ``chip`` (an op that names its engine, as a collective XLA
    put on the SparseCores does); ``default`` when the chip lacks that engine."""
    try:
        return OnChipModel.for_chip(chip, engine)
    except ValueError:
        return default
