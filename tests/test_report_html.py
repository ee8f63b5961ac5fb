"""``report.html`` (issue 15): one self-contained page per run, parsed back with
html.parser: every figure the run wrote is inlined byte for byte, every table is there
with the rows of the CSV it mirrors, and nothing is loaded from outside the page."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import re
from html.parser import HTMLParser

import pandas as pd
import pytest
from helpers import shared_claims

pytest.importorskip("matplotlib")

import tpusim
from tpusim.cli import main

SYSTEMS = {
    "iw-64.yaml": "name: iw-64\nchip: ironwood\ntopology: {kind: torus, dims: [4, 4, 4]}\n",
    "fly-32.yaml": (
        "name: fly-32\nchip: tpu8i\ntopology: {kind: boardfly, chips_per_board: 4,"
        " boards_per_group: 4, groups: 2}\n"
    ),
}
SCENARIO = """\
name: tiny-report
description: "a small run for the report test"
network: {fidelity: flow}
systems: [iw-64.yaml, fly-32.yaml]
plots: true
claims: true
assumptions:
  power_per_chip: {ironwood: 1000 W, tpu8i: 900 W}
  power_basis: fp8
  sources:
    power_per_chip.ironwood: {source: HC25, grade: derived, note: "test figure"}
workloads:
  - {name: topology, kind: topology}
  - {name: ar, kind: collective, op: all-reduce, bytes: 1 MiB, sweep: {bytes: [64 KiB, 1 MiB]}}
  - {name: train, kind: training_step, layers: 1, d_model: 1024, d_ff: 4096, heads: 8,
     head_dim: 128, seq: 256, batch_per_shard: 1, dtype: fp8, mesh: {data: auto},
     data_axis: data}
  - {name: decode, kind: decode_step, layers: 1, d_model: 1024, d_ff: 4096, heads: 8,
     kv_heads: 8, head_dim: 128, batch: 4, context: 512, dtype: fp8, mesh: {replica: auto},
     sweep: {kv_cache: [hbm, sram]}}
"""


class Page(HTMLParser):
    """Tables (id -> rows of cell texts), images (alt -> src), tags seen."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.images: dict[str, str] = {}
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self._table: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag == "table":
            self._table = attributes.get("id") or ""
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []
        elif tag == "img":
            self.images[attributes.get("alt") or ""] = attributes.get("src") or ""

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


@pytest.fixture(scope="module")
def report(tmp_path_factory, claims_table):
    """The run, its claims table the session's (:func:`helpers.shared_claims`)."""
    tmp = tmp_path_factory.mktemp("report")
    for name, text in SYSTEMS.items():
        (tmp / name).write_text(text)
    (tmp / "s.yaml").write_text(SCENARIO)
    out = tmp / "out"
    buf = io.StringIO()
    with shared_claims(claims_table, {"iw-64", "fly-32"}), contextlib.redirect_stdout(buf):
        code = main(["run", str(tmp / "s.yaml"), "--out", str(out), "--json", "--quiet"])
    assert code == 0
    page = Page()
    page.feed((out / "report.html").read_text())
    return page, out, json.loads(buf.getvalue())


def test_every_figure_is_inlined_byte_for_byte(report):
    page, out, _ = report
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert {"summary.png", "busbw-all-reduce.png", "decode.png", "steps.png"} <= set(pngs)
    assert sorted(page.images) == pngs
    for name, src in page.images.items():
        prefix = "data:image/png;base64,"
        assert src.startswith(prefix)
        assert base64.b64decode(src[len(prefix) :]) == (out / name).read_bytes()


def test_nothing_is_loaded_from_outside_the_page(report):
    page, _, _ = report
    assert not [t for t, _ in page.tags if t in ("script", "link", "iframe", "object")]
    sources = [a.get("src") for _, a in page.tags if a.get("src")]
    assert sources and all(s.startswith("data:") for s in sources)


def test_every_table_is_present(report):
    page, _, _ = report
    assert {"provenance", "comparison", "claims", "energy", "assumptions", "sources"} <= set(
        page.tables
    )


def test_comparison_and_claims_tables_mirror_their_csvs(report):
    page, out, _ = report
    comparison = pd.read_csv(out / "comparison.csv", index_col="figure")
    header, *rows = page.tables["comparison"]
    systems = [c for c in comparison.columns if not c.endswith(("_lo", "_hi")) and "/" not in c]
    assert header == ["figure", *systems]
    # a figure with an interval in the CSV shows it in its cell: "value [lo-hi]"
    ranged = [f for f in comparison.index if pd.notna(comparison.loc[f, f"{systems[0]}_lo"])]
    assert ranged
    for row in rows:
        if row[0] in ranged:
            assert re.search(r"\[[0-9.,]+-[0-9.,]+\]$", row[1]), row
    basis = " [power basis: fp8 peak]"  # beside every energy and power figure
    assert [r[0].removesuffix(basis) for r in rows] == list(comparison.index)
    marked = [r[0] for r in rows if r[0].endswith(basis)]
    assert marked == [r[0] for r in rows if "energy per" in r[0] or "power per" in r[0]]
    assert marked
    chips = next(r for r in rows if r[0] == "chips")
    assert chips[1:] == ["64", "32"]
    claims = pd.read_csv(out / "claims.csv")
    header, *rows = page.tables["claims"]
    assert header == list(claims.columns)
    assert [r[0] for r in rows] == list(claims["claim"])


def test_provenance_names_version_scenario_and_date(report):
    page, _, record = report
    items = dict(page.tables["provenance"][1:])
    assert items["tpusim version"] == tpusim.__version__
    assert items["scenario"] == record["scenario"] == "tiny-report"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", items["written (UTC)"])
    assert items["systems"] == "iw-64, fly-32"


def test_assumptions_list_every_unpublished_number_with_grade_and_source(report):
    from tpusim.config import load_chip

    page, _, _ = report
    rows = {(r[0], r[1]): r[2:4] for r in page.tables["assumptions"][1:]}
    for chip in ("ironwood", "tpu8i"):
        for path, src in load_chip(chip).sources.items():
            if src.grade != "primary":
                assert rows[(chip, path)] == [src.grade, src.source]
            else:
                assert (chip, path) not in rows
    assert rows[("tiny-report", "assumptions.power_per_chip.ironwood")] == ["derived", "HC25"]


def test_energy_table_shows_power_and_its_basis(report):
    page, _, _ = report
    header, *rows = page.tables["energy"]
    by_chip = {r[0]: dict(zip(header, r, strict=True)) for r in rows}
    assert by_chip["ironwood"]["full-load power per chip (W)"] == "1000"
    assert by_chip["tpu8i"]["derived at dtype"] == "fp8"
    assert by_chip["ironwood"]["source"] == "HC25"


def test_sources_table_links_every_cited_key(report):
    page, out, _ = report
    csv = pd.read_csv(out / "sources.csv", keep_default_na=False)
    keys = [r[0] for r in page.tables["sources"][1:]]
    assert set(csv["key"]) <= set(keys) and "HC25" in keys
