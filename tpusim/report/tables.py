"""Tables as text and JSON-ready records: a scenario run's comparison table (as a
frame and as text), the text of ``tpusim topo``, aligned text tables, and byte counts
as whole numbers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tpusim import units
from tpusim.results.comparison import comparison_frame
from tpusim.results.records import Record

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "TABLE_WIDTH",
    "comparison_cells",
    "comparison_table",
    "format_table",
    "integer_bytes",
    "ratio_rows",
    "text_table",
    "topology_lines",
]


def comparison_table(records: Iterable[Record]) -> pd.DataFrame:
    """Key figures of a scenario run (its records, ``run.records``; rows read back from
    ``summary.csv`` become records with :func:`tpusim.workloads.record_from_row`): one
    column per system, one row per figure (the figure's unit in its name).
    Collectives give their time at the smallest size and bus bandwidth at the largest;
    programs their step time, MFU, exposed communication, throughput per chip and,
    where configured, energy and cost per token; decode steps their latency per token."""
    return comparison_frame(list(records))


def integer_bytes(tree: object) -> object:
    """``tree`` (a JSON record) with every byte count a whole number: a float under a
    key ``bytes`` or ``*_bytes`` (or in a list there) that is whole becomes an int, so
    ``--json`` prints ``1048576``, not ``1048576.0``. Other values are kept."""
    if isinstance(tree, dict):
        return {k: _whole(v) if _is_bytes_key(k) else integer_bytes(v) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return [integer_bytes(v) for v in tree]
    return tree


def _is_bytes_key(key: object) -> bool:
    return isinstance(key, str) and (key == "bytes" or key.endswith("_bytes"))


def _whole(value: object) -> object:
    if isinstance(value, list | tuple):
        return [_whole(v) for v in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    return integer_bytes(value)


#: Widest line of a comparison table as text (characters): wider tables (one column
#: per system: design-space has 40) wrap into blocks of columns, each block repeating
#: the figure names (a block holds at least one column).
TABLE_WIDTH = 120


def _cell(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"


def _short(value: float) -> str:
    """An interval's end: 3 significant digits, whole numbers from 1,000 (no exponent)."""
    return f"{value:,.0f}" if abs(value) >= 1e3 else f"{value:.3g}"


def comparison_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """A comparison table's cells as text: 4 significant digits (whole numbers with
    thousands separators from 10,000), a cost-model figure's 80% interval after it as
    ``[lo-hi]`` (``attrs["intervals"]``), blanks for missing values."""
    intervals = frame.attrs.get("intervals", {})
    shown = frame.astype(object)
    for figure in frame.index:
        for system in frame.columns:
            value = frame.at[figure, system]
            if value != value:  # NaN: the system lacks the figure
                shown.at[figure, system] = ""
                continue
            text = _cell(value)
            if system in intervals.get(figure, {}):
                lo, hi = intervals[figure][system]
                text += f" [{_short(lo)}-{_short(hi)}]"
            shown.at[figure, system] = text
    return shown


def ratio_rows(frame: pd.DataFrame) -> list[list[str]]:
    """``[figure, system, "R [lo-hi]"]`` per ratio to the first system with its 80%
    interval (``attrs["ratios"]``)."""
    return [
        [str(figure), system, f"{r:.3g} [{lo:.3g}-{hi:.3g}]"]
        for figure, by_system in frame.attrs.get("ratios", {}).items()
        for system, (r, lo, hi) in by_system.items()
    ]


def format_table(frame: pd.DataFrame) -> str:
    """A comparison table as text (:func:`comparison_cells`), wrapped into blocks of
    columns at :data:`TABLE_WIDTH` characters; then the ratios to the first system
    with their intervals (``attrs["ratios"]``), if any."""
    text = comparison_cells(frame).to_string(justify="right", line_width=TABLE_WIDTH)
    lines = [line.rstrip(" \\") for line in text.splitlines()]
    return "\n".join(lines + _ratio_lines(frame))


def _ratio_lines(frame: pd.DataFrame) -> list[str]:
    """``figure: system / baseline R [lo-hi]`` per ratio of ``attrs["ratios"]``."""
    ratios = frame.attrs.get("ratios", {})
    if not ratios:
        return []
    base = frame.columns[0]
    lines = [
        "",
        "[lo-hi]: 80% prediction interval (docs/validation.md); none on exact figures and "
        "on kinds without a residual model yet (summary.csv's interval_basis says which)",
        f"ratios to {base} (80% interval from paired held-out residuals):",
    ]
    for figure, by_system in ratios.items():
        parts = [f"{s} {r:.3g} [{lo:.3g}-{hi:.3g}]" for s, (r, lo, hi) in by_system.items()]
        lines.append(f"  {figure}: " + ", ".join(parts))
    return lines


def topology_lines(rec: dict[str, Any]) -> list[str]:
    """The text ``tpusim topo`` prints for one :func:`topology_summary` record."""
    degree = rec["degree"]
    flops = ", ".join(f"{d} {units.format_flops(v)}" for d, v in rec["peak_flops"].items())
    kinds = ", ".join(f"{k} {n}" for k, n in rec["links_by_kind"].items())
    return [
        f"system          {rec['system']} ({rec['chip']} chips)",
        f"topology        {rec['topology']}  {_shape_text(rec['shape'])}",
        f"chips           {rec['chips']:,}",
        f"links           {rec['links']:,} bidirectional ({kinds})",
        f"degree          min {degree['min']}, mean {degree['mean']:.2f}, max {degree['max']}",
        f"diameter        {rec['diameter_hops']} hops",
        f"mean hops       {rec['mean_hops']:.3f}",
        f"bisection       {units.format_bandwidth(rec['bisection_bandwidth_Bps'])} (one direction)",
        f"ICI link        {units.format_bandwidth(rec['link_bandwidth_Bps'])} per direction, "
        f"{units.format_time(rec['hop_latency_s'])} per hop",
        f"peak compute    {flops}",
        f"HBM total       {units.format_bytes(rec['hbm_capacity_bytes'], binary=False)}",
    ]


def _shape_text(shape: dict[str, Any]) -> str:
    if "dims" in shape:
        wrap = "".join("W" if w else "-" for w in shape["wraparound"])
        return f"{'x'.join(map(str, shape['dims']))} wrap {wrap}" + (
            " twisted" if shape["twisted"] else ""
        )
    if "groups" in shape:
        return (
            f"{shape['chips_per_board']} chips/board x {shape['boards_per_group']} boards/group "
            f"x {shape['groups']} groups ({shape['arrangement']})"
        )
    return f"{shape['pods']} pods of {shape['chips_per_pod']:,} chips via {shape['fabric']}"


def text_table(rows: Sequence[Mapping[str, object]], columns: Sequence[str]) -> str:
    """``rows`` as left-aligned text columns under a header line (the commands' tables)."""
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines += ["  ".join(str(r[c]).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(lines)
