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
exposed_<purpose>_s,    the same by purpose: one pair per registered
hidden_<purpose>_s      parallelism role (``data``, ``fsdp``, ``tensor``,
                        ``expert``, ``pipeline``, ``context``, ...), the role
                        that issued each collective
                        (:mod:`tpusim.program.builders.roles`)
======================  =====================================================

The ``comparison`` table is :mod:`tpusim.results.comparison`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, is_dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tpusim.later import LaterModule

if TYPE_CHECKING:
    import pandas as pd

    from tpusim.topology.base import LinkTable
else:
    pd = LaterModule("pandas")

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
    rows = [asdict(r) if is_dataclass(r) and not isinstance(r, type) else dict(r) for r in results]
    return pd.DataFrame(rows, columns=list(COLLECTIVE_COLUMNS))


def links_frame(links: LinkTable, link_bytes: np.ndarray, time_s: float) -> pd.DataFrame:
    """One row per directed link of a topology's :class:`LinkTable`."""
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
