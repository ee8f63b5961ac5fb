"""Max-min fair rates by progressive filling, vectorised over flows and links.

The solver of the flow fidelity (:mod:`.flow`). A problem is an incidence list
(``inc_flow[i]`` crosses link ``inc_link[i]``) and the capacity of every link.
Each round raises every unfrozen flow by the smallest fair share left on any link,
then freezes the flows of the links that became full. A round touches only the links
still open and the entries of the flows it freezes: the entries are indexed once per
solve by flow and by link (CSR), without a general sort when the caller's order
already groups them (entries in flow order; ``link_order`` in a few runs by link).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

FULL_LINK_REL_SLACK = 1e-9
"""A link whose unused bandwidth is at most this fraction of its capacity counts as
full (dimensionless). Progressive filling subtracts ``level * crossing`` round after
round; the float round-off of that is ~1e-16 relative, so 1e-9 absorbs it with a wide
margin while staying far below any rate difference that matters (a 1e-9 relative
rate error moves a 1 s collective by 1 ns)."""


def max_min_rates(
    inc_flow: np.ndarray,
    inc_link: np.ndarray,
    capacity: np.ndarray,
    num_flows: int,
    tolerance: float = 0.0,
    link_order: np.ndarray | Callable[[], np.ndarray] | None = None,
) -> np.ndarray:
    """Max-min fair rate (bytes/s) of each flow by progressive filling.

    ``inc_flow[i]`` crosses link ``inc_link[i]`` (indices into ``capacity``, bytes/s).
    Every flow must cross at least one link (one that crosses none gets rate 0).
    Symmetric patterns (collectives on tori) end in one round: every link in use
    fills at once, and that is found from the link counts alone. Otherwise each round
    costs the links still open plus the entries of the flows it freezes, so patterns
    with thousands of distinct rates (all-to-all on Boardfly) stay cheap.

    ``tolerance`` (relative, 0 is exact): a round also freezes every link whose fair
    share is within ``tolerance`` of the new level, at that level, so every flow ends
    on a link at least (1 - tolerance) full and no link is ever oversubscribed (the
    rest is left idle). A pattern whose rates spread over a ratio R then needs about
    ln(R) / tolerance rounds instead of one per distinct rate. A flow frozen early can
    lose more than ``tolerance`` of its exact rate when capacity it would have
    reclaimed goes idle (random instances at 1%: up to 5% on a few flows); the
    slowest flows, which end a collective, are frozen at the exact minimum.

    ``link_order`` (optional, speed only): see :class:`MaxMinProblem`.
    """
    return MaxMinProblem(inc_flow, inc_link, capacity, num_flows, link_order).rates(tolerance)


class MaxMinProblem:
    """A max-min problem whose flows can be removed one set at a time and re-solved;
    the indexes (CSR by flow, by link) are built once, when first needed.

    Arguments as for :func:`max_min_rates`; ``dead``: flows already removed (a mask).
    ``link_order`` (speed only): a permutation of the entries under which ``inc_link``
    is made of a few sorted runs (each batch's entries sorted by link), or a function
    returning one, called only when a solve needs more than one round; without it the
    entries are sorted by link then. Solving after :meth:`remove` gives the rates a
    new problem of the remaining flows would give, to the last bit: removed flows
    count as frozen from the start, and every link's count is that of live flows.
    """

    def __init__(
        self,
        inc_flow: np.ndarray,
        inc_link: np.ndarray,
        capacity: np.ndarray,
        num_flows: int,
        link_order: np.ndarray | Callable[[], np.ndarray] | None = None,
        dead: np.ndarray | None = None,
    ):
        self.inc_flow, self.inc_link, self.num_flows = inc_flow, inc_link, num_flows
        self.capacity = np.asarray(capacity, dtype=np.float64)
        self.dead = np.zeros(num_flows, dtype=bool) if dead is None else dead.copy()
        live = inc_link if dead is None else inc_link[~self.dead[inc_flow]]
        self.live_counts = np.bincount(live, minlength=self.capacity.size)
        self._link_order = link_order
        self._flows: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._links: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    def remove(self, flows: np.ndarray) -> np.ndarray:
        """Remove ``flows`` (live flow indices); returns the link ids they crossed."""
        ptr, hops, links = self._by_flow()
        freed = links[_ranges(ptr, hops, flows)]
        self.dead[flows] = True
        self.live_counts -= np.bincount(freed, minlength=self.capacity.size)
        return freed

    def rates(self, tolerance: float = 0.0) -> np.ndarray:
        """Max-min rates (bytes/s) of the live flows; removed flows get 0."""
        rate = np.zeros(self.num_flows)
        used = np.flatnonzero(self.live_counts)
        if not used.size:
            return rate
        cap = self.capacity[used]
        level = _first_level(cap, self.live_counts[used].astype(np.float64), tolerance)
        if level is not None:  # every link in use filled in the first round
            rate[self.inc_flow] = level
            rate[self.dead] = 0.0
            return rate
        all_used, link_ptr, link_len, flow_of_link_entry = self._by_link()
        ptr, hops, links = self._by_flow()
        local = np.zeros(self.capacity.size, dtype=np.int64)
        local[all_used] = np.arange(all_used.size)

        def links_of(flows: np.ndarray) -> np.ndarray:
            return local[links[_ranges(ptr, hops, flows)]]

        crossing = self.live_counts[all_used].astype(np.float64)
        index = (links_of, link_ptr, link_len, flow_of_link_entry)
        _fill(index, self.capacity[all_used], crossing, self.dead.copy(), tolerance, rate)
        return rate

    def _by_flow(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """CSR by flow: row pointers, hops per flow and the link of each entry in flow
        order. Entries already in flow order (the flow network's are) need no sort."""
        if self._flows is None:
            inc_flow, links = self.inc_flow, self.inc_link
            hops = np.bincount(inc_flow, minlength=self.num_flows)
            ptr = np.zeros(self.num_flows + 1, dtype=np.int64)
            np.cumsum(hops, out=ptr[1:])
            if inc_flow.size > 1 and not bool((inc_flow[1:] >= inc_flow[:-1]).all()):
                links = links[np.argsort(inc_flow, kind="stable")]
            self._flows = (ptr, hops, links)
        return self._flows

    def _by_link(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """CSR by link over every link any entry crosses: those link ids, row
        pointers, entries per link and the flow of each entry in link order. Timsort on
        a few sorted runs (``link_order``) is linear in the entries."""
        if self._links is None:
            counts = np.bincount(self.inc_link, minlength=self.capacity.size)
            used = np.flatnonzero(counts)
            link_len = counts[used]
            link_ptr = np.zeros(used.size + 1, dtype=np.int64)
            np.cumsum(link_len, out=link_ptr[1:])
            order = self._link_order() if callable(self._link_order) else self._link_order
            if order is None:
                order = np.argsort(self.inc_link, kind="stable")
            else:
                order = order[np.argsort(self.inc_link[order], kind="stable")]
            self._links = (used, link_ptr, link_len, self.inc_flow[order])
        return self._links


def _first_level(cap: np.ndarray, crossing: np.ndarray, tolerance: float) -> float | None:
    """The first round's level (bytes/s) if it fills every link in use, else None."""
    step = (cap / crossing).min()
    level = 0.0 + step
    left = cap - step * crossing
    slack = np.maximum(cap * FULL_LINK_REL_SLACK, tolerance * level * crossing)
    return float(level) if bool((left <= slack).all()) else None


def _fill(
    index: tuple[Callable[[np.ndarray], np.ndarray], np.ndarray, np.ndarray, np.ndarray],
    cap: np.ndarray,
    crossing: np.ndarray,
    done: np.ndarray,
    tolerance: float,
    rate: np.ndarray,
) -> None:
    """Progressive filling over the links in use (fills ``rate`` in place).

    ``index``: ``links_of(flows)`` giving the (local) links of ``flows``, and the link
    CSR (row pointers, lengths, flow of each entry). ``crossing``: live unfrozen flows
    per link, as floats holding whole counts; ``done``: flows frozen or removed. The
    open links are kept compacted (``open_ids``; rows of ``state``: bytes/s left,
    crossing, full-link slack), so a round costs the links still open.
    """
    links_of, link_ptr, link_len, flow_of_link_entry = index
    stamp = np.zeros(rate.size, dtype=np.int64)
    level = 0.0
    open_ids = np.flatnonzero(crossing)
    state = np.stack([cap[open_ids], crossing[open_ids], cap[open_ids] * FULL_LINK_REL_SLACK])
    left, cross, slack = state
    while open_ids.size:
        step = (left / cross).min()
        level += step
        left -= step * cross
        if tolerance:
            slack = np.maximum(state[2], tolerance * level * cross)
        is_full = left <= slack
        rows = open_ids[is_full]
        newly = _unseen(flow_of_link_entry[_ranges(link_ptr, link_len, rows)], done, stamp)
        done[newly] = True
        rate[newly] = level
        crossing -= np.bincount(links_of(newly), minlength=cap.size)
        cross[:] = crossing[open_ids]
        # crossing holds whole counts as floats: > 0.5 means "at least one flow left"
        keep = cross > 0.5
        keep[is_full] = False
        if not keep.all():  # compress: boolean indexing of a 2-D array's columns is slow
            open_ids, state = open_ids[keep], np.compress(keep, state, axis=1)
            left, cross, slack = state


def _unseen(flows: np.ndarray, done: np.ndarray, stamp: np.ndarray) -> np.ndarray:
    """The distinct flows of ``flows`` not yet ``done``, without sorting: each flow
    keeps the one position whose index the scatter into ``stamp`` left standing."""
    flows = flows[~done[flows]]
    positions = np.arange(flows.size)
    stamp[flows] = positions
    return flows[stamp[flows] == positions]


def _ranges(ptr: np.ndarray, row_len: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(ptr[r], ptr[r + 1])`` for every r in ``rows``
    (``row_len``: ``np.diff(ptr)``)."""
    starts, counts = ptr[rows], row_len[rows]
    ends = np.cumsum(counts)
    if not ends.size or ends[-1] == 0:
        return np.zeros(0, dtype=np.int64)
    return np.repeat(starts - ends + counts, counts) + np.arange(ends[-1])
