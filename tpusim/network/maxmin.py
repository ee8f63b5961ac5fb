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
from dataclasses import dataclass

import numpy as np

FULL_LINK_REL_SLACK = 1e-9
"""A link whose unused bandwidth is at most this fraction of its capacity counts as
full (dimensionless). Progressive filling subtracts ``level * crossing`` round after
round; the float round-off of that is ~1e-16 relative, so 1e-9 absorbs it with a wide
margin while staying far below any rate difference that matters (a 1e-9 relative
rate error moves a 1 s collective by 1 ns)."""


HISTORY_MAX_BYTES = 64 * 2**20
"""Memory (bytes) each of a solve's two per-round histories (bytes/s left, crossing;
8 bytes per link per round) may take; rounds past it are not recorded, and a
re-solve restarts at the last recorded round at the latest (the same rates, only
slower). An assumption: far above what collectives need (a 1 GiB all-reduce on
tpu8i-pod records ~60 rounds of ~7,000 links, 3 MiB), a bound for exact solves
(``tolerance`` 0) with thousands of distinct rates on very large topologies."""


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
    entries are sorted by link then.

    Re-solving after :meth:`remove` gives the rates a new problem of the remaining
    flows would give, bit for bit, but restarts progressive filling at the round that
    froze the first removed flow (or the last one recorded before it): the rounds
    before it are the same with or without the removed flows (a link they cross fills
    at their rate or later, so it bounded no earlier round), except for the bytes/s
    left on those links, which are replayed from the rounds' recorded steps and
    crossings with the removed flows taken out.
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
        self._index: _Index | None = None
        self._last: _Filling | None = None  # the last solve's rounds, for a restart
        self._removed: list[np.ndarray] = []  # links of flows removed since then
        self._restart_round = 0

    def remove(self, flows: np.ndarray) -> np.ndarray:
        """Remove ``flows`` (live flow indices); returns the link ids they crossed."""
        ptr, hops, links = self._by_flow()
        freed = links[_ranges(ptr, hops, flows)]
        self.dead[flows] = True
        self.live_counts -= np.bincount(freed, minlength=self.capacity.size)
        if self._last is not None and flows.size:
            self._removed.append(freed)
            first = int(self._last.round_of[flows].min())
            self._restart_round = min(self._restart_round, first)
        return freed

    def rates(self, tolerance: float = 0.0) -> np.ndarray:
        """Max-min rates (bytes/s) of the live flows; removed flows get 0. The array
        is the solve's own (a restart reads it): read it, do not write to it."""
        last, self._last = self._last, None
        removed, self._removed = self._removed, []
        restart, self._restart_round = self._restart_round, 0
        if last is not None and last.tolerance == tolerance and restart > 0 and removed:
            filling = self._restarted(last, restart, removed)
        else:
            used = np.flatnonzero(self.live_counts)
            rate = np.zeros(self.num_flows)
            if not used.size:
                return rate
            cap, counts = self.capacity[used], self.live_counts[used].astype(np.float64)
            level = _first_level(cap, counts, tolerance)
            if level is not None:  # every link in use filled in the first round
                rate[self.inc_flow] = level
                rate[self.dead] = 0.0
                return rate
            filling = self._fresh(tolerance, rate)
        _run_rounds(filling, self._indexed())
        self._last = filling
        self._restart_round = len(filling.history.open_ids) - 1  # the latest recorded
        return filling.rate  # a re-solve builds a new array: this one is never written again

    def _fresh(self, tolerance: float, rate: np.ndarray) -> _Filling:
        """Progressive filling from level 0 over every link with live flows."""
        index = self._indexed()
        crossing = self.live_counts[index.used].astype(np.float64)
        cap = self.capacity[index.used]
        open_ids = np.flatnonzero(crossing)
        rows = [cap[open_ids], crossing[open_ids], cap[open_ids] * FULL_LINK_REL_SLACK]
        round_of = np.full(self.num_flows, -1, dtype=np.int64)
        done, history = self.dead.copy(), _History(index.used.size)
        return _Filling(
            tolerance, rate, done, round_of, crossing, open_ids, np.stack(rows), history
        )

    def _restarted(self, last: _Filling, restart: int, removed: list[np.ndarray]) -> _Filling:
        """The last solve's filling rewound to the start of round ``restart``, with the
        ``removed`` flows' links (global ids, one per flow crossing) corrected."""
        index = self._indexed()
        gone, d = np.unique(index.local[np.concatenate(removed)], return_counts=True)
        history = last.history
        history.replay(restart, gone, d.astype(np.float64))
        open_ids, state, level = history.state_at(restart, self.capacity[index.used])
        history.truncate(restart)
        round_of = last.round_of
        # 0 <= round < restart in one pass: -1 (not frozen) reads as a huge unsigned
        frozen = round_of.view(np.uint64) < restart
        done = self.dead | frozen  # the others are frozen again, round_of rewritten
        # a flow removed before the last solve has rate 0 in it: frozen & dead reads 0
        rate = np.where(frozen, last.rate, 0.0)
        crossing = np.zeros(index.used.size)
        crossing[open_ids] = state[1]
        f = _Filling(last.tolerance, rate, done, round_of, crossing, open_ids, state, history)
        f.level = level
        return f

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

    def _indexed(self) -> _Index:
        """Both CSRs over every link any entry crosses, in local link ids. Timsort on a
        few sorted runs (``link_order``) is linear in the entries."""
        if self._index is None:
            counts = np.bincount(self.inc_link, minlength=self.capacity.size)
            used = np.flatnonzero(counts)
            local = np.zeros(self.capacity.size, dtype=np.int64)
            local[used] = np.arange(used.size)
            link_len = counts[used]
            link_ptr = np.zeros(used.size + 1, dtype=np.int64)
            np.cumsum(link_len, out=link_ptr[1:])
            order = self._link_order() if callable(self._link_order) else self._link_order
            if order is None:
                order = stable_order(self.inc_link)
            else:  # one batch's order is sorted already: its stable sort is itself
                runs = self.inc_link[order]
                if runs.size > 1 and not bool((runs[1:] >= runs[:-1]).all()):
                    order = order[stable_order(runs)]
            ptr, hops, links = self._by_flow()
            flow_csr = (ptr, hops, local[links])
            self._index = _Index(used, local, flow_csr, (link_ptr, link_len, self.inc_flow[order]))
        return self._index


