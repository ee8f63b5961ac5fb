"""``report.html``: one self-contained page of a scenario run.

The page holds, in order: provenance (tpusim version, scenario, date, fidelity,
systems), the comparison table, the figures (every PNG the ``plots`` writer wrote,
embedded as base64 ``data:`` URIs), the vendor-claims table, the energy basis (power
per chip at full load, the dtype it was derived at, the idle share), every assumption
(each number of the systems' chip and system files and of the scenario graded other
than ``primary``, with its grade, source and note) and the sources cited. It loads
nothing from files or the network: it can be mailed or archived alone.

Every table is an HTML ``<table>`` with an ``id`` (``provenance``, ``comparison``,
``ratios``, ``claims``, ``energy``, ``assumptions``, ``sources``) and every figure a ``<figure>``
whose ``<img>`` has ``alt`` text naming its file, so a parser can check the page.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import tpusim
from tpusim.report.sources import load_references, sources_frame
from tpusim.report.tables import comparison_cells, ratio_rows
from tpusim.results.energy import IDLE_POWER_FRACTION
from tpusim.results.files import atomic_write_text
from tpusim.results.writers import Outputs

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["assumption_rows", "render_report", "table_html", "write_html_report"]

#: Grades that are not a published number, listed under "assumptions".
NOT_PUBLISHED = ("secondary", "derived", "calibrated", "assumption")

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1150px;
       color: #222; line-height: 1.4; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; display: block;
        overflow-x: auto; max-width: 100%; }
td { overflow-wrap: break-word; }
th, td { border: 1px solid #ddd; padding: 3px 7px; vertical-align: top; }
th { background: #f3f3f3; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #555; }
.note { color: #555; font-size: 0.9em; }
"""


class Raw(str):
    """Text already in HTML (a link): put in a cell as it is."""


def _link(url: str) -> Raw:
    """``url`` as a link (empty when there is none)."""
    safe = html.escape(url, quote=True)
    return Raw(f'<a href="{safe}">{safe}</a>' if url else "")


def _cell(value: object) -> str:
    """A table cell: numbers right-aligned to 4 significant digits (thousands
    separated from 10,000), blank for missing, text escaped (unless :class:`Raw`)."""
    if value is None or (isinstance(value, float) and value != value):
        return "<td></td>"
    if isinstance(value, Raw):
        return f"<td>{value}</td>"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"<td>{html.escape(str(value))}</td>"
    text = f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    return f'<td class="num">{text}</td>'


