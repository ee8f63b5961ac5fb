"""The ``tpusim collective`` command, run in-process through ``tpusim.cli.main``."""

from __future__ import annotations

import json

import pytest
from helpers import assert_one_error_line, run

from tpusim.cli import main

DESIGN_FIELDS = (
    "system",
    "op",
    "bytes",
    "chips",
    "algorithm",
    "fidelity",
    "time_s",
    "algbw_Bps",
    "busbw_Bps",
    "max_hops",
    "mean_hops",
)
LINK_FIELDS = ("max_link_utilization", "mean_link_utilization", "busiest_link_bytes")


def run_json(capsys, *argv: str) -> dict:
    code, out, err = run(capsys, "collective", *argv, "--json")
    assert code == 0, err
    assert err == ""
    record = json.loads(out)  # exactly one JSON value: trailing data would raise
    assert isinstance(record, dict)
    return record


def assert_input_error(capsys, *argv: str) -> str:
    return assert_one_error_line(*run(capsys, "collective", *argv))


@pytest.fixture(scope="module")
def v5e_allreduce() -> dict:
    """One run shared by the field checks (each main() call rebuilds the system)."""
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["collective", "v5e-pod", "--op", "all-reduce", "--bytes", "1MiB", "--json"])
    assert code == 0
    return json.loads(buf.getvalue())


def test_json_has_design_and_link_fields(v5e_allreduce):
    rec = v5e_allreduce
    for field in DESIGN_FIELDS + LINK_FIELDS:
        assert field in rec, field
    assert rec["system"] == "v5e-pod"
    assert rec["op"] == "all-reduce"
    assert rec["bytes"] == 2**20
    assert rec["chips"] == 256
    assert rec["fidelity"] == "flow"
    assert rec["algorithm"] == "torus"
    assert rec["time_s"] > 0
    assert rec["max_hops"] >= 1
    assert 1 <= rec["mean_hops"] <= rec["max_hops"]
    # every link equally busy makes mean and max equal up to rounding
    assert 0 < rec["mean_link_utilization"] <= rec["max_link_utilization"] * (1 + 1e-12)
    assert rec["max_link_utilization"] <= 1 + 1e-9
    assert rec["busiest_link_bytes"] > 0


def test_json_bandwidths(v5e_allreduce):
    rec = v5e_allreduce
    n = rec["chips"]
    assert rec["algbw_Bps"] == pytest.approx(rec["bytes"] / rec["time_s"], rel=1e-12)
    assert rec["busbw_Bps"] == pytest.approx(rec["algbw_Bps"] * 2 * (n - 1) / n, rel=1e-12)


def test_table_output(capsys):
    code, out, err = run(capsys, "collective", "v5e-pod", "--op", "all-gather", "--bytes", "64KiB")
    assert code == 0 and err == ""
    assert out.splitlines()[0].startswith("system")
    assert "v5e-pod" in out and "all-gather" in out


def test_sweep_bytes_gives_doubling_sizes(capsys):
    rec = run_json(capsys, "v5e-pod", "--op", "all-reduce", "--sweep-bytes", "1KiB:8KiB", "--quiet")
    rows = rec["sweep"]
    assert [r["bytes"] for r in rows] == [1024, 2048, 4096, 8192]
    for row in rows:
        assert row["op"] == "all-reduce"
        assert row["time_s"] > 0
    times = [r["time_s"] for r in rows]
    assert times == sorted(times)


def test_axes_x_on_v5e(capsys):
    rec = run_json(capsys, "v5e-pod", "--op", "all-reduce", "--bytes", "1MiB", "--axes", "x")
    assert rec["chips"] == 256
    assert rec["group_size"] == 16
    assert rec["num_groups"] == 16
    n = rec["group_size"]
    assert rec["busbw_Bps"] == pytest.approx(rec["algbw_Bps"] * 2 * (n - 1) / n, rel=1e-12)


def test_no_offload_uses_tensorcore_and_is_not_faster(capsys, v5e_allreduce):
    rec = run_json(capsys, "v5e-pod", "--op", "all-reduce", "--bytes", "1MiB", "--no-offload")
    assert rec["engine"] == "tensorcore"
    assert rec["time_s"] >= v5e_allreduce["time_s"] * (1 - 1e-12)


def test_no_offload_on_tpu8i(capsys):
    # the 4 chips of every board: the whole pod's all-reduce is a slow (minute-long) run
    board = ("tpu8i-pod", "--op", "all-reduce", "--bytes", "1MiB", "--axes", "chip")
    base = run_json(capsys, *board)
    off = run_json(capsys, *board, "--no-offload")
    assert base["engine"] == "cae"
    assert off["engine"] == "tensorcore"
    assert off["time_s"] > base["time_s"]


def test_tpu8i_default_engine_is_cae_and_tensorcore_is_slower(capsys):
    board = ("tpu8i-pod", "--op", "all-reduce", "--bytes", "1MiB", "--axes", "board,chip")
    cae = run_json(capsys, *board)
    tc = run_json(capsys, *board, "--engine", "tensorcore")
    assert cae["engine"] == "cae"
    assert cae["chips"] == 1152
    assert tc["engine"] == "tensorcore"
    assert tc["time_s"] > cae["time_s"]


# -- bad input: exit 2, one line on stderr, no traceback -----------------------------------------

BASE = ("v5e-pod", "--op", "all-reduce")


def test_unknown_op(capsys):
    line = assert_input_error(capsys, "v5e-pod", "--op", "all-sum", "--bytes", "1MiB")
    assert "all-sum" in line


def test_unknown_algorithm(capsys):
    line = assert_input_error(capsys, *BASE, "--bytes", "1MiB", "--algorithm", "butterfly")
    assert "butterfly" in line


def test_halving_doubling_all_to_all(capsys):
    line = assert_input_error(
        capsys,
        "v5e-pod",
        "--op",
        "all-to-all",
        "--bytes",
        "1MiB",
        "--algorithm",
        "halving-doubling",
        "--chips",
        "6",
    )
    assert "halving-doubling does not implement all-to-all" in line


def test_torus_on_boardfly(capsys):
    line = assert_input_error(
        capsys, "tpu8i-pod", "--op", "all-reduce", "--bytes", "1MiB", "--algorithm", "torus"
    )
    assert "torus" in line


def test_zero_bytes(capsys):
    assert_input_error(capsys, *BASE, "--bytes", "0")


def test_negative_bytes(capsys):
    assert_input_error(capsys, *BASE, "--bytes=-5")


def test_bandwidth_unit_as_bytes(capsys):
    line = assert_input_error(capsys, *BASE, "--bytes", "5GB/s")
    assert "bandwidth" in line


def test_axes_that_do_not_exist(capsys):
    line = assert_input_error(capsys, *BASE, "--bytes", "1MiB", "--axes", "w")
    assert "axes w: axes must be distinct names among x, y" in line


def test_more_chips_than_the_system(capsys):
    line = assert_input_error(capsys, *BASE, "--bytes", "1MiB", "--chips", "257")
    assert "257" in line


def test_both_axes_and_chips(capsys):
    assert_input_error(capsys, *BASE, "--bytes", "1MiB", "--axes", "x", "--chips", "4")


def test_neither_bytes_nor_sweep(capsys):
    assert_input_error(capsys, *BASE)


def test_bad_sweep_range(capsys):
    assert_input_error(capsys, *BASE, "--sweep-bytes", "8KiB:1KiB")
