"""Fuzzing system and scenario YAMLs (issue 16 item 5): whatever Hypothesis writes,
``tpusim`` exits 0 or 2, never prints a traceback, never runs past the time bound, and
prints valid JSON (no NaN or Infinity) when it succeeds with ``--json``.

Each example runs ``tpusim`` in this process under the corpus bounds (30 s, 8 GiB of
address space more than the test process maps; :mod:`corpus_inprocess`), where an
uncaught exception fails the example outright (issue 34: a subprocess per example was
an interpreter start-up each).
"""

from __future__ import annotations

import json

import pytest
import yaml
from corpus_inprocess import Outcome, run_in_process
from corpus_support import ADDRESS_SPACE_BYTES, ROOT
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

NUMBERS = st.one_of(
    st.integers(min_value=-(10**25), max_value=10**25),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, 2, 3, 4, 16, -1, 10**6, 0.5, 1e400]),
)
QUANTITIES = st.builds(
    lambda n, u: f"{n} {u}",
    st.one_of(st.integers(-5, 10**20), st.floats(allow_nan=True, allow_infinity=True)),
    st.sampled_from(["GB/s", "us", "KiB", "GiB", "s", "B", "TB/s", "parsecs", ""]),
)
VALUES = st.one_of(NUMBERS, QUANTITIES, st.text(max_size=8), st.booleans(), st.none())
DIMS = st.lists(NUMBERS, min_size=0, max_size=4)


def run_cli(*argv: str) -> Outcome:
    return run_in_process(list(argv), ROOT, extra_bytes=ADDRESS_SPACE_BYTES)


def check(done: Outcome, json_out: bool) -> None:
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.returncode in (0, 2), (done.returncode, done.stderr[-2000:])
    if done.returncode == 2:
        # one line per problem (issue 15: a scenario's check lists every problem), after
        # one warning line per deprecated key read (issue 35: the old flat network keys)
        lines = done.stderr.strip().splitlines()
        errors = [line for line in lines if not line.startswith("tpusim: warning: ")]
        assert errors and all(line.startswith("tpusim: error: ") for line in errors), done.stderr
        assert len(lines) - len(errors) <= 1, done.stderr
    elif json_out:
        json.loads(done.stdout, parse_constant=_reject)


def _reject(name: str):
    raise AssertionError(f"invalid JSON constant {name}")


@st.composite
def system_yaml(draw) -> str:
    topology = draw(
        st.one_of(
            st.fixed_dictionaries(
                {"kind": st.just("torus"), "dims": DIMS},
                optional={"wraparound": st.one_of(st.booleans(), st.lists(st.booleans()))},
            ),
            st.fixed_dictionaries(
                {
                    "kind": st.just("boardfly"),
                    "chips_per_board": NUMBERS,
                    "boards_per_group": NUMBERS,
                    "groups": NUMBERS,
                }
            ),
            st.dictionaries(st.text(max_size=6), VALUES, max_size=3),
        )
    )
    spec = {"name": draw(st.one_of(st.just("fuzz"), st.text(max_size=5))), "chip": "v5e"}
    spec["topology"] = topology
    if draw(st.booleans()):
        spec["ici"] = draw(
            st.fixed_dictionaries({}, optional={"link_bandwidth": VALUES, "hop_latency": VALUES})
        )
    return yaml.safe_dump(spec)


FUZZ = settings(
    max_examples=8,
    derandomize=True,  # the same examples on every run: CI cannot turn red by chance
    phases=(Phase.explicit, Phase.generate),  # no shrinking: a failure prints its input
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@FUZZ
@given(text=system_yaml(), op=st.sampled_from(["all-reduce", "all-to-all", "broadcast"]))
def test_fuzzed_system_files_exit_cleanly(tmp_path, text, op):
    path = tmp_path / "system.yaml"
    path.write_text(text)
    check(run_cli("topo", str(path), "--json"), json_out=True)
    done = run_cli(
        "collective",
        str(path),
        "--op",
        op,
        "--bytes",
        "1KiB",
        "--fidelity",
        "analytic",
        "--json",
    )
    check(done, json_out=True)


@st.composite
def scenario_yaml(draw) -> str:
    workload = draw(
        st.one_of(
            st.fixed_dictionaries(
                {"name": st.text(min_size=1, max_size=5), "kind": st.just("collective")},
                optional={
                    "op": st.sampled_from(["all-reduce", "all-gather", "scatter"]),
                    "bytes": VALUES,
                    "sweep": st.dictionaries(
                        st.just("bytes"),
                        st.one_of(
                            st.lists(VALUES, max_size=3),
                            st.fixed_dictionaries({"from": VALUES, "to": VALUES, "factor": VALUES}),
                        ),
                        max_size=1,
                    ),
                },
            ),
            st.dictionaries(st.text(max_size=6), VALUES, max_size=4),
        )
    )
    spec = {
        "name": "fuzz",
        "systems": draw(st.lists(st.sampled_from(["v5e-pod", "nope", ""]), max_size=2)),
        "workloads": [workload],
    }
    fidelity = st.sampled_from(["analytic", "flow", "packet", "quantum"])
    if draw(st.booleans()):
        spec["fidelity"] = draw(fidelity)  # the old flat key, still read
    if draw(st.booleans()):
        options = {"tolerance": VALUES, "packet_bytes": VALUES, "fidelity": fidelity}
        spec["network"] = draw(st.fixed_dictionaries({}, optional=options))
    return yaml.safe_dump(spec)


@FUZZ
@given(text=scenario_yaml())
def test_fuzzed_scenarios_exit_cleanly(tmp_path, text):
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    done = run_cli(
        "run", str(path), "--out", str(tmp_path / "out"), "--quiet", "--jobs", "1", "--json"
    )
    check(done, json_out=True)


@pytest.mark.parametrize("value", ["1e400", ".inf", ".nan", "-1", "1e30"])
def test_extreme_link_bandwidths_never_hang(tmp_path, value):
    path = tmp_path / "system.yaml"
    path.write_text(
        "name: x\nchip: v5e\ntopology: {kind: torus, dims: [4]}\n"
        f"ici: {{link_bandwidth: {value} GB/s}}\n"
    )
    done = run_cli("collective", str(path), "--op", "all-reduce", "--bytes", "1MiB", "--json")
    check(done, json_out=True)
