"""Helpers shared by several test modules (the CLI runner, hop histograms)."""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from tpusim.cli import main
from tpusim.engine import CollectiveOptions
from tpusim.network import NetworkSettings


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """Run ``tpusim ARGV`` in-process; return (exit code, stdout, stderr)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error_line(code: int, out: str, err: str) -> str:
    """Bad input: exit 2, nothing on stdout, one ``tpusim: error:`` line, no traceback."""
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("tpusim: error:"), err
    assert "Traceback" not in err
    return lines[0]


def histogram(dist) -> list[int]:
    """Hop histogram over ordered pairs of distinct chips from a distance matrix (rows)."""
    counts = Counter(d for s, row in enumerate(dist) for t, d in enumerate(row) if s != t)
    size = max(counts, default=0) + 1
    return [counts.get(d, 0) for d in range(size)]


def trim(hist) -> list[int]:
    """A histogram as ints without trailing zero bins."""
    hist = [int(x) for x in hist]
    while len(hist) > 1 and hist[-1] == 0:
        hist.pop()
    return hist


def stable_bytes(path: Path) -> bytes:
    """A file's bytes; report.html's date and run time (its only volatile cells) and
    points.jsonl's wall times, memory peaks and order masked."""
    data = path.read_bytes()
    if path.name == "points.jsonl":
        data = re.sub(rb'"(wall_s|peak_memory_bytes)": [0-9.e+-]+', rb'"\1": 0', data)
        data = b"".join(sorted(data.splitlines(keepends=True)))  # in the order they finished
    if path.name == "report.html":
        volatile = rb"(<td>(written \(UTC\)|simulated in \(s\))</td><td[^>]*>)[^<]*"
        data = re.sub(volatile, rb"\1", data)
    return data


def _shared(chip, name: str) -> float:
    """A cost term of ``chip``: its own efficiency block's, else the shared file's."""
    from tpusim.config.cost_terms import shared_terms

    own = getattr(chip.efficiency, name, None)
    return own if own is not None else getattr(shared_terms(), name)


def achievable_flops(chip, m: int, dtype: str = "bf16") -> float:
    """A matmul's rate with the chip's terms, by hand: peak x mxu (or the chip's
    matmul[dtype]) x m' / (m' + rows_half_tiles x mxu_size) for its m rows padded to 8
    sublanes (m')."""
    from tpusim.config.cost_terms import shared_terms

    rows = -(-m // 8) * 8
    fraction = chip.efficiency.matmul.get(dtype, shared_terms().mxu)
    half = shared_terms().rows_half_tiles * chip.tensorcores.mxu_size
    return chip.peak_flops[dtype] * fraction * rows / (rows + half)


def achievable_hbm_Bps(chip) -> float:
    """The HBM bandwidth streaming ops reach: nominal x the hbm term."""
    return chip.hbm.bandwidth_Bps * _shared(chip, "hbm")


def forced_times(topo, op: str, size: float, onchip, fidelity: str = "flow") -> dict[str, float]:
    """Every registered algorithm's time for the collective, each forced in turn (the
    brute force ``auto`` is checked against); an algorithm that cannot run it is left out."""
    from tpusim.collectives import ALGORITHMS, AlgorithmError
    from tpusim.engine import run_collective

    times = {}
    for name in ALGORITHMS.names():
        try:
            res, _ = run_collective(
                topo,
                op,
                size,
                CollectiveOptions(algorithm=name, network=NetworkSettings.of(fidelity)),
                onchip=onchip,
            )
        except AlgorithmError:
            continue
        times[name] = res.time_s
    return times


#: run_collective's own keywords (the rest are CollectiveOptions fields).
_WHERE = {"chip", "onchip", "system_name", "routes"}
#: Network keywords and the backend option each sets (None: the fidelity itself).
_NETWORK = {
    "fidelity": None,
    "flow_tolerance": "tolerance",
    "packet_bytes": "packet_bytes",
    "check_capacity": "check_capacity",
}


def options_of(**kw) -> tuple[CollectiveOptions, dict]:
    """Flat keywords (as tests write them) -> (CollectiveOptions, run_collective's own);
    a network option the fidelity does not own is dropped (tests parametrised over
    fidelities pass a packet size to all of them)."""
    from tpusim.network import NETWORKS

    kw = {k: v for k, v in kw.items() if not (k in ("axes", "pairs") and v is None)}
    where = {k: kw.pop(k) for k in list(kw) if k in _WHERE}
    network = {k: kw.pop(k) for k in list(kw) if k in _NETWORK}
    fidelity = network.pop("fidelity", "flow")
    owned = set(NETWORKS.get(fidelity).options.model_fields) | {"check_capacity"}
    chosen = {_NETWORK[k]: v for k, v in network.items() if _NETWORK[k] in owned}
    settings = NetworkSettings.of(fidelity, **chosen)
    return CollectiveOptions(network=settings, **kw), where


def collective(topology, op: str, size: float, **kw):
    """:func:`tpusim.engine.run_collective` with flat keywords (see :func:`options_of`)."""
    from tpusim.engine import run_collective

    options, where = options_of(**kw)
    return run_collective(topology, op, size, options, **where)


@contextlib.contextmanager
def shared_claims(table, systems: set[str]) -> Iterator[list[list[dict]]]:
    """In the block, a scenario run's claims table is ``table`` (the session's shipped
    table, tests/conftest.py) instead of a fresh minute of computation. Allowed only for
    runs on ``systems`` no claims file names: the claims read a run's rows only for the
    systems they name, so the run's own table would be the same. Yields the list of the
    row lists the run asked with."""
    import pytest

    import tpusim.study.claims

    folder = Path(__file__).resolve().parent.parent / "configs" / "claims"
    named = " ".join(p.read_text() for p in folder.glob("*.yaml"))
    assert named and not any(name in named for name in systems), systems
    given: list[list[dict]] = []

    def shared(rows):
        given.append(rows)
        return table

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tpusim.study.claims, "vendor_claims", shared)
        yield given
