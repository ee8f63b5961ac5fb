"""Google's published claims about TPU 8t and 8i, each against tpusim's figure for it.

:func:`vendor_claims` returns one row per claim: the claim as published, tpusim's
figure, the assumptions behind that figure, and a verdict:

* ``holds``: the figure meets the claim (within 10% for "Nx" claims);
* ``holds by construction``: the figure comes from a configured number that was
  itself derived from the claim, so it is no independent test;
* ``partly``: the figure meets the claim only under the narrower reading stated;
* ``does not hold``: the figure falls short under the stated assumptions.

Figures from a scenario run (``rows``, as :func:`tpusim.study.scenario.run_scenario` gives)
are used where present (the 1 GiB all-reduce, the training steps, decode with the KV
cache in SRAM, the serving capacities); what is missing is simulated here on the
shipped systems (the serving claim appears only with serving rows).
Latency claims use 1 KiB collectives at the analytic fidelity: at that size every
pattern here is latency-bound, and analytic equals flow on them (see the tests).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from tpusim.collectives import default_algorithm, make_group
from tpusim.collectives.base import Op
from tpusim.collectives.offload import OnChipModel
from tpusim.config.loader import System, load_system
from tpusim.engine import run_collective
from tpusim.topology import build_topology

TORUS_1024 = "torus-8x8x16"
#: Training workloads of a scenario whose pod-to-pod tokens/s the compute claim quotes
#: when both pods ran them (the generations study's whole models; older scenarios'
#: two-layer fragment).
TRAINING_WORKLOADS = ("llama-3.1-405b", "deepseek-v3", "dense-train")
BOARDFLY_1024 = "tpu8i-1024"
IRONWOOD = "ironwood-pod"
TPU8T = "tpu8t-superpod"
TPU8I = "tpu8i-pod"
LATENCY_BYTES = 1024.0
"""Size (bytes) of the latency claims' collectives: small enough that every pattern
here is latency-bound, so analytic equals flow on them."""
BANDWIDTH_BYTES = float(2**30)
"""Size (bytes) of the bandwidth claim's all-reduce: large enough to be bandwidth-bound."""

RATIO_MARGIN = 0.9
"""An "Nx" claim holds when the figure reaches this fraction of N (dimensionless):
vendor ratios are rounded ("nearly 3x"), so a figure within 10% meets them."""
CLAIMED_DIAMETERS_HOPS = (16, 7)
"""Published diameters (hops) of the 1,024-chip 3D torus and Boardfly."""
CLAIMED_LATENCY_CUT = 0.5
"""Published "up to 50%" lower latency of Boardfly (fraction of the torus latency)."""
CLAIMED_SRAM_RATIO = 3.0
"""Published on-chip SRAM of TPU 8i over Ironwood's (dimensionless)."""
CLAIMED_ICI_RATIO = 2.0
"""Published ICI bandwidth of TPU 8t over Ironwood's (dimensionless)."""
CLAIMED_COMPUTE_RATIO = 3.0
"""Published "nearly 3x" compute of a TPU 8t superpod over an Ironwood pod."""
BUSBW_FLOW_TOLERANCE = 0.05
"""Flow tolerance (relative) of the pod-wide all-reduce simulated here when no scenario
row gives it: 5% instead of the default 1% keeps this fallback cheap on pods of ~10,000
chips. The pattern is symmetric, so its rates are exact either way; only drain merging
(a flow arrives early by at most 5% of its duration) can move the figure."""

US_PER_S = 1e6
"""Microseconds per second (display)."""
BYTES_PER_GB = 1e9
"""Bytes per decimal gigabyte (display)."""
BYTES_PER_MIB = 2**20
"""Bytes per mebibyte (display)."""
FLOPS_PER_EFLOPS = 1e18
"""FLOP/s per EFLOP/s (display)."""


@dataclass
class Claim:
    claim: str
    source: str
    tpusim: str
    assumptions: str
    verdict: str


def _verdict_ratio(measured: float, claimed: float) -> str:
    """``holds`` if ``measured`` reaches :data:`RATIO_MARGIN` of the claimed ratio."""
    return "holds" if measured >= RATIO_MARGIN * claimed else "does not hold"


def _row(
    rows: list[dict[str, Any]] | None, system: str, prefix: str = "", **match: Any
) -> dict[str, Any] | None:
    """The first row of ``system`` whose workload label starts with ``prefix`` and whose
    other fields equal ``match``."""
    for row in rows or []:
        if (
            row.get("system") == system
            and str(row.get("workload", "")).startswith(prefix)
            and all(row.get(k) == v for k, v in match.items())
        ):
            return row
    return None


