"""Power and energy of a simulated step: idle power plus a share that scales with how
busy the chip is.

Definition. A chip's all-in power at full load, ``P_full`` (W: chip, host, network and
cooling share, the scenario's ``assumptions.power_per_chip``), splits into an idle part
``f_idle x P_full`` drawn all the time and a dynamic part ``(1 - f_idle) x P_full``
drawn in proportion to the chip's busy share ``u`` (the fraction of the step its
TensorCores run ops, ``compute_time_s / step_time_s``, 0..1)::

    P(u) = P_full x (f_idle + (1 - f_idle) x u)
    energy per step (J) = P(u) x chips x step_time_s

Takeaway: a step that leaves the chips waiting on the network costs less power per
second but more energy per token than the same work run busier, and a chip whose
``P_full`` was derived from another dtype's peak than the one the workload runs is
compared on a wrong basis (the scenario's ``assumptions.power_basis`` says which dtype
its power figures were derived at; the report shows it beside the energy figures).

Worked example: ``P_full`` = 1,085 W, ``f_idle`` = 0.5, a step 80% busy: P = 1,085 x
(0.5 + 0.5 x 0.8) = 976.5 W per chip.
"""

from __future__ import annotations

__all__ = [
    "IDLE_POWER_FRACTION",
    "busy_share",
    "derived_power_W",
    "mean_power_W",
]

#: Share of full-load power a server draws when idle (0..1). Source: Barroso and
#: Hoelzle, "The Case for Energy-Proportional Computing" (IEEE Computer, 2007; key
#: BH-2007): servers "consume about half" their peak power doing virtually no work.
#: Grade: assumption (a general-server figure applied to TPU hosts; none is published
#: for TPUs).
IDLE_POWER_FRACTION = 0.5


def busy_share(compute_time_s: float, step_time_s: float) -> float:
    """Fraction of the step the chip's TensorCores are busy (0..1); 0 for an empty step."""
    if step_time_s <= 0:
        return 0.0
    return min(1.0, max(0.0, compute_time_s / step_time_s))


def mean_power_W(
    full_load_W: float, busy: float, idle_fraction: float = IDLE_POWER_FRACTION
) -> float:
    """Mean all-in power per chip (W) over a step with busy share ``busy`` (0..1):
    ``full_load_W x (idle_fraction + (1 - idle_fraction) x busy)``.

    Raises ValueError when ``busy`` or ``idle_fraction`` lies outside 0..1."""
    if not 0.0 <= busy <= 1.0 or not 0.0 <= idle_fraction <= 1.0:
        raise ValueError(f"busy share {busy} and idle fraction {idle_fraction} must be in 0..1")
    return full_load_W * (idle_fraction + (1.0 - idle_fraction) * busy)


def derived_power_W(
    reference_W: float,
    reference_peak_flops: float,
    peak_flops: float,
    perf_per_watt_gain: float,
) -> float:
    """Full-load power (W) of a chip derived from a reference chip's power and a claimed
    gain in performance per watt, both peaks taken at the same dtype:
    ``reference_W x (peak_flops / reference_peak_flops) / perf_per_watt_gain``.

    E.g. TPU 8t from Ironwood (1,085 W) and "up to 2x perf/W", at the fp8 peaks
    (5,976.9 and 4,614 TFLOP/s): 1,085 x 1.2954 / 2 = 702.7 W. Taking 8t's fp4 peak
    against Ironwood's fp8 instead (the old basis) gives 1,481 W, which charges 8t
    for a 2x it never uses when the workload runs in fp8."""
    return reference_W * (peak_flops / reference_peak_flops) / perf_per_watt_gain