def table_html(
    table_id: str, header: Sequence[str], rows: Iterable[Sequence[object]], caption: str = ""
) -> str:
    """An HTML table with ``id=table_id``: a header row and one row per sequence."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join(f"<tr>{''.join(_cell(v) for v in row)}</tr>" for row in rows)
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return (
        f'<table id="{table_id}">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    )


def _frame_table(table_id: str, frame: pd.DataFrame, index_name: str) -> str:
    """A DataFrame as :func:`table_html`, its index as the first column."""
    header = [index_name, *[str(c) for c in frame.columns]]
    rows = [[i, *r] for i, r in zip(frame.index, frame.itertuples(index=False), strict=True)]
    return table_html(table_id, header, rows)


def _comparison(outputs: Outputs) -> str:
    """The comparison table, each energy and power figure marked with the dtype its
    power was derived at (the scenario's ``assumptions.power_basis``)."""
    frame = comparison_cells(outputs.comparison)
    basis = (outputs.resolved.get("assumptions") or {}).get("power_basis")
    if basis:
        marked = [
            f"{name} [power basis: {basis} peak]"
            if ("energy per" in str(name) or "power per chip" in str(name))
            else name
            for name in frame.index
        ]
        frame.index = marked
    table = _frame_table("comparison", frame, "figure")
    ratios = ratio_rows(outputs.comparison)
    if not ratios:
        return table
    base = outputs.comparison.columns[0]
    note = (
        '<p class="note">[lo-hi]: 80% prediction interval from held-out residuals '
        "(docs/validation.md); ratios to the first system take theirs from pairs of "
        "held-out chips running the same work.</p>"
    )
    header = ["figure", "system", f"ratio to {base} [80% interval]"]
    return table + note + table_html("ratios", header, ratios)


def _figures(folder: Path) -> str:
    """Every PNG in ``folder`` as a figure with its bytes inlined (base64)."""
    parts = []
    for png in sorted(folder.glob("*.png"), key=_figure_order):
        data = base64.b64encode(png.read_bytes()).decode("ascii")
        name = html.escape(png.name)
        parts.append(
            f'<figure><img src="data:image/png;base64,{data}" alt="{name}">'
            f"<figcaption>{name}</figcaption></figure>"
        )
    return "\n".join(parts) or '<p class="note">No figures: the scenario sets plots: false.</p>'


def _figure_order(path: Path) -> tuple[int, str]:
    """The summary first, then the collective curves, then the rest by name."""
    order = ("summary", "busbw", "hops", "links", "steps", "decode", "timeline")
    rank = next((i for i, p in enumerate(order) if path.stem.startswith(p)), len(order))
    return rank, path.name


def _provenance(outputs: Outputs) -> str:

    resolved = outputs.resolved
    run = outputs.run
    rows = [
        ("tpusim version", tpusim.__version__),
        ("scenario", resolved.get("name", "")),
        ("description", resolved.get("description", "")),
        ("written (UTC)", dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")),
        *_network_rows(resolved.get("network")),
        ("systems", ", ".join(_system_names(outputs))),
        ("workload points x systems", len(run.records)),
        ("simulated in (s)", round(run.wall_s, 1)),
    ]
    return table_html("provenance", ("item", "value"), rows)


def _network_rows(network: object) -> list[tuple[str, object]]:
    """The network tree of a resolved scenario: its fidelity, then each of its options."""
    tree = network if isinstance(network, dict) else {}
    rows: list[tuple[str, object]] = [("fidelity", tree.get("fidelity", ""))]
    return rows + [(f"network {k}", v) for k, v in tree.items() if k != "fidelity"]


def _system_names(outputs: Outputs) -> list[str]:
    """The systems' names (as the rows name them), else as the scenario lists them."""
    if outputs.systems:
        return [str(s.name) for s in outputs.systems]
    return [str(s) for s in outputs.resolved.get("systems", [])]


def _energy(outputs: Outputs) -> str:
    """Power per chip at full load, its basis and source, and the idle share."""
    assumptions = outputs.resolved.get("assumptions") or {}
    basis = assumptions.get("power_basis") or "not stated"
    sources = assumptions.get("sources") or {}
    chips = {s.chip.name: s.chip for s in outputs.systems}
    rows = []
    for name, chip in chips.items():
        given = (assumptions.get("power_per_chip") or {}).get(name)
        typical = chip.power.typical_W if chip.power is not None else None
        power = given if given is not None else typical
        where = "scenario assumption" if given is not None else "chip file power.typical"
        source = sources.get(f"power_per_chip.{name}") or {}
        rows.append(
            (
                name,
                power,
                basis,
                where,
                source.get("source", ""),
                source.get("grade", ""),
                source.get("note", ""),
            )
        )
    header = (
        "chip",
        "full-load power per chip (W)",
        "derived at dtype",
        "from",
        "source",
        "grade",
        "note",
    )
    note = (
        f'<p class="note">Mean power during a step = full-load power x ({IDLE_POWER_FRACTION:g}'
        f" + {1 - IDLE_POWER_FRACTION:g} x busy share), busy share = compute time / step"
        " time (tpusim/results/energy.py; idle share: Barroso and Hoelzle 2007, an"
        " assumption for TPU hosts). Per-token figures count the tokens of the layers"
        " simulated: for a model fragment they are the fragment's, not the whole"
        " model's.</p>"
    )
    return table_html("energy", header, rows) + note


def assumption_rows(outputs: Outputs) -> list[tuple[str, str, str, str, str]]:
    """(where, number, grade, source, note) of every number graded other than primary:
    the chip and system files of the run's systems, then the scenario's assumptions."""
    rows: list[tuple[str, str, str, str, str]] = []
    seen: set[tuple[str, str]] = set()
    for system in outputs.systems:
        for part in (system, system.pod):
            if part is None:
                continue
            for owner, sources in (
                (part.chip.name, part.chip.sources),
                (part.name, part.spec.sources),
            ):
                for path, src in sources.items():
                    if src.grade in NOT_PUBLISHED and (owner, path) not in seen:
                        seen.add((owner, path))
                        rows.append((owner, path, src.grade, src.source, src.note))
    scenario = str(outputs.resolved.get("name", "scenario"))
    for path, src in ((outputs.resolved.get("assumptions") or {}).get("sources") or {}).items():
        rows.append(
            (scenario, f"assumptions.{path}", src["grade"], src["source"], src.get("note", ""))
        )
    return rows


def _sources(outputs: Outputs) -> str:
    """Every source the systems and the scenario's assumptions cite, linked."""
    refs = load_references()
    rows = [list(r) for r in sources_frame(list(outputs.systems), refs).itertuples(index=False)]
    listed = {row[0] for row in rows}
    scenario = (outputs.resolved.get("assumptions") or {}).get("sources") or {}
    for key in sorted({str(s["source"]) for s in scenario.values()} - listed):
        ref = refs.get(key)
        title, url, grade = (ref.title, ref.url, ref.grade) if ref else ("", "", "unknown")
        rows.append([key, title, url, grade, "scenario assumptions"])
    linked = [
        [key, title, _link(url), grade, _count_by_owner(cited)]
        for key, title, url, grade, cited in rows
    ]
    header = ("key", "title", "url", "grade", "numbers citing it")
    return table_html("sources", header, linked)


def _count_by_owner(cited: str) -> str:
    """``tpu8i:a; tpu8i:b; ironwood:c`` -> ``tpu8i: 2, ironwood: 1`` (sources.csv has
    the full list)."""
    counts: dict[str, int] = {}
    for item in filter(None, (c.strip() for c in cited.split(";"))):
        owner = item.split(":", 1)[0]
        counts[owner] = counts.get(owner, 0) + 1
    return ", ".join(f"{owner}: {n}" for owner, n in counts.items()) or cited


def _claims(outputs: Outputs) -> str:
    claims = outputs.claims
    if claims is None:
        return '<p class="note">The scenario does not ask for the vendor-claims table.</p>'
    rows = [list(r) for r in claims.itertuples(index=False)]
    return table_html("claims", [str(c) for c in claims.columns], rows)


def render_report(outputs: Outputs, figures: Path) -> str:
    """The page (HTML text) of a run, with the PNGs of the folder ``figures`` inlined."""
    name = html.escape(str(outputs.resolved.get("name", "scenario")))
    sections = [
        ("Provenance", _provenance(outputs)),
        ("Comparison", _comparison(outputs)),
        ("Figures", _figures(figures)),
        ("Vendor claims", _claims(outputs)),
        ("Energy basis", _energy(outputs)),
        (
            "Assumptions",
            table_html(
                "assumptions",
                ("where", "number", "grade", "source", "note"),
                assumption_rows(outputs),
            ),
        ),
        ("Sources", _sources(outputs)),
    ]
    body = "\n".join(
        f'<section id="{_slug(title)}"><h2>{title}</h2>{content}</section>'
        for title, content in sections
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>tpusim report: {name}</title><style>{_STYLE}</style></head>"
        f"<body><h1>tpusim report: {name}</h1>\n{body}\n</body></html>\n"
    )


def _slug(title: str) -> str:
    """A section's id: ``Vendor claims`` -> ``section-vendor-claims``."""
    return "section-" + title.lower().replace(" ", "-")


def write_html_report(out: Path, outputs: Outputs) -> list[Path]:
    """The ``report`` output writer: ``report.html`` (see the module docstring), with
    the figures the writers before it put in ``out``."""
    path = out / "report.html"
    atomic_write_text(path, render_report(outputs, out))
    return [path]