def _latency_s(system: System, op: Op, onchip: OnChipModel) -> float:
    return _latency(system, op, onchip)[0]


def _latency(
    system: System, op: Op, onchip: OnChipModel, algorithm: str | None = None
) -> tuple[float, str]:
    """Seconds and algorithm of a 1 KiB ``op`` over all of ``system`` (auto, or the
    algorithm named), at the analytic fidelity."""
    result, _ = run_collective(
        build_topology(system), op, LATENCY_BYTES, onchip=onchip, fidelity="analytic",
        algorithm=algorithm,
    )  # fmt: skip
    return result.time_s, result.algorithm


def _structural(system: System, op: Op) -> str:
    """The algorithm a runtime without a cost model runs (torus axes: torus;
    Boardfly: hierarchical): :func:`tpusim.collectives.default_algorithm`."""
    return default_algorithm(op, make_group(build_topology(system)))


def _allreduce_busbw(rows: list[dict[str, Any]] | None, system: System) -> float:
    row = _row(rows, system.name, kind="collective", op="all-reduce", bytes=BANDWIDTH_BYTES)
    if row is not None:
        return float(row["busbw_Bps"])
    result, _ = run_collective(
        build_topology(system),
        "all-reduce",
        BANDWIDTH_BYTES,
        chip=system.chip,
        system_name=system.name,
        flow_tolerance=BUSBW_FLOW_TOLERANCE,
    )
    return result.busbw_Bps or 0.0  # None only for a collective that took no time


def vendor_claims(rows: list[dict[str, Any]] | None = None) -> Any:
    """The claims table as a DataFrame (columns: claim, source, tpusim, assumptions,
    verdict); ``rows`` are a scenario run's summary rows to reuse (optional)."""
    import pandas as pd

    torus, boardfly = load_system(TORUS_1024), load_system(BOARDFLY_1024)
    ironwood, tpu8t, tpu8i = load_system(IRONWOOD), load_system(TPU8T), load_system(TPU8I)
    claims = [
        boardfly_diameter(torus, boardfly),
        boardfly_latency(torus, boardfly),
        cae_latency(boardfly, tpu8i),
        sram_capacity(rows, ironwood, tpu8i),
        ici_bandwidth(rows, ironwood, tpu8t),
        pod_compute(rows, ironwood, tpu8t),
    ]
    return pd.DataFrame([asdict(c) for c in claims] + serving_claims(rows))


def serving_claims(rows: list[dict[str, Any]] | None) -> list[dict[str, str]]:
    """7. "TPU 8i: up to 80% better performance per dollar than Ironwood for
    inference", once per serving workload with a capacity on both :data:`TPU8I` and an
    Ironwood system (:data:`IRONWOOD`, else ``ironwood-256``) in ``rows``
    (:func:`tpusim.serving.claims.claim_row`: the prices are stated ranges)."""
    from tpusim.serving.claims import claim_row

    serving = [r for r in rows or [] if r.get("kind") == "serving"]
    systems = {r["system"] for r in serving}
    ironwood = next((s for s in (IRONWOOD, "ironwood-256") if s in systems), None)
    if ironwood is None or TPU8I not in systems:
        return []
    out = []
    for workload in dict.fromkeys(str(r["workload"]) for r in serving):
        row = claim_row(serving, workload, TPU8I, ironwood)
        if row is not None:
            out.append(row)
    return out


def boardfly_diameter(torus: System, boardfly: System) -> Claim:
    """1. Boardfly cuts the 1,024-chip diameter from 16 hops to 7."""
    d_torus = build_topology(torus).diameter_hops
    d_fly = build_topology(boardfly).diameter_hops
    return Claim(
        "Boardfly cuts the diameter of a 1,024-chip network from 16 hops (3D torus) to 7",
        "Google TPU 8 deep dive (via summaries)",
        f"{TORUS_1024}: {d_torus} hops; {BOARDFLY_1024}: {d_fly} hops",
        "8x8x16 torus with wraparound; Boardfly 4 chips x 8 boards x 32 groups, "
        "minimal local-global-local routes",
        "holds" if (d_torus, d_fly) == CLAIMED_DIAMETERS_HOPS else "does not hold",
    )