@dataclass
class _Index:
    """A problem's CSRs: ``used`` global ids of the local links, ``local`` their
    inverse; by flow (row pointers, hops, local link of each entry); by link (row
    pointers, entries per link, flow of each entry)."""

    used: np.ndarray
    local: np.ndarray
    by_flow: tuple[np.ndarray, np.ndarray, np.ndarray]
    by_link: tuple[np.ndarray, np.ndarray, np.ndarray]


class _History:
    """Each round's starting state, for restarts: the bytes/s left and crossing of
    every local link as a row of a 2-D array (valid where the link was open), the open
    links, the level, and the round's step (bytes/s)."""

    def __init__(self, num_links: int):
        self.max_rows = max(1, HISTORY_MAX_BYTES // (8 * max(num_links, 1)))
        self.left = np.empty((min(16, self.max_rows), num_links))
        self.cross = np.empty_like(self.left)
        self.open_ids: list[np.ndarray] = []
        self.levels: list[float] = []
        self.steps: list[float] = []

    def record(self, open_ids: np.ndarray, state: np.ndarray, level: float) -> None:
        """Record the start of the next round (nothing past :data:`HISTORY_MAX_BYTES`)."""
        k = len(self.open_ids)
        if k == self.max_rows:
            return
        if k == self.left.shape[0]:
            more = min(k, self.max_rows - k)
            self.left = np.concatenate([self.left, np.empty((more, self.left.shape[1]))])
            self.cross = np.concatenate([self.cross, np.empty((more, self.cross.shape[1]))])
        self.left[k, open_ids] = state[0]
        self.cross[k, open_ids] = state[1]
        self.open_ids.append(open_ids)
        self.levels.append(level)

    def truncate(self, num_rounds: int) -> None:
        del self.open_ids[num_rounds:], self.levels[num_rounds:], self.steps[num_rounds:]

    def state_at(self, k: int, cap: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """Open links, state rows and level at the start of round ``k``; a link with
        no flow left is closed, as in a fresh solve."""
        open_ids = self.open_ids[k]
        open_ids = open_ids[self.cross[k, open_ids] > 0.5]
        rows = [
            self.left[k, open_ids],
            self.cross[k, open_ids],
            cap[open_ids] * FULL_LINK_REL_SLACK,
        ]
        return open_ids, np.stack(rows), self.levels[k]

    def replay(self, restart: int, gone: np.ndarray, d: np.ndarray) -> None:
        """Correct rounds 0..``restart`` for the links ``gone`` (local ids) that lost
        ``d`` flows each, all unfrozen through those rounds: their crossings drop by
        ``d`` and their bytes/s left are recomputed as a fresh solve would, one
        ``left -= step * crossing`` per round (``subtract.accumulate`` does them in
        order); a link left with no flow gets infinite bytes left (never the minimum
        share, never full), as if it had closed."""
        rounds = slice(0, restart + 1)
        cross = self.cross[rounds, gone] - d
        self.cross[rounds, gone] = cross
        terms = np.empty_like(cross)
        terms[0] = self.left[0, gone]
        terms[1:] = np.asarray(self.steps[:restart])[:, None] * cross[:-1]
        left = np.subtract.accumulate(terms, axis=0)
        left[cross < 0.5] = np.inf
        self.left[rounds, gone] = left


@dataclass
class _Filling:
    """Progressive filling in progress. ``crossing``: live unfrozen flows per local
    link (whole counts as floats); the open links are kept compacted (``open_ids``;
    rows of ``state``: bytes/s left, crossing, full-link slack); ``history``: each
    round's starting state; ``round_of``: the round that froze each flow (-1: not
    frozen in a fresh solve; in a restarted one the last solve's round, >= the
    restart round, until the flow is frozen again: every live flow is, by the end)."""

    tolerance: float
    rate: np.ndarray
    done: np.ndarray
    round_of: np.ndarray
    crossing: np.ndarray
    open_ids: np.ndarray
    state: np.ndarray
    history: _History
    level: float = 0.0


def _first_level(cap: np.ndarray, crossing: np.ndarray, tolerance: float) -> float | None:
    """The first round's level (bytes/s) if it fills every link in use, else None."""
    step = (cap / crossing).min()
    level = 0.0 + step
    left = cap - step * crossing
    slack = np.maximum(cap * FULL_LINK_REL_SLACK, tolerance * level * crossing)
    return float(level) if bool((left <= slack).all()) else None


def _run_rounds(f: _Filling, index: _Index) -> None:
    """Progressive filling until every link is closed (fills ``f.rate``), recording
    each round's starting state and step."""
    flow_ptr, hops, flow_links = index.by_flow
    link_ptr, link_len, flow_of_link_entry = index.by_link
    stamp = np.empty(f.rate.size, dtype=np.int64)  # read only where _unseen wrote it
    open_ids, state = f.open_ids, f.state
    steps = f.history.steps
    while open_ids.size:
        f.history.record(open_ids, state, f.level)
        left, cross, slack = state
        step = (left / cross).min()
        steps.append(step)
        f.level += step
        left -= step * cross
        if f.tolerance:
            slack = np.maximum(state[2], f.tolerance * f.level * cross)
        is_full = left <= slack
        rows = open_ids[is_full]
        newly = _unseen(flow_of_link_entry[_ranges(link_ptr, link_len, rows)], f.done, stamp)
        f.done[newly] = True
        f.rate[newly] = f.level
        f.round_of[newly] = len(steps) - 1
        freed = flow_links[_ranges(flow_ptr, hops, newly)]
        f.crossing -= np.bincount(freed, minlength=f.crossing.size)
        cross[:] = f.crossing[open_ids]
        # crossing holds whole counts as floats: > 0.5 means "at least one flow left"
        keep = cross > 0.5
        keep[is_full] = False
        if not keep.all():  # compress: boolean indexing of a 2-D array's columns is slow
            open_ids, state = open_ids[keep], np.compress(keep, state, axis=1)
    f.open_ids, f.state = open_ids, state


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


def stable_order(ids: np.ndarray) -> np.ndarray:
    """``np.argsort(ids, kind="stable")`` (the one stable order) of non-negative ids;
    ids below 2^16 are sorted as uint16, which numpy radix-sorts in linear time (~6x
    faster on the ~6 M route entries of a 1,024-chip all-pairs exchange)."""
    if ids.size and ids.min() >= 0 and ids.max() < 2**16:
        return np.argsort(ids.astype(np.uint16), kind="stable")
    return np.argsort(ids, kind="stable")
