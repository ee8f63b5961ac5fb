"""What a simulation measured: :class:`Results` of a run, of :class:`OpRecord` rows
(:mod:`tpusim.results.ops`).

``Results.summary()`` is the JSON record ``tpusim run`` prints per program;
``ops_frame()`` and ``links_frame()`` are the ``ops`` and ``links`` tables;
:class:`CollectiveResult` is the record of one collective (``tpusim collective``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tpusim.later import LaterModule
from tpusim.results.ops import OpRecord
from tpusim.results.overlap import breakdown
from tpusim.results.tables import link_utilization, links_frame

if TYPE_CHECKING:
    import pandas as pd

    from tpusim.program.ir import Program
    from tpusim.topology.base import LinkTable
    from tpusim.vocabulary import Dtype
else:
    pd = LaterModule("pandas")

__all__ = ["CollectiveResult", "OpRecord", "Results"]


@dataclass
class Results:
    """What a simulation measured; ``summary()`` is the JSON record of ``tpusim run``.

    Times in s; ``peak_flops`` (FLOP/s per chip) is the peak of the program's matmul
    dtype that MFU divides by; ``link_bytes`` per directed link of ``links``.
    """

    system: str
    program: str
    fidelity: str
    chips: int
    step_time_s: float
    compute_time_s: float
    communication_time_s: float
    flops_per_chip: float
    peak_flops: float
    ops: list[OpRecord] = field(default_factory=list)
    link_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    links: LinkTable | None = None
    max_hops: int = 0
    mean_hops: float = 0.0

    @property
    def communication_busy_time_s(self) -> float:
        """Time during which at least one collective was in flight (the union of their
        intervals; ``communication_time_s`` sums them, counting concurrent ones twice)."""
        spans = sorted(
            (op.start_at, op.end_at)
            for op in self.ops
            if op.kind == "collective" and op.unit == "ici"
        )
        busy, reach = 0.0, float("-inf")
        for start, end in spans:
            if end > reach:
                busy += end - max(start, reach)
                reach = end
        return busy

    @property
    def exposed_communication_time_s(self) -> float:
        """Step time not covered by compute on the TensorCore of the default class."""
        return max(0.0, self.step_time_s - self.compute_time_s)

    def communication_breakdown(self) -> dict[str, float]:
        """Exposed and hidden communication per collective kind, in s
        (:func:`tpusim.results.overlap.breakdown` over the ops table)."""

        return breakdown(self.ops)

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation: useful FLOPs per chip / (step time x peak)."""
        if self.step_time_s <= 0:
            return 0.0
        return self.flops_per_chip / (self.step_time_s * self.peak_flops)

    def summary(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "workload": self.program,
            "fidelity": self.fidelity,
            "chips": self.chips,
            "step_time_s": self.step_time_s,
            "compute_time_s": self.compute_time_s,
            "communication_time_s": self.communication_time_s,
            "communication_busy_time_s": self.communication_busy_time_s,
            "exposed_communication_time_s": self.exposed_communication_time_s,
            "flops_per_chip": self.flops_per_chip,
            "mfu": self.mfu,
            "max_hops": self.max_hops,
            "mean_hops": self.mean_hops,
            **link_utilization(self.link_bytes, self._links().bandwidth_Bps, self.step_time_s),
        }

    def _links(self) -> LinkTable:
        """The link table (every simulated program's results carry one)."""
        if self.links is None:
            raise ValueError("these results carry no link table")
        return self.links

    def links_frame(self) -> pd.DataFrame:
        """The ``links`` table (:mod:`tpusim.results.tables`) of the links that carried bytes."""
        frame = links_frame(self._links(), self.link_bytes, self.step_time_s)
        return frame[frame["bytes"] > 0]

    def ops_frame(self) -> pd.DataFrame:
        """The ``ops`` table: name, kind, chips (class), unit, start_at, end_at, flops."""
        columns = ("name", "kind", "chips", "unit", "start_at", "end_at", "flops")
        return pd.DataFrame([{c: getattr(r, c) for c in columns} for r in self.ops])


@dataclass
class CollectiveResult:
    """One simulated collective. Times in s, bandwidths in bytes/s; ``bytes`` follows
    nccl-tests; ``chips`` counts every chip taking part (``group_size`` per group)."""

    system: str
    op: str
    bytes: float
    chips: int
    group_size: int
    num_groups: int
    algorithm: str
    fidelity: str
    engine: str
    time_s: float
    algbw_Bps: float | None
    busbw_Bps: float | None
    max_hops: int
    mean_hops: float
    num_steps: int
    num_flows: int
    max_link_utilization: float
    mean_link_utilization: float
    busiest_link_bytes: float
    num_events: int

    def record(self) -> dict[str, Any]:
        return asdict(self)


def mfu_peak_flops(peak_flops: Mapping[Dtype, float], program: Program) -> float:
    """The peak MFU divides by: that of the program's first matmul dtype, bf16 where the
    chip lists none for it (fp32) or the program has no matmul."""
    dtype = next((op.dtype for op in program.ops if op.kind == "matmul"), "bf16")
    return peak_flops.get(dtype) or peak_flops["bf16"]  # type: ignore[call-overload]