def boardfly_latency(torus: System, boardfly: System) -> Claim:
    """2. "up to 50% lower latency": network only, same hop latency, 1 KiB; each side
    with its fastest algorithm (auto), and how much the verdict depends on it: the same
    comparison with each side's structural default (what runs without a tuner)."""
    none = OnChipModel.none()
    cuts, fixed = {}, {}
    ops: tuple[Op, ...] = ("all-reduce", "all-gather", "all-to-all")
    for op in ops:
        (t_torus, a_torus), (t_fly, a_fly) = _latency(torus, op, none), _latency(boardfly, op, none)
        cuts[op] = (t_torus, t_fly, 1 - t_fly / t_torus, f"{a_torus} / {a_fly}")
        d_torus = _latency(torus, op, none, _structural(torus, op))[0]
        d_fly = _latency(boardfly, op, none, _structural(boardfly, op))[0]
        fixed[op] = 1 - d_fly / d_torus
    best = max(cuts, key=lambda op: cuts[op][2])
    text = "; ".join(
        f"{op} {US_PER_S * a:.1f} -> {US_PER_S * b:.1f} us ({100 * c:.0f}% lower, {names})"
        for op, (a, b, c, names) in cuts.items()
    )
    verdict = "holds" if cuts[best][2] >= CLAIMED_LATENCY_CUT else "does not hold"
    structural = "holds" if max(fixed.values()) >= CLAIMED_LATENCY_CUT else "does not hold"
    depends = "the verdict depends on the algorithm" if structural != verdict else "same verdict"
    cut_text = ", ".join(f"{op} {100 * c:.0f}%" for op, c in fixed.items())
    return Claim(
        'Boardfly: "up to 50%" lower latency than the 3D torus at 1,024 chips',
        "Google TPU 8 deep dive (via summaries)",
        text,
        "1 KiB collectives over all 1,024 chips, network only (no on-chip cost), each "
        "chip file's hop latency, each side with its own fastest algorithm (auto, every "
        "registered algorithm pruned by its cost bounds), analytic fidelity "
        "(latency-bound). With each side's structural default instead (torus / "
        f"hierarchical): {cut_text} lower, {structural} ({depends})",
        verdict,
    )


def cae_latency(boardfly: System, tpu8i: System) -> Claim:
    """3. The CAE's "up to 5x" lower on-chip collective latency (an input, so it holds
    by construction; the end-to-end figure shows what it is worth)."""
    cae = OnChipModel.for_chip(tpu8i.chip, "cae")
    tensorcore = OnChipModel.for_chip(tpu8i.chip, "tensorcore")
    onchip_ratio = tensorcore.step_sync_s / cae.step_sync_s
    t_tc = _latency_s(boardfly, "all-reduce", tensorcore)
    t_cae = _latency_s(boardfly, "all-reduce", cae)
    return Claim(
        'TPU 8i\'s Collectives Acceleration Engine: "up to 5x" lower on-chip collective latency',
        "Google TPU 8 deep dive (via summaries)",
        f"on-chip time per step {onchip_ratio:.1f}x lower; a 1 KiB all-reduce over "
        f"{BOARDFLY_1024} end to end {US_PER_S * t_tc:.1f} -> {US_PER_S * t_cae:.1f} us "
        f"({t_tc / t_cae:.2f}x)",
        "the CAE's 5x is an input of the cost model (it divides the launch and per-step "
        "costs of the TensorCore path); each side with its own fastest algorithm",
        "holds by construction",
    )


def sram_capacity(rows: list[dict[str, Any]] | None, ironwood: System, tpu8i: System) -> Claim:
    """4. TPU 8i has 3x Ironwood's on-chip SRAM (plus the decode figure if simulated)."""
    sram_ratio = tpu8i.chip.sram.capacity_bytes / ironwood.chip.sram.capacity_bytes
    decode = _row(rows, TPU8I, "decode[kv_cache=sram", kind="decode_step")
    decode_hbm = _row(rows, TPU8I, "decode[kv_cache=hbm", kind="decode_step")
    extra = ""
    if decode is not None and decode_hbm is not None:
        extra = (
            f"; decode with the KV cache in SRAM {decode_hbm['step_time_s'] * US_PER_S:.1f} -> "
            f"{decode['step_time_s'] * US_PER_S:.1f} us per token on {TPU8I}"
        )
    return Claim(
        "TPU 8i has 3x the on-chip SRAM of Ironwood (384 MB)",
        "Google TPU 8 announcement",
        f"{tpu8i.chip.sram.capacity_bytes / BYTES_PER_MIB:.0f} MiB vs "
        f"{ironwood.chip.sram.capacity_bytes / BYTES_PER_MIB:.0f} MiB: {sram_ratio:.2f}x{extra}",
        "capacities from JAX's tpu_info (VMEM per TensorCore x TensorCores); SRAM "
        "bandwidth 22x HBM (assumption)",
        _verdict_ratio(sram_ratio, CLAIMED_SRAM_RATIO),
    )


