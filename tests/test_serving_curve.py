"""The serving curve a scenario draws: every trial of the capacity search, by rate."""

from __future__ import annotations

import json

from helpers import run

SCENARIO = """\
name: curve
systems: [ironwood-256, tpu8i-1024]
plots: true
workloads:
  - {name: s, kind: serving, model: llama-3.1-70b, tp: 8, dtype: fp8, requests: 300,
     prompt_tokens: 1024, output_tokens: 256, find_capacity: true, slo_ttft: 2 s,
     slo_tpot: 50 ms}
"""


def test_capacity_is_the_fastest_trial_that_meets_the_slo_and_is_drawn(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    out = tmp_path / "o"
    code, text, err = run(capsys, "run", str(path), "--json", "--quiet", "--out", str(out))
    assert code == 0, err
    record = json.loads(text)
    assert "curve" not in record["results"][0]  # a figure, not a column
    png = out / "serving-s.png"
    assert png.exists() and png.stat().st_size > 10_000
    assert str(png) in record["plots"]


def test_find_capacity_returns_every_trial_sorted_by_rate():
    """The curve holds one point per trial; the capacity is the fastest rate among
    them whose p99 TTFT and TPOT meet the SLO, and every faster trial misses it."""
    from tpusim.serving.capacity import find_capacity
    from tpusim.serving.metrics import Slo, meets
    from tpusim.serving.requests import TokenCount, synthetic_requests
    from tpusim.serving.service import Deployment, Service

    service = Service(Deployment(system="ironwood-256", model="llama-3.1-70b", tp=8, dtype="fp8"))
    slo = Slo(ttft_s=2.0, tpot_s=0.05)

    def stream(rate):
        return synthetic_requests(
            300, rate, TokenCount("fixed", 1024), TokenCount("fixed", 256), seed=1
        )

    found = find_capacity(service, stream, slo)
    curve = found["curve"]
    assert found["capacity_rate_per_s"] > 0
    # the search's trials, then the loads at 1/4, 1/2 and 3/4 of the capacity found
    assert len(curve) == found["trials"] + 3 and curve == sorted(curve)
    rates = [p[0] for p in curve]
    for fraction in (0.25, 0.5, 0.75):
        assert fraction * found["capacity_rate_per_s"] in rates
    met = [rate for rate, ttft, tpot, _, _ in curve if meets(ttft, tpot, slo)]
    assert found["capacity_rate_per_s"] == max(met)
    assert all(not meets(t, p, slo) for rate, t, p, _, _ in curve if rate > max(met))
    assert all(t50 <= t99 and p50 <= p99 for _, t99, p99, t50, p50 in curve)


def test_a_stream_too_short_for_a_steady_state_is_one_line(capsys):
    """The capacity search judges rates in steady state (10 batches of at least 10
    requests after a 10% warm-up and a 10% cool-down: 125 requests); 100 requests are
    refused (exit 2) instead of reporting a capacity of 0 (issue 22)."""
    from helpers import assert_one_error_line

    argv = ["serve", "tpu8i-1024", "--model", "llama-3.1-8b", "--tp", "8", "--dtype", "fp8"]
    argv += ["--requests", "100", "--find-capacity", "--slo-ttft", "1s", "--slo-tpot", "20ms"]
    line = assert_one_error_line(*run(capsys, *argv))
    assert "--requests" in line and "125" in line
