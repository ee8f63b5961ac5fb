"""The ``collectives`` and ``links`` tables.

``collectives`` (one row per simulated collective):

======================  =====================================================
column                  meaning
======================  =====================================================
system, op, algorithm   what ran; ``fidelity`` analytic / flow / packet
engine                  who reduced: tensorcore, sparsecore, cae or none
bytes                   size in the nccl-tests convention (bytes)
chips                   chips taking part; ``group_size`` per group,
                        ``num_groups`` groups running at once
time_s                  completion time of the whole collective (s)
algbw_Bps, busbw_Bps    bytes / time_s, and algbw x nccl-tests' bus factor; None
                        (JSON null, empty in CSV) when time_s is 0 (one chip)
max_hops, mean_hops     over every flow of every step
num_steps, num_flows    schedule steps, flows sent
max_link_utilization    max over links of bytes / (bandwidth x time_s)
mean_link_utilization   the same, averaged over links that carried bytes
busiest_link_bytes      bytes on the busiest directed link
num_events              network events (flow: rate recomputations)
======================  =====================================================

``links`` (one row per directed link): ``src``, ``dst`` (node ids: chips first,
then fabric switches), ``kind`` (ici, local, board, global, or the fabric's
name), ``bandwidth_Bps``, ``latency_s``, ``bytes`` carried, ``utilization``
(bytes / (bandwidth x time_s)).

``summary`` rows of a ``training_step`` end with its communication breakdown
(:mod:`tpusim.results.overlap`), two columns per collective kind (``all_gather``,
``reduce_scatter``, ``all_reduce``, ``all_to_all``, ``collective_permute``):

======================  =====================================================
exposed_<kind>_s        time the kind's collectives were in flight while the
                        TensorCore computed nothing (s; split equally between the
                        collectives in flight at once, so the kinds sum to the
                        step's ``exposed_communication_time_s``)
hidden_<kind>_s         time the kind's collectives were in flight beside compute
                        (s; each collective counts its own)
exposed_<purpose>_s,    the same by purpose: ``fsdp`` (weight gathers, gradient
hidden_<purpose>_s      reduce-scatters), ``tensor`` (tensor-parallel all-reduces,
                        collective-matmul permutes), ``data`` (other gradient
                        collectives), ``expert`` (MoE all-to-alls), ``pipeline``
                        (stage permutes)
======================  =====================================================

``comparison`` (one column per system, one row per figure, the figure's unit in its
name): each record's :meth:`~tpusim.results.records.Record.figures` in record order,
then each record type's :meth:`~tpusim.results.records.Record.sweep_figures`. Rows
whose values are all integers (chips, diameter in hops) are listed in the frame's
``attrs["integer_rows"]`` and written as integers (:func:`comparison_for_csv`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, is_dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from tpusim.results.records import Record

COLLECTIVE_COLUMNS = (
    "system",
    "op",
    "bytes",
    "chips",
    "group_size",
    "num_groups",
    "algorithm",
    "fidelity",
    "engine",
    "time_s",
    "algbw_Bps",
    "busbw_Bps",
    "max_hops",
    "mean_hops",
    "num_steps",
    "num_flows",
    "max_link_utilization",
    "mean_link_utilization",
    "busiest_link_bytes",
    "num_events",
)
LINK_COLUMNS = ("src", "dst", "kind", "bandwidth_Bps", "latency_s", "bytes", "utilization")


def link_utilization(
    link_bytes: np.ndarray, bandwidth_Bps: np.ndarray, time_s: float
) -> dict[str, float]:
    """``max_link_utilization`` (over all links), ``mean_link_utilization`` (over links
    that carried bytes) and ``busiest_link_bytes``; utilisation = bytes / (bw x time)."""
    used = link_bytes > 0
    if time_s <= 0 or not used.any():
        return {
            "max_link_utilization": 0.0,
            "mean_link_utilization": 0.0,
            "busiest_link_bytes": float(link_bytes.max(initial=0.0)),
        }
    util = link_bytes / (bandwidth_Bps * time_s)
    return {
        "max_link_utilization": float(util.max()),
        "mean_link_utilization": float(util[used].mean()),
        "busiest_link_bytes": float(link_bytes.max()),
    }


def collectives_frame(results: Iterable[Any]) -> pd.DataFrame:
    """One row per CollectiveResult (or record dict), columns as documented above."""
    import pandas as pd

    rows = [asdict(r) if is_dataclass(r) and not isinstance(r, type) else dict(r) for r in results]
    return pd.DataFrame(rows, columns=list(COLLECTIVE_COLUMNS))


def links_frame(links: Any, link_bytes: np.ndarray, time_s: float) -> pd.DataFrame:
    """One row per directed link of a topology's :class:`LinkTable`."""
    import pandas as pd

    util = link_bytes / (links.bandwidth_Bps * time_s) if time_s > 0 else np.zeros(len(links))
    return pd.DataFrame(
        {
            "src": links.src,
            "dst": links.dst,
            "kind": np.asarray(links.kind_names)[links.kind],
            "bandwidth_Bps": links.bandwidth_Bps,
            "latency_s": links.latency_s,
            "bytes": link_bytes,
            "utilization": util,
        },
        columns=list(LINK_COLUMNS),
    )


def comparison_frame(records: Sequence[Record]) -> pd.DataFrame:
    """The comparison table of a scenario run's records (see above); a figure a
    system lacks is NaN."""
    import pandas as pd

    table: dict[str, dict[str, float]] = {}
    whole: dict[str, bool] = {}

    def put(figure: str, system: str, value: float | None) -> None:
        if value is not None:
            table.setdefault(figure, {})[system] = float(value)
            counted = isinstance(value, int | np.integer) and not isinstance(value, bool)
            whole[figure] = whole.get(figure, True) and counted

    for record in records:
        for figure, value in record.figures():
            put(figure, record.system, value)
    for kind in dict.fromkeys(type(r) for r in records):
        for figure, system, value in kind.sweep_figures([r for r in records if type(r) is kind]):
            put(figure, system, value)
    systems = list(dict.fromkeys(r.system for r in records))
    frame = pd.DataFrame.from_dict(table, orient="index").reindex(columns=systems)
    frame.attrs["integer_rows"] = [figure for figure, counted in whole.items() if counted]
    return frame


def comparison_for_csv(frame: pd.DataFrame) -> pd.DataFrame:
    """A comparison table with the rows :func:`comparison_frame` marks as counts
    (``attrs["integer_rows"]``: every value an integer) holding Python ints, so a CSV
    writes ``1024``, not ``1024.0``."""
    out = frame.astype(object)
    for figure in frame.attrs.get("integer_rows", []):
        if figure in out.index:
            out.loc[figure] = [int(v) if v == v else None for v in frame.loc[figure]]
    return out
