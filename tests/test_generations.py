"""The generations scenario (the README's main command) at reduced size, checked
against the lower layers and closed forms: the same all-reduce through ``tpusim
collective``, the same diameter through ``tpusim topo``, the decode KV-cache read
against the memory bandwidths, energy and cost against their arithmetic, and the
comparison and claims tables against the rows they summarise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from helpers import achievable_hbm_Bps, run, shared_claims

from tpusim.config import load_chip, load_system
from tpusim.study.scenario import Scenario

ROOT = Path(__file__).resolve().parent.parent
GENERATIONS = ROOT / "scenarios" / "generations.yaml"
MiB = 2**20

SMALL_TORUS = """\
name: iw-64
description: "Ironwood chips on a 4x4x4 torus (test system)"
chip: ironwood
topology: {kind: torus, dims: [4, 4, 4]}
"""
SMALL_BOARDFLY = """\
name: fly-128
description: "TPU 8i chips on a 4-group Boardfly (test system)"
chip: tpu8i
topology: {kind: boardfly, chips_per_board: 4, boards_per_group: 8, groups: 4}
"""
PRICES = {"ironwood": 2.0, "tpu8i": 3.0}


#: The 1,024-chip comparison's whole-model trainings, run as two-layer fragments here
#: (sequence length of each).
SMALL_TRAINING = {"llama-3.1-8b": 8192}


def reduced(tmp: Path) -> Path:
    """The shipped scenario on two small systems, curves 1 KiB..1 MiB, prices set; the
    1,024-chip trainings as two-layer fragments on both, the pods' whole-model
    trainings and the serving capacity searches left out (tests/test_pipeline.py,
    tests/test_serving*.py)."""
    (tmp / "iw-64.yaml").write_text(SMALL_TORUS)
    (tmp / "fly-128.yaml").write_text(SMALL_BOARDFLY)
    data = yaml.safe_load(GENERATIONS.read_text())
    data["systems"] = ["iw-64.yaml", "fly-128.yaml"]
    data["assumptions"]["price_per_chip_hour_usd"] = PRICES
    del data["assumptions"]["power_per_chip"]["tpu8t"]  # no 8t system here
    kept = []
    for workload in data["workloads"]:
        if workload.get("kind") == "collective":
            workload["sweep"]["bytes"]["to"] = "1 MiB"
        if workload.get("kind") == "training_step":
            if workload["name"] not in SMALL_TRAINING:
                continue
            workload.pop("systems")
            workload["layers"] = 2
        if workload.get("kind") == "serving":
            continue
        kept.append(workload)
    data["workloads"] = kept
    path = tmp / "generations-small.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def small(tmp_path_factory, claims_table):
    """The reduced scenario run once, its claims table the session's shipped one
    (:func:`helpers.shared_claims`; checked against closed forms in tests/test_claims.py)."""
    tmp = tmp_path_factory.mktemp("generations")
    path = reduced(tmp)
    out = tmp / "out"
    import contextlib
    import io

    from tpusim.cli import main

    buf = io.StringIO()
    argv = ["run", str(path), "--out", str(out), "--json", "--quiet", "--jobs", "1"]
    with (
        shared_claims(claims_table, {"iw-64", "fly-128"}) as given,
        contextlib.redirect_stdout(buf),
    ):
        code = main(argv)
    assert code == 0
    record = json.loads(buf.getvalue())
    assert len(given) == 1 and len(given[0]) == len(record["results"])  # asked with the rows
    return record, path, out


def rows_of(record, kind=None, workload=None):
    return [
        r
        for r in record["results"]
        if (kind is None or r["kind"] == kind)
        and (workload is None or r["workload"].startswith(workload))
    ]


def test_shipped_scenario_validates_and_names_the_issue_systems():
    scenario = Scenario(GENERATIONS)
    names = [s.name for s in scenario.systems]
    assert names == ["ironwood-pod", "tpu8t-superpod", "tpu8i-pod", "tpu8i-1024", "torus-8x8x16"]
    kinds = {w.kind for w in (p.workload for p in scenario.runs)}
    assert kinds == {"topology", "collective", "training_step", "decode_step", "serving"}
    sizes = sorted({w.bytes for w in (p.workload for p in scenario.runs) if w.kind == "collective"})
    assert sizes[0] == 1024 and sizes[-1] == 2**30  # 1 KiB to 1 GiB
    ops = {w.op for w in (p.workload for p in scenario.runs) if w.kind == "collective"}
    assert ops == {"all-reduce", "all-gather", "all-to-all"}
    assert scenario.spec.plots and scenario.spec.claims


def test_every_system_runs_every_workload(small):
    record, _, _ = small
    systems = {r["system"] for r in record["results"]}
    assert systems == {"iw-64", "fly-128"}
    # topology + 3 ops x 3 sizes + a training + decode x 2
    assert len(record["results"]) == 2 * (1 + 9 + 1 + 2)


def test_topology_rows_equal_tpusim_topo(small, capsys):
    record, path, _ = small
    for row in rows_of(record, "topology"):
        code, out, _ = run(capsys, "topo", str(path.parent / f"{row['system']}.yaml"), "--json")
        assert code == 0
        topo = json.loads(out)
        topo = topo["results"][0] if "results" in topo else topo
        for key in ("diameter_hops", "bisection_bandwidth_Bps", "links", "chips"):
            assert row[key] == topo[key], key
        assert row["mean_pair_hops"] == topo["mean_hops"]  # over ordered pairs of chips


def test_collective_rows_equal_tpusim_collective(small, capsys):
    """The scenario solves flows to 5%; `tpusim collective` to its 1% default: on these
    symmetric patterns the completion times agree to 1e-9."""
    record, path, _ = small
    rows = rows_of(record, "collective")
    assert len(rows) == 18
    for row in rows:
        if row["bytes"] != MiB:
            continue
        code, out, _ = run(
            capsys,
            "collective",
            str(path.parent / f"{row['system']}.yaml"),
            "--op",
            row["op"],
            "--bytes",
            "1 MiB",
            "--json",
        )
        assert code == 0
        direct = json.loads(out)
        assert row["time_s"] == pytest.approx(direct["time_s"], rel=1e-9)
        assert row["busbw_Bps"] == pytest.approx(direct["busbw_Bps"], rel=1e-9)
        assert row["algorithm"] == direct["algorithm"]


def test_decode_kv_cache_in_sram_saves_exactly_the_bandwidth_difference(small):
    """Cache bytes per chip and step = layers x batch x kv_heads x head_dim x 2 (K, V) x
    1 byte (fp8) x (context read + the new token written); moving them from HBM to
    SRAM saves bytes x (1/HBM - 1/SRAM), HBM at the bandwidth streaming reaches
    (nominal x the chip's hbm efficiency)."""
    record, _, _ = small
    chips = {"iw-64": load_chip("ironwood"), "fly-128": load_chip("tpu8i")}
    kv_bytes = 32 * 1 * 8 * 128 * 2 * 1 * (1024 + 1)  # Llama 3.1 8B, one sequence
    for system, chip in chips.items():
        hbm = next(
            r
            for r in rows_of(record, "decode_step", "decode[kv_cache=hbm")
            if r["system"] == system
        )
        sram = next(
            r
            for r in rows_of(record, "decode_step", "decode[kv_cache=sram")
            if r["system"] == system
        )
        saved = kv_bytes * (1 / achievable_hbm_Bps(chip) - 1 / chip.sram.bandwidth_Bps)
        assert hbm["step_time_s"] - sram["step_time_s"] == pytest.approx(saved, rel=1e-6)
        assert hbm["tokens_per_s"] == pytest.approx(1 * hbm["chips"] / hbm["step_time_s"])


def test_energy_and_cost_follow_the_assumptions(small):
    record, path, _ = small
    power = {"ironwood": 1085.0, "tpu8i": 1085.0}  # the scenario's assumptions (W)
    chip_of = {"iw-64": "ironwood", "fly-128": "tpu8i"}
    programs = rows_of(record, "training_step") + rows_of(record, "decode_step")
    assert len(programs) == 6
    for row in programs:
        chip, chips, step = chip_of[row["system"]], row["chips"], row["step_time_s"]
        busy = min(1.0, row["compute_time_s"] / step)  # idle half + busy share of the rest
        mean_W = power[chip] * (0.5 + 0.5 * busy)
        assert row["energy_per_step_J"] == pytest.approx(mean_W * chips * step, rel=1e-12)
        tokens = row["tokens_per_s"] * step
        assert row["energy_per_token_J"] == pytest.approx(row["energy_per_step_J"] / tokens)
        assert row["cost_per_step_usd"] == pytest.approx(PRICES[chip] * chips * step / 3600)
        assert row["cost_per_million_tokens_usd"] == pytest.approx(
            row["cost_per_step_usd"] / tokens * 1e6
        )
    for row in rows_of(record, "training_step"):
        # one sequence per batch shard, every chip a shard
        seq = SMALL_TRAINING[row["workload"]]
        assert row["tokens_per_s"] * row["step_time_s"] == pytest.approx(seq * row["chips"])
    assert load_system(str(path.parent / "iw-64.yaml")).num_chips == 64


def test_comparison_table_summarises_the_rows(small):
    record, _, out = small
    table = record["comparison"]
    for row in rows_of(record, "collective"):
        if row["bytes"] == MiB:
            key = f"{row['op']} 1 MiB: busbw (GB/s)"
            assert table[row["system"]][key] == pytest.approx(row["busbw_Bps"] / 1e9)
        if row["bytes"] == 1024:
            key = f"{row['op']} 1 KiB: time (us)"
            assert table[row["system"]][key] == pytest.approx(row["time_s"] * 1e6)
    for row in rows_of(record, "topology"):
        assert table[row["system"]]["diameter (hops)"] == row["diameter_hops"]
    assert (out / "comparison.csv").exists() and (out / "summary.csv").exists()


def test_plots_and_claims_are_written(small):
    record, _, out = small
    names = {Path(p).name for p in record["plots"]}
    assert {
        "busbw-all-reduce.png",
        "busbw-all-gather.png",
        "busbw-all-to-all.png",
        "hops.png",
        "links-iw-64.png",
        "links-fly-128.png",
        "steps.png",
        "timeline.png",
    } <= names
    for name in names:
        assert (out / name).stat().st_size > 10_000
        assert (out / name).with_suffix(".svg").exists()
    claims = record["claims"]
    assert len(claims) == 8  # the two training claims simulate their steps when absent
    assert all(c["verdict"] for c in claims)
    assert claims[0]["verdict"] == "holds"  # 16 -> 7 hops
    assert (out / "claims.csv").exists()


#: Issue 43: the residual kind of each row kind's cost-model figures (column -> kind,
#: whether a rate). A decode step's time is the time per output token of one step: the
#: serving TPOT residuals.
INTERVAL_KINDS = {
    "collective": {"time_s": ("collective_time", False), "busbw_Bps": ("collective_time", True)},
    "training_step": {
        "step_time_s": ("training_step_time", False),
        "tokens_per_s": ("training_step_time", True),
    },
    "decode_step": {
        "step_time_s": ("serving_tpot", False),
        "per_token_latency_s": ("serving_tpot", False),
    },
}


def test_every_cost_model_row_has_an_interval_or_says_why(small):
    """Every row a cost model made (all but topology) has ``x_interval`` in the JSON and
    ``x_lo``, ``x_hi`` in summary.csv: the figure scaled by the shipped residual
    quantiles of its kind (a time ``[x / exp(q90), x / exp(q10)]``, a rate ``[x
    exp(q10), x exp(q90)]``), or, for a kind the residual model lacks (serving TPOT
    until the serving cross-validation writes it), none and the reason in
    ``interval_basis``."""
    import math

    import pandas as pd

    from tpusim.config.uncertainty import load_uncertainty

    record, _, out = small
    summary = pd.read_csv(out / "summary.csv")
    model = load_uncertainty()
    rows = [r for r in record["results"] if r["kind"] != "topology"]
    assert {r["kind"] for r in rows} == set(INTERVAL_KINDS)
    for row in rows:
        assert row["interval_basis"], row["workload"]
        for column, (kind, rate) in INTERVAL_KINDS[row["kind"]].items():
            assert {f"{column}_lo", f"{column}_hi"} <= set(summary.columns)
            x, pair = row[column], row[f"{column}_interval"]
            if kind not in model.kinds:
                assert pair is None
                assert f"no residual model for {kind} (pending" in row["interval_basis"]
                continue
            q = model.kinds[kind].quantiles
            lo, hi = (
                (math.exp(q.q10), math.exp(q.q90))
                if rate
                else (1 / math.exp(q.q90), 1 / math.exp(q.q10))
            )
            assert pair == [pytest.approx(x * lo), pytest.approx(x * hi)], (row["workload"], column)


def test_jobs_give_the_same_numbers_as_in_process(tmp_path, capsys):
    path = reduced(tmp_path)
    data = yaml.safe_load(path.read_text())
    data["workloads"] = [w for w in data["workloads"] if w["kind"] in ("topology", "decode_step")]
    data["plots"] = data["claims"] = False
    path.write_text(yaml.safe_dump(data))
    records = []
    for jobs in ("1", "2"):
        code, out, _ = run(
            capsys,
            "run",
            str(path),
            "--json",
            "--quiet",
            "--jobs",
            jobs,
            "--out",
            str(tmp_path / f"o{jobs}"),
        )
        assert code == 0
        records.append(json.loads(out)["results"])
    assert records[0] == records[1]


def test_error_in_a_worker_process_is_one_line(tmp_path, capsys):
    """A mesh that fits neither system (tp 8 on axes of 4) is found by the check
    before any worker starts (issue 15: every problem listed, one line each), exit 2."""
    path = reduced(tmp_path)
    data = yaml.safe_load(path.read_text())
    data["workloads"] = [
        {
            "name": "decode",
            "kind": "decode_step",
            "layers": 1,
            "d_model": 256,
            "d_ff": 512,
            "heads": 8,
            "head_dim": 64,
            "batch": 1,
            "context": 128,
            "mesh": {"replica": "auto", "tp": 8},
            "tensor_axis": "tp",
            # meshes split physical axes, so tp 8 fits 4x4x4 too: 16 tensor ranks
            # for 8 heads fail on iw-64 only
            "per_system": {"iw-64": {"mesh": {"replica": "auto", "tp": 16}}},
        }
    ]
    data["plots"] = data["claims"] = False
    path.write_text(yaml.safe_dump(data))
    code, out, err = run(
        capsys, "run", str(path), "--quiet", "--jobs", "2", "--out", str(tmp_path / "o")
    )
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert "workloads[0]" in lines[0] and "'tp' (16)" in lines[0]
