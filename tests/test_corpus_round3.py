"""Hostile-input corpus, third round (issue 33): faults, packet fidelity, absurd
magnitudes, serve flags, chip files, and ``tpusim check`` agreeing with ``tpusim run``.

Every case of ``tests/corpus/round3/cases.yaml`` runs ``tpusim`` in this
process (:mod:`corpus_inprocess`) from a fresh temporary folder, bounded at 30 s and
8 GiB of address space more than the test process maps (the same cases in
``python -m tpusim`` subprocesses are marked slow: issue 34),
and must exit with its code, print exactly one stderr line matching its pattern (none
when it has no pattern) and never a traceback. Cases that succeed are checked against
independent answers: a trial whose failed links cut the group is counted, never timed
(the count of links a cut needs, by hand); packet fidelity honours faults and UGAL as
the flow fidelity does (the design's flow/packet agreement). Then: a Ctrl-C of a Dask
run is one line; scenarios write plots unless ``plots: false``. (``check`` agreeing
with ``run`` on every corpus scenario, these included: tests/test_check_agrees_with_run.py.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from corpus_inprocess import Outcome, run_in_process
from corpus_support import ADDRESS_SPACE_BYTES, ROOT, check_outcome, expand, run_tpusim

CORPUS = Path(__file__).parent / "corpus" / "round3"

CASES = yaml.safe_load((CORPUS / "cases.yaml").read_text(encoding="utf-8"))

#: Same input as ``packet-honours-faults`` / ``packet-honours-ugal``, at flow fidelity:
#: the reference the packet runs must agree with.
FLOW_TWINS = {
    "packet-honours-faults-flow": [
        "collective", "{dir}/t44.yaml", "--op", "all-reduce", "--bytes", "1MiB",
        "--fidelity", "flow", "--faults", "{dir}/f-down.yaml", "--json",
    ],
    "packet-honours-ugal-flow": [
        "collective", "{dir}/t44.yaml", "--op", "all-to-all", "--bytes", "1MiB",
        "--algorithm", "direct", "--fidelity", "flow", "--routing", "ugal", "--json",
    ],
}  # fmt: skip

#: Relative agreement of the packet and flow fidelities on these small contended cases
#: (64 KiB packets against 1 MiB per chip: the packet-size error is a few percent).
AGREEMENT = 0.10


def _run_case(argv_template: list[str], tmp: Path) -> tuple[list[str], Outcome]:
    argv = expand(argv_template, CORPUS, tmp)
    return argv, run_in_process(argv, tmp, extra_bytes=ADDRESS_SPACE_BYTES)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """Every case (and the flow twins) run once in this process (:mod:`corpus_inprocess`:
    30 s and 8 GiB more address space each), by id."""
    jobs = {case["id"]: case["argv"] for case in CASES} | FLOW_TWINS
    return {key: _run_case(argv, tmp_path_factory.mktemp(key)) for key, argv in jobs.items()}


def test_case_ids_are_unique():
    ids = [case["id"] for case in CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_corpus_case(case, outcomes):
    check_outcome(case, *outcomes[case["id"]])


def _json(outcomes, key: str) -> dict:
    argv, done = outcomes[key]
    parsed = check_outcome({"exit": 0}, argv, done)
    assert isinstance(parsed, dict)
    return parsed


def test_every_link_down_is_counted_as_failed_never_timed(outcomes):
    """t44 has 32 links (4 x 4 chips x 2 axes): with all 32 down every trial is cut."""
    (row,) = _json(outcomes, "faults-every-link-down")["counts"]
    assert (row["failed_links"], row["trials"], row["disconnected"]) == (32, 3, 3)
    assert row["p50_s"] is None and row["p50_slowdown"] is None


def test_a_cut_ring_is_counted_as_failed(outcomes):
    """A 4-chip ring survives one failed link (it becomes a line, slower) and is cut by
    any two: rows 2 and 4 are all disconnected, row 1 is timed and slower."""
    rows = {r["failed_links"]: r for r in _json(outcomes, "faults-ring-cut")["counts"]}
    assert sorted(rows) == [0, 1, 2, 4]
    assert rows[1]["disconnected"] == 0 and rows[1]["p50_slowdown"] > 1
    for count in (2, 4):
        assert rows[count]["disconnected"] == rows[count]["trials"] == 3
        assert rows[count]["p50_s"] is None


def test_packet_fidelity_honours_faults_like_flow(outcomes):
    packet = _json(outcomes, "packet-honours-faults")
    flow = _json(outcomes, "packet-honours-faults-flow")
    assert packet["failed_links"] == flow["failed_links"] == [[0, 1]]
    assert packet["rerouted_flows"] == flow["rerouted_flows"] > 0
    assert abs(packet["time_s"] - flow["time_s"]) <= AGREEMENT * flow["time_s"]


def test_packet_fidelity_honours_ugal_like_flow(outcomes):
    packet = _json(outcomes, "packet-honours-ugal")
    flow = _json(outcomes, "packet-honours-ugal-flow")
    assert packet["routing"] == flow["routing"] == "ugal"
    assert packet["nonminimal_flows"] == flow["nonminimal_flows"] > 0
    assert abs(packet["time_s"] - flow["time_s"]) <= AGREEMENT * flow["time_s"]


def test_packets_larger_than_the_message_cost_one_packet_per_transfer(outcomes):
    """1 KiB per chip on 16 chips with 1 MiB packets: it runs, one packet per flow."""
    rec = _json(outcomes, "collective-packet-bytes-over-message-small")
    assert rec["fidelity"] == "packet" and rec["bytes"] == 1024


COLLECTIVE_SCENARIO = """name: plots-default
systems: [{system}]
{plots}workloads:
  - {{kind: collective, name: ar, op: all-reduce, bytes: 1 MiB}}
