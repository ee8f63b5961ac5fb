"""The collectives the vendor-claims checks (:mod:`tpusim.study.claims`) simulate on
whole shipped systems, at the analytic fidelity: each system's topology and route cache
built once per check (:class:`Built`), so the algorithms and ops that repeat a step
route it once.
"""

from __future__ import annotations

from dataclasses import dataclass

from tpusim.collectives import default_algorithm, make_group
from tpusim.collectives.offload import OnChipModel
from tpusim.config.loader import System, load_system
from tpusim.engine import CollectiveOptions, run_collective
from tpusim.network import NetworkSettings
from tpusim.network.routes import RouteCache
from tpusim.study.claim_specs import LatencyCutClaim
from tpusim.study.claim_verdicts import Verdict, cut_verdict
from tpusim.topology import Topology, build_topology
from tpusim.vocabulary import Op

__all__ = ["ANALYTIC", "US_PER_S", "Built", "latency", "latency_cut_values", "structural"]

US_PER_S = 1e6
"""Microseconds per second (display)."""

ANALYTIC = NetworkSettings.of("analytic")
"""Claims on latency and structure compare patterns in closed form."""


@dataclass(frozen=True)
class Built:
    """A system's topology and route cache, built once for every collective a check
    runs on it."""

    topology: Topology
    routes: RouteCache

    @classmethod
    def of(cls, system: System) -> Built:
        """``system``'s topology, built, and an empty route cache of it."""
        topology = build_topology(system)
        return cls(topology, RouteCache(topology))


def latency(
    built: Built, op: Op, size_bytes: float, onchip: OnChipModel, algorithm: str | None = None
) -> tuple[float, str]:
    """Seconds and algorithm of ``op`` of ``size_bytes`` over all of the built system
    (auto, or the algorithm named), at the analytic fidelity."""
    options = CollectiveOptions(algorithm=algorithm, network=ANALYTIC)
    result, _ = run_collective(
        built.topology, op, size_bytes, options, onchip=onchip, routes=built.routes
    )
    return result.time_s, result.algorithm


def structural(built: Built, op: Op) -> str:
    """The algorithm a runtime without a cost model runs (torus axes: torus;
    Boardfly: hierarchical): :func:`tpusim.collectives.default_algorithm`."""
    return default_algorithm(op, make_group(built.topology))


def latency_cut_values(spec: LatencyCutClaim) -> tuple[dict[str, object], Verdict, str]:
    """Network-only latency of each op over each whole system, each side with its
    fastest algorithm (auto), and how much the verdict depends on that: the same
    comparison with each side's structural default (what runs without a tuner).
    Returns the template values, the verdict and the interval that decided it
    (:func:`~tpusim.study.claim_verdicts.cut_verdict`)."""
    baseline, subject = (Built.of(load_system(s)) for s in (spec.baseline, spec.subject))
    none = OnChipModel.none()
    cuts, fixed = {}, {}
    for op in spec.ops:
        t_base, a_base = latency(baseline, op, spec.bytes, none)
        t_subj, a_subj = latency(subject, op, spec.bytes, none)
        cuts[op] = (t_base, t_subj, 1 - t_subj / t_base, f"{a_base} / {a_subj}")
        d_base = latency(baseline, op, spec.bytes, none, structural(baseline, op))[0]
        d_subj = latency(subject, op, spec.bytes, none, structural(subject, op))[0]
        fixed[op] = 1 - d_subj / d_base
    text = "; ".join(
        f"{op} {US_PER_S * a:.1f} -> {US_PER_S * b:.1f} us ({100 * c:.0f}% lower, {names})"
        for op, (a, b, c, names) in cuts.items()
    )
    verdict, decided_by = cut_verdict(cuts, spec.claimed_cut)
    fixed_verdict = "holds" if max(fixed.values()) >= spec.claimed_cut else "does not hold"
    central = "holds" if max(c[2] for c in cuts.values()) >= spec.claimed_cut else "does not hold"
    depends = "the verdict depends on the algorithm" if fixed_verdict != central else "same verdict"
    cut_text = ", ".join(f"{op} {100 * c:.0f}%" for op, c in fixed.items())
    values: dict[str, object] = {
        "cuts": text,
        "structural_cuts": cut_text,
        "structural_verdict": fixed_verdict,
        "depends": depends,
    }
    return values, verdict, decided_by
