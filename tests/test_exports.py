"""Exports (issue 15): summary.parquet beside the CSVs with the same values and integer
columns as integers, comparison.csv counts as integers, sources.csv."""

from __future__ import annotations

import contextlib
import io

import pandas as pd
import pytest

from tpusim.cli import main
from tpusim.results.writers import summary_frame

SCENARIO = """\
name: tiny-exports
plots: false  # figures are tests/test_plots.py's; these tests read rows and CSVs
systems: [iw-64.yaml]
workloads:
  - {name: topology, kind: topology}
  - {name: ar, kind: collective, op: all-reduce, bytes: 1 MiB}
  - {name: decode, kind: decode_step, layers: 1, d_model: 1024, d_ff: 4096, heads: 8,
     kv_heads: 8, head_dim: 128, batch: 4, context: 512, dtype: fp8, mesh: {replica: auto}}
"""


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("exports")
    (tmp / "iw-64.yaml").write_text(
        "name: iw-64\nchip: ironwood\ntopology: {kind: torus, dims: [4, 4, 4]}\n"
    )
    (tmp / "s.yaml").write_text(SCENARIO)
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", str(tmp / "s.yaml"), "--out", str(tmp / "out"), "--quiet"]) == 0
    return tmp / "out"


def test_summary_frame_makes_whole_number_columns_integers():
    frame = summary_frame([{"chips": 8, "x": 1.5}, {"chips": None, "x": 2.0, "links": 3}])
    assert str(frame["chips"].dtype) == "Int64" and str(frame["links"].dtype) == "Int64"
    assert frame["x"].dtype == float
    assert frame["chips"].isna().tolist() == [False, True]


def test_summary_csv_writes_counts_as_integers(out):
    lines = (out / "summary.csv").read_text().splitlines()
    header = lines[0].split(",")
    topology = dict(zip(header, lines[1].split(","), strict=True))
    assert topology["chips"] == "64" and topology["links"] == "192"
    assert topology["diameter_hops"] == "6"


def test_summary_parquet_holds_the_csv_values_with_integer_types(out):
    pytest.importorskip("pyarrow")
    parquet = pd.read_parquet(out / "summary.parquet")
    csv = pd.read_csv(out / "summary.csv")
    assert list(parquet.columns) == list(csv.columns)
    pd.testing.assert_frame_equal(parquet, csv, check_dtype=False)
    for column in ("chips", "links", "diameter_hops", "num_steps"):
        assert pd.api.types.is_integer_dtype(parquet[column]), column


def test_comparison_csv_writes_counts_as_integers(out):
    lines = (out / "comparison.csv").read_text().splitlines()
    # figure, the one system's value, then its interval columns (blank for counts)
    rows = {cells[0]: cells[1] for cells in (line.split(",") for line in lines)}
    assert rows["chips"] == "64" and rows["diameter (hops)"] == "6"
    assert "." in rows["mean hops"]


def test_sources_csv_resolves_every_cited_key(out):
    frame = pd.read_csv(out / "sources.csv", keep_default_na=False)
    assert list(frame.columns) == ["key", "title", "url", "grade", "cited_by"]
    assert {"JAX", "D-7x"} <= set(frame["key"])
    assert (frame["title"] != "").all() and "unknown" not in set(frame["grade"])
