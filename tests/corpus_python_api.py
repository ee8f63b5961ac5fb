"""The Python API corpus (issue 45, item 7): calls of ``tpusim.Session`` and of what it
takes (``CollectiveOptions``, ``NetworkSettings``, fault sets, on-chip models) as a
notebook user and a hostile caller would make them: wrong types, absurd sizes, NaN and
infinities, negatives, huge values, valid calls. Each case is ``(id, call, expect)``:
``call(s)`` gets a session of a 4x4 v5e torus (``t44.yaml``) and ``expect`` is
``"ok"`` (a plausible result: a finite time of at most MAX_PLAUSIBLE_S) or
``(ExceptionType, regex)``. Shared by ``tests/test_corpus_python_api.py`` and
``python tests/corpus_python_api.py`` (the counts before and after a change)."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent / "corpus" / "python_api"
T44 = HERE / "t44.yaml"
#: Longest plausible collective time on the 16-chip torus (s): 1 PB at its slowest
#: link is about 2e4 s, so past 1e6 s a result is a wrong number, not a slow collective.
MAX_PLAUSIBLE_S = 1e6


def _session(system):
    import tpusim

    return lambda s: tpusim.Session(system)


def _opts(**kw):
    def call(s):
        from tpusim.engine import CollectiveOptions

        return s.collective("all-reduce", "1 MiB", CollectiveOptions(**kw))

    return call


def _net(fidelity, size="1 MiB", op="all-reduce", **kw):
    def call(s):
        from tpusim.engine import CollectiveOptions
        from tpusim.network import NetworkSettings

        options = CollectiveOptions(network=NetworkSettings.of(fidelity, **kw))
        return s.collective(op, size, options)

    return call


def _faults(*faults, **kw):
    def call(s):
        from tpusim.config.faults import FaultSet
        from tpusim.engine import CollectiveOptions

        return s.collective(
            "all-reduce", "1 MiB", CollectiveOptions(faults=FaultSet(faults=list(faults), **kw))
        )

    return call


def _simulate(system, op, size):
    def call(s):
        from tpusim.engine import simulate_collective

        return simulate_collective(system, op, size)

    return call


def _size(size, op="all-reduce"):
    return lambda s: s.collective(op, size)


def cases():
    """The corpus rows (imports deferred: the table loads without tpusim)."""
    from tpusim.errors import ConfigError, InputError

    bad = lambda pattern: (InputError, pattern)  # noqa: E731
    return [
        # -- Session(system) ------------------------------------------------------------
        ("session-none", _session(None), bad(r"^system: expected a System")),
        ("session-int", _session(123), bad(r"^system: expected a System")),
        ("session-float", _session(3.5), bad(r"^system: expected a System")),
        ("session-list", _session(["v5e-pod"]), bad(r"^system: expected a System")),
        ("session-dict", _session({"name": "x"}), bad(r"^system: expected a System")),
        ("session-bytes", _session(b"v5e-pod"), bad(r"^system: expected a System")),
        ("session-bool", _session(True), bad(r"^system: expected a System")),
        ("session-empty", _session(""), (ConfigError, r"unknown system|empty|system")),
        ("session-unknown", _session("no-such-system"), (ConfigError, r"no-such-system")),
        ("session-dev-zero", _session("/dev/zero"), (ConfigError, r"not a regular file")),
        ("session-dir", _session("/"), (ConfigError, r"directory")),
        ("session-path", _session(T44), "session"),
        ("session-str-path", _session(str(T44)), "session"),
        ("session-session", lambda s: __import__("tpusim").Session(s), bad(r"expected")),
        # -- op ---------------------------------------------------------------------------
        ("op-none", lambda s: s.collective(None, "1 MiB"), bad(r"op: expected one of")),
        ("op-int", lambda s: s.collective(1, "1 MiB"), bad(r"op: expected one of")),
        (
            "op-typo",
            lambda s: s.collective("allreduce", "1 MiB"),
            bad(r"all-reduce.*got 'allreduce'"),
        ),
        ("op-upper", lambda s: s.collective("ALL-REDUCE", "1 MiB"), bad(r"op: expected one of")),
        ("op-empty", lambda s: s.collective("", "1 MiB"), bad(r"op: expected one of")),
        ("op-list", lambda s: s.collective(["all-reduce"], "1 MiB"), bad(r"op: expected")),
        ("op-all-reduce", _size("1 MiB"), "ok"),
        ("op-all-gather", _size(2**20, "all-gather"), "ok"),
        ("op-reduce-scatter", _size(1e6, "reduce-scatter"), "ok"),
        ("op-all-to-all", _size(4096, "all-to-all"), "ok"),
        ("op-broadcast", _size("64 KiB", "broadcast"), "ok"),
        # -- size -------------------------------------------------------------------------
        ("size-none", _size(None), bad(r"size: expected a number of bytes")),
        ("size-word", _size("fast"), bad(r"size 'fast'")),
        ("size-zero", _size(0), bad(r"size: must be > 0")),
        ("size-negative", _size(-1), bad(r"size: must be > 0")),
        ("size-nan", _size(math.nan), bad(r"size: nan is not a finite")),
        ("size-inf", _size(math.inf), bad(r"size: inf is not a finite")),
        ("size-minus-inf", _size(-math.inf), bad(r"size: -inf is not a finite")),
        ("size-1e300", _size(1e300), bad(r"over the limit")),
        ("size-2-70", _size(2**70), bad(r"over the limit")),
        ("size-huge-text", _size("1e30 B"), bad(r"over the limit")),
        ("size-negative-text", _size("-5 MiB"), bad(r"size")),
        ("size-nan-text", _size("nan B"), bad(r"size")),
        ("size-bool", _size(True), bad(r"size: expected a number of bytes")),
        ("size-fraction-of-byte", _size(1.5), bad(r"not a whole number of bytes")),
        ("size-list", _size([1]), bad(r"size: expected a number of bytes")),
        ("size-dict", _size({"a": 1}), bad(r"size: expected a number of bytes")),
        ("size-complex", _size(1 + 1j), bad(r"size: expected a number of bytes")),
        ("size-decimal", _size(Decimal("1024")), "ok"),
        ("size-fraction", _size(Fraction(2048, 2)), "ok"),
        ("size-numpy-int", _size(np.int64(4096)), "ok"),
        ("size-numpy-float", _size(np.float64(4096)), "ok"),
        ("size-numpy-nan", _size(np.float64("nan")), bad(r"not a finite")),
        ("size-one-pib", _size("1 PiB"), bad(r"over the limit")),
        ("size-one-byte", _size(1), "ok"),
        # -- options ----------------------------------------------------------------------
        ("options-none", lambda s: s.collective("all-reduce", "1 MiB", None), "ok"),
        (
            "options-str",
            lambda s: s.collective("all-reduce", "1 MiB", "ring"),
            bad(r"options: expected a CollectiveOptions"),
        ),
        (
            "options-dict",
            lambda s: s.collective("all-reduce", "1 MiB", {"algorithm": "ring"}),
            bad(r"options: expected a CollectiveOptions"),
        ),
        ("options-algorithm-unknown", _opts(algorithm="nope"), bad(r"algorithm 'nope'")),
        ("options-algorithm-int", _opts(algorithm=3), bad(r"algorithm")),
        ("options-algorithm-ring", _opts(algorithm="ring"), "ok"),
        ("options-chips-zero", _opts(chips=0), bad(r"chips")),
        ("options-chips-negative", _opts(chips=-3), bad(r"chips")),
        ("options-chips-huge", _opts(chips=10**9), bad(r"chips")),
        ("options-chips-float", _opts(chips=2.5), bad(r"chips")),
        ("options-chips-four", _opts(chips=4), "ok"),
        ("options-axes-unknown", _opts(axes=["q"]), bad(r"ax")),
        ("options-axes-str", _opts(axes="xy"), bad(r"axes: expected a list of axis names")),
        ("options-axes-x", _opts(axes=["x"]), "ok"),
        ("options-pairs-missing-chip", _opts(pairs=[(0, 99)]), bad(r"pairs|chip")),
        ("options-seed-negative", _opts(seed=-1), bad(r"seed")),
        ("options-seed-float", _opts(seed=0.5), bad(r"seed")),
        ("options-routing-unknown", _opts(routing="zigzag"), bad(r"routing")),
        ("options-routing-ugal", _opts(routing="ugal"), "ok"),
        ("options-engine-unknown", _opts(engine="gpu"), bad(r"engine")),
        ("options-network-str", _opts(network="flow"), bad(r"network: expected a NetworkSettings")),
        ("options-faults-str", _opts(faults="link 0-1"), bad(r"faults: expected a FaultSet")),
        # -- network settings ---------------------------------------------------------------
        ("network-analytic", _net("analytic"), "ok"),
        ("network-packet", _net("packet", "64 KiB"), "ok"),
        ("network-packet-one-byte", _net("packet", "1 GiB", packet_bytes=1), bad(r"packet-hops")),
        (
            "network-packet-small-packets",
            _net("packet", "1 GiB", packet_bytes=4096),
            bad(r"packet-hops"),
        ),
        # -- faults -------------------------------------------------------------------------
        (
            "faults-half-link",
            _faults({"kind": "link_degraded", "link": [0, 1], "bandwidth_fraction": 0.5}),
            "ok",
        ),
        ("faults-missing-link", _faults({"kind": "link_down", "link": [0, 999]}), bad(r"999")),
        (
            "faults-tiny-fraction",
            _faults({"kind": "link_degraded", "link": [0, 1], "bandwidth_fraction": 1e-300}),
            (ValueError, r"bandwidth_fraction"),
        ),
        ("faults-slow-chip", _faults({"kind": "slow_chip", "chip": 2, "slowdown": 2}), "ok"),
        # -- tpusim.engine.simulate_collective (the same door) ---------------------------
        (
            "simulate-system-none",
            _simulate(None, "all-reduce", 2**20),
            bad(r"^system: expected a System"),
        ),
        ("simulate-size-nan", _simulate(str(T44), "all-reduce", math.nan), bad(r"size: nan")),
        ("simulate-op-typo", _simulate(str(T44), "allreduce", 2**20), bad(r"op: expected one of")),
        ("simulate-valid", _simulate(str(T44), "all-gather", 2**20), "ok"),
        # -- on-chip model ------------------------------------------------------------------
        (
            "onchip-str",
            lambda s: s.collective("all-reduce", "1 MiB", onchip="tensorcore"),
            bad(r"onchip: expected an OnChipModel"),
        ),
    ]


def outcome(case, session, seconds: float = 20.0) -> tuple[str, str]:
    """(class, detail) of one case: ``clean`` (as expected), ``traceback`` (an exception
    of another type), ``hang`` (over ``seconds``), ``silent`` (bad input accepted),
    ``implausible`` (a result out of bounds), ``refused`` (a valid call refused) or
    ``message`` (the expected type, another message)."""
    import re

    from corpus_inprocess import Hung, bounded

    _, call, expect = case
    try:
        with bounded(seconds):
            result = call(session)
    except Hung:
        return "hang", f"over {seconds:g} s"
    except Exception as exc:  # the corpus classifies every exception
        text = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        if expect in ("ok", "session"):
            return "refused", text
        kind, pattern = expect
        if not isinstance(exc, kind):
            return "traceback", text
        return ("clean", text) if re.search(pattern, str(exc)) else ("message", text)
    if expect == "session":
        return "clean", repr(result)
    time_s = result[0].time_s if isinstance(result, tuple) else math.nan
    plausible = math.isfinite(time_s) and 0 < time_s <= MAX_PLAUSIBLE_S
    if expect == "ok":
        return ("clean", f"{time_s:.3g} s") if plausible else ("implausible", f"{time_s} s")
    return ("silent", f"{time_s:.3g} s") if plausible else ("implausible", f"{time_s} s")


def main() -> None:
    """Print each case's class and the counts (``python tests/corpus_python_api.py``)."""
    from collections import Counter

    import tpusim

    session = tpusim.Session(str(T44))
    counts: Counter[str] = Counter()
    for case in cases():
        kind, detail = outcome(case, session, seconds=10.0)
        counts[kind] += 1
        if kind != "clean":
            print(f"{case[0]:32} {kind:12} {detail}")
    print(dict(counts), "of", sum(counts.values()))


if __name__ == "__main__":
    main()
