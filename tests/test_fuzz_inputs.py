"""Property-based fuzz of system and scenario YAMLs (issue 16): whatever the file says,
loading it either succeeds or raises an InputError (one line, exit 2 at the CLI),
never another exception, and within a deadline; a loaded small system builds."""

from __future__ import annotations

import itertools
import math
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpusim.config import load_system
from tpusim.errors import InputError
from tpusim.report import topology_summary
from tpusim.study.scenario import Scenario
from tpusim.topology import build_topology

#: Chips a fuzzed system may have and still be built and measured in the test.
BUILD_CHIPS_MAX = 512

_names = itertools.count()

numbers = st.one_of(
    st.integers(min_value=-(10**25), max_value=10**25),
    st.sampled_from([0, 1, 2, 3, 4, 16, 2**31, 10**23]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.5, 1e30, -1.0, math.inf, math.nan]),
)
quantities = st.sampled_from(
    ["45 GB/s", "1e400 GB/s", "1e30 GB/s", "1 us", "1e400 s", "0.5", "1 KiB", "x", "", "1 PB/s"]
)
scalars = st.one_of(numbers, quantities, st.booleans(), st.none(), st.text(max_size=8))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _maybe(key: str, strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(st.just({}), strategy.map(lambda v: {key: v}))


small = st.integers(min_value=1, max_value=8)
dims = st.one_of(st.lists(small, min_size=1, max_size=3), st.lists(numbers, max_size=4), values)
tori = st.fixed_dictionaries(
    {"kind": st.just("torus"), "dims": dims},
    optional={"wraparound": st.one_of(st.booleans(), values), "twisted": st.booleans()},
)
boardflies = st.fixed_dictionaries(
    {
        "kind": st.just("boardfly"),
        "chips_per_board": st.one_of(small, numbers),
        "boards_per_group": st.one_of(small, numbers),
        "groups": st.one_of(small, numbers),
    }
)
good_quantities = st.sampled_from(["45 GB/s", "1 PB/s", "1 kB/s", "1 us", "0 s", "1 s"])
icis = st.fixed_dictionaries(
    {},
    optional={
        "link_bandwidth": st.one_of(good_quantities, scalars),
        "hop_latency": st.one_of(good_quantities, scalars),
    },
)
#: Mostly well-formed systems with hostile values in places, so both branches run.
systems = st.fixed_dictionaries(
    {"name": st.just("fuzz"), "chip": st.sampled_from(["v5e", "tpu8i"])},
    optional={"topology": st.one_of(tori, boardflies, values), "ici": st.one_of(icis, values)},
)
#: Anything at all under the top-level keys.
wild_systems = st.fixed_dictionaries(
    {"name": values, "chip": st.one_of(st.just("v5e"), values)},
    optional={"topology": values, "chips": numbers, "pods": numbers, "extra": values},
)


def _write(folder: Path, data: Any, duplicate_line: int | None) -> Path:
    """``data`` as YAML, with one line repeated (a duplicate key, usually) if asked."""
    lines = yaml.safe_dump(data, sort_keys=False).splitlines()
    if duplicate_line is not None and lines:
        at = duplicate_line % len(lines)
        lines.insert(at, lines[at])
    path = folder / f"fuzz-{next(_names)}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@settings(max_examples=150, deadline=5000, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.one_of(systems, systems, wild_systems),
    duplicate_line=st.one_of(st.none(), st.none(), st.integers(0, 50)),
)
def test_fuzzed_system_loads_or_is_refused(data, duplicate_line):
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder), data, duplicate_line)
        try:
            system = load_system(str(path))
        except InputError as exc:
            assert "\n" not in str(exc) and str(exc).strip()
            return
        if system.num_chips <= BUILD_CHIPS_MAX:
            record = topology_summary(system)
            assert record["chips"] == system.num_chips == build_topology(system).num_chips


sweeps = st.one_of(
    st.lists(st.one_of(quantities, numbers), max_size=5),
    st.fixed_dictionaries({"from": scalars, "to": scalars, "factor": numbers}),
    values,
)
workloads = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["a", "b", ""]),
        "kind": st.sampled_from(["collective", "collective", "collective", "program", "nope"]),
        "op": st.sampled_from(["all-reduce", "all-gather", "all-reduce", "x"]),
        "bytes": st.one_of(st.sampled_from(["1 KiB", "1 MiB", 4096]), quantities, numbers),
    },
    optional={
        "sweep": st.dictionaries(
            st.sampled_from(["bytes", "op", "x"]),
            st.one_of(st.lists(st.sampled_from(["1 KiB", "2 KiB", 8]), max_size=4), sweeps),
            max_size=2,
        )
    },
)
scenarios = st.fixed_dictionaries(
    {
        "name": st.just("fuzz"),
        "systems": st.one_of(st.just(["v5e-pod"]), st.just(["v5e-pod"]), values),
        "workloads": st.lists(workloads, min_size=1, max_size=3, unique_by=lambda w: w["name"]),
    },
    optional={
        "max_points": st.one_of(st.integers(1, 2000), numbers),
        "fidelity": st.sampled_from(["flow", "packet", "analytic", "x"]),
        "network": st.one_of(
            st.sampled_from(["flow", "packet", "analytic", "x"]),
            st.fixed_dictionaries(
                {},
                optional={
                    "fidelity": st.sampled_from(["flow", "packet", "analytic", "x"]),
                    "tolerance": numbers,
                    "packet_bytes": values,
                },
            ),
            values,
        ),
    },
)


@settings(max_examples=100, deadline=5000, suppress_health_check=[HealthCheck.too_slow])
@given(data=scenarios, duplicate_line=st.one_of(st.none(), st.none(), st.integers(0, 50)))
def test_fuzzed_scenario_loads_or_is_refused(data, duplicate_line):
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder), data, duplicate_line)
        try:
            scenario = Scenario(path)
        except InputError as exc:
            assert "\n" not in str(exc) and str(exc).strip()
            return
        assert 1 <= len(scenario.runs) <= scenario.max_points
