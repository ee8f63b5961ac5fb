"""``tpusim validate``: every shipped measurement simulated and compared.

Each case runs the measured collective on a torus slice of the measured chip (the
slice's wraparound follows the chip's rule, as the shipped system files do) with the
default algorithm (``auto``), engine and network, and reports
``error = (simulated - measured) / measured``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from tpusim.config.calibration import Calibration, calibrated_system
from tpusim.config.loader import System, load_chip
from tpusim.config.system import SystemSpec
from tpusim.engine import CollectiveOptions, run_collective
from tpusim.network import NetworkSettings
from tpusim.topology import build_topology
from tpusim.validation.measurements import Measurement

WITHIN = 0.10
"""The relative error a case must stay within to count in ``within_10pct`` (the
issue's acceptance threshold)."""


@dataclass(frozen=True)
class Case:
    """One measurement against its simulation."""

    measurement: Measurement
    simulated_s: float
    algorithm: str

    @property
    def error(self) -> float:
        """(simulated - measured) / measured."""
        return (self.simulated_s - self.measurement.measured_s) / self.measurement.measured_s

    def row(self) -> dict[str, object]:
        m = self.measurement
        return {
            "id": m.id,
            "source": m.source,
            "chip": m.chip,
            "slice": "x".join(str(d) for d in m.slice),
            "axes": ",".join(m.axes) if m.axes else "",
            "op": m.op,
            "bytes": m.bytes,
            "measured_s": m.measured_s,
            "simulated_s": self.simulated_s,
            "error": self.error,
            "split": m.split,
            "algorithm": self.algorithm,
        }


@cache
def slice_system(chip: str, dims: tuple[int, ...], file: str) -> System:
    """A torus slice of ``dims`` chips of the shipped ``chip``."""
    name = f"{chip}-{'x'.join(str(d) for d in dims)}"
    spec = SystemSpec.model_validate(
        {"name": name, "chip": chip, "topology": {"kind": "torus", "dims": list(dims)}}
    )
    return System(spec=spec, chip=load_chip(chip), file=file)


def simulate_case(
    m: Measurement, calibration: Calibration | None = None, network: NetworkSettings | None = None
) -> Case:
    """Simulate measurement ``m`` on its slice (with ``calibration`` applied) on
    ``network`` (default flow), solved exactly in the options not given
    (:meth:`~tpusim.network.NetworkSettings.exact`)."""
    system = calibrated_system(slice_system(m.chip, tuple(m.slice), m.file), calibration)
    exact = (network or NetworkSettings()).exact()  # the slices are small
    options = CollectiveOptions(axes=m.axes or (), network=exact)
    topology = build_topology(system)
    result, _ = run_collective(
        topology, m.op, m.bytes, options, chip=system.chip, system_name=system.name
    )
    return Case(m, result.time_s, result.algorithm)


def validate(
    measurements: Sequence[Measurement],
    calibration: Calibration | None = None,
    network: NetworkSettings | None = None,
) -> list[Case]:
    """Every measurement simulated, in order."""
    return [simulate_case(m, calibration, network) for m in measurements]


def summary(cases: Sequence[Case]) -> dict[str, object]:
    """``total``, ``within_10pct``, ``median_abs_error`` over all cases, and the same per
    split (``fit``, ``holdout``)."""
    out: dict[str, object] = _stats(cases)
    for split in ("fit", "holdout"):
        part = [c for c in cases if c.measurement.split == split]
        out[split] = _stats(part)
    return out


def _stats(cases: Sequence[Case]) -> dict[str, object]:
    errors = np.abs([c.error for c in cases]) if cases else np.zeros(0)
    return {
        "total": len(cases),
        "within_10pct": int((errors <= WITHIN).sum()),
        "median_abs_error": float(np.median(errors)) if cases else 0.0,
    }