"""


@pytest.mark.parametrize(("plots", "expect_png"), [("", True), ("plots: false\n", False)])
def test_scenarios_write_plots_unless_told_not_to(tmp_path, plots, expect_png):
    scenario = tmp_path / "s.yaml"
    text = COLLECTIVE_SCENARIO.format(system=CORPUS / "t44.yaml", plots=plots)
    scenario.write_text(text, encoding="utf-8")
    done = run_tpusim(["run", str(scenario), "--out", str(tmp_path / "o"), "--quiet"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert bool(list((tmp_path / "o").glob("*.png"))) is expect_png


def test_ctrl_c_of_a_dask_run_is_one_line(tmp_path):
    """A terminal's Ctrl-C reaches the whole process group (the Dask workers too): one
    line, exit 130, no worker traceback, heartbeat error, port warning or
    resource_tracker warning. Sent once a point has finished (the cluster is up and
    tasks are in flight), however long a loaded machine takes to get there."""
    pytest.importorskip("distributed")
    child = subprocess.Popen(
        [sys.executable, "-m", "tpusim", "run", "design-space", "--executor", "dask",
         "--out", str(tmp_path / "o"), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
    )  # fmt: skip
    points = tmp_path / "o" / "points.jsonl"
    deadline = time.monotonic() + 180  # a loaded machine starts the cluster slowly
    while not (points.exists() and points.read_text().strip()) and child.poll() is None:
        assert time.monotonic() < deadline, "no point finished in 180 s"
        time.sleep(0.2)
    assert child.poll() is None, child.communicate()[1]  # still running: tasks in flight
    os.killpg(child.pid, signal.SIGINT)
    _, stderr = child.communicate(timeout=120)  # EOF once every holder (tracker) exits
    assert child.returncode == 130, stderr
    assert stderr.splitlines() == ["tpusim: interrupted"]


@pytest.mark.slow  # the same cases as `python -m tpusim` subprocesses (issue 34)
@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_corpus_case_in_a_subprocess(case, tmp_path):
    argv = expand(case["argv"], CORPUS, tmp_path)
    check_outcome(case, argv, run_tpusim(argv, tmp_path))