def ici_bandwidth(rows: list[dict[str, Any]] | None, ironwood: System, tpu8t: System) -> Claim:
    """5. TPU 8t doubles Ironwood's ICI bandwidth: configured and as all-reduce busbw.
    The 8t link rate is derived from this very claim, so it holds by construction; the
    all-reduce figure shows what the doubling is worth end to end."""
    # both directions of every port
    ici = {s.name: s.chip.ici.ports * s.chip.ici.link_bandwidth_Bps * 2 for s in (ironwood, tpu8t)}
    bw_iw, bw_8t = _allreduce_busbw(rows, ironwood), _allreduce_busbw(rows, tpu8t)
    ratio = bw_8t / bw_iw
    return Claim(
        "TPU 8t doubles Ironwood's inter-chip (ICI) bandwidth",
        "Google TPU 8 announcement",
        f"configured {ici[TPU8T] / BYTES_PER_GB:.0f} vs {ici[IRONWOOD] / BYTES_PER_GB:.0f} "
        f"GB/s per chip (2x by construction); 1 GiB all-reduce over the whole pod: busbw "
        f"{bw_8t / BYTES_PER_GB:.0f} vs {bw_iw / BYTES_PER_GB:.0f} GB/s ({ratio:.2f}x; claimed "
        f"{CLAIMED_ICI_RATIO:.0f}x)",
        "8t link rate = 2x Ironwood's (derived from this claim); 20x20x24 vs 16x24x24 "
        "pods; each chip's default engine and cost terms, fastest algorithm (auto)",
        "holds by construction",
    )


def pod_compute(rows: list[dict[str, Any]] | None, ironwood: System, tpu8t: System) -> Claim:
    """6. A TPU 8t superpod has "nearly 3x" an Ironwood pod's compute; it holds only
    partly when only the mixed-dtype comparison (fp4 against fp8) reaches it."""
    pod = {
        s.name: {d: r * s.num_chips for d, r in s.chip.peak_flops.items()}
        for s in (ironwood, tpu8t)
    }
    mixed = pod[TPU8T]["fp4"] / pod[IRONWOOD]["fp8"]
    same = pod[TPU8T]["fp8"] / pod[IRONWOOD]["fp8"]
    text = (
        f"peak {pod[TPU8T]['fp4'] / FLOPS_PER_EFLOPS:.1f} EF fp4 vs "
        f"{pod[IRONWOOD]['fp8'] / FLOPS_PER_EFLOPS:.1f} EF fp8 "
        f"= {mixed:.2f}x; same dtype (fp8) {same:.2f}x"
    )
    for workload in TRAINING_WORKLOADS:
        train_iw = _row(rows, IRONWOOD, workload, kind="training_step")
        train_8t = _row(rows, TPU8T, workload, kind="training_step")
        if train_iw is not None and train_8t is not None:
            step = train_8t["tokens_per_s"] / train_iw["tokens_per_s"]
            text += f"; simulated {workload} fp8 training step, tokens/s per pod {step:.2f}x"
    threshold = RATIO_MARGIN * CLAIMED_COMPUTE_RATIO
    return Claim(
        'A TPU 8t superpod has "nearly 3x" the compute of an Ironwood pod',
        "Google TPU 8 announcement (121 EF vs 42.5 EF)",
        text,
        "9,600 vs 9,216 chips; 8t fp4 12.6 PF (secondary), fp8 5.98 PF (JAX); "
        "Ironwood fp8 4.614 PF (Google docs)",
        "partly (only fp4 against fp8)"
        if mixed >= threshold and same < threshold
        else _verdict_ratio(same, CLAIMED_COMPUTE_RATIO),
    )


def format_claims(frame: Any) -> str:
    """The claims table as text: claim, tpusim's figure and verdict, one block each."""
    blocks = []
    for i, row in enumerate(frame.itertuples(index=False), start=1):
        blocks.append(
            f"{i}. {row.claim}\n   tpusim: {row.tpusim}\n   verdict: {row.verdict}"
            f"\n   assuming: {row.assumptions}"
        )
    return "\n".join(blocks)
