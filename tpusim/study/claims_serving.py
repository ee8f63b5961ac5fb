"""The serving claim's figure: 8i's inference performance per dollar against a
baseline, from the capacities a run served (:mod:`tpusim.study.claims`)."""

from __future__ import annotations

from tpusim.config.loader import load_system
from tpusim.serving.perf_per_dollar import capacity_per_chip, inference_perf_per_dollar
from tpusim.study.claim_specs import ClaimsFile, PerfPerDollarClaim
from tpusim.study.claim_verdicts import Verdict, per_dollar_verdict

#: One judged row: its values, its verdict and the text of what decided it.
Judged = tuple[dict[str, object], Verdict, str]


def serving_perf_per_dollar(
    spec: PerfPerDollarClaim, rows: list[dict[str, object]], file: ClaimsFile
) -> list[Judged]:
    """Once per serving workload with a capacity on the subject and on the first of
    the baselines the run served on; prices by chip from the claims file."""
    serving = [r for r in rows if r.get("kind") == "serving"]
    systems = {r["system"] for r in serving}
    baseline = next((s for s in spec.baselines if s in systems), None)
    if baseline is None or spec.subject not in systems:
        return []
    price_subj = file.price(load_system(spec.subject).chip.name)
    price_base = file.price(load_system(baseline).chip.name)
    out: list[Judged] = []
    for workload in dict.fromkeys(str(r["workload"]) for r in serving):
        perf_subj = capacity_per_chip(serving, spec.subject, workload)
        perf_base = capacity_per_chip(serving, baseline, workload)
        if not perf_subj or not perf_base:
            continue
        p = inference_perf_per_dollar(
            perf_subj, perf_base, price_subj, price_base, spec.claimed_ratio
        )
        threshold = file.ratio_margin * spec.claimed_ratio
        verdict, text, figures = per_dollar_verdict(
            p, price_base, "serving_throughput", threshold, "capacity per chip ratio"
        )
        values = {
            **figures,
            "subject": spec.subject,
            "baseline": baseline,
            "workload": workload,
            "subject_perf": perf_subj,
            "baseline_perf": perf_base,
            "subject_price_low": price_subj[0],
            "subject_price_high": price_subj[1],
            "baseline_price_low": price_base[0],
            "baseline_price_high": price_base[1],
        }
        out.append((values, verdict, text))
    return out
