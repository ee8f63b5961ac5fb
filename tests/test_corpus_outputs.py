"""Hostile outputs (issue 16): output paths, stdout, strict JSON, Ctrl-C, determinism.

Every case of ``tests/corpus/outputs/cases.yaml`` runs ``python -m tpusim`` in a
subprocess (30 s, 8 GiB of address space) and must exit as the table says with at
most one line on stderr, never a traceback. The other tests interrupt runs with
SIGINT, break the write phase, and check that runs are byte-for-byte deterministic
with one and two worker processes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from corpus_support import ROOT, TIMEOUT_S, cap_memory, check_outcome, expand, run_tpusim
from helpers import stable_bytes

from tpusim.report.drawing import RunFigure
from tpusim.report.figures import FIGURES
from tpusim.results.files import STAGING_PREFIX, atomic_write, atomic_write_text
from tpusim.study.options import ScenarioRunOptions
from tpusim.study.outputs import WRITERS, OutputWriter, write_outputs
from tpusim.study.runner import run_scenario
from tpusim.study.scenario import Scenario

CORPUS = Path(__file__).parent / "corpus" / "outputs"
CASES = yaml.safe_load((CORPUS / "cases.yaml").read_text())
#: How soon after SIGINT an interrupted run must have exited (s).
INTERRUPT_DEADLINE_S = 5.0


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _command(argv: list[str], tmp: Path) -> list[str]:
    return [sys.executable, "-m", "tpusim", *expand(argv, CORPUS, tmp)]


def _run_case(case: dict, tmp: Path) -> subprocess.CompletedProcess:
    stdout_to = case.get("stdout_to")
    argv = expand(case["argv"], CORPUS, tmp)
    if not stdout_to:
        return run_tpusim(argv, tmp)
    with open(stdout_to, "w") as sink:
        return run_tpusim(argv, tmp, stdout=sink)


def _at(record: object, dotted: str) -> object:
    for key in dotted.split("."):
        record = record[int(key)] if isinstance(record, list) else record[key]  # type: ignore[index]
    return record


def test_case_ids_are_unique():
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_corpus_case(case, tmp_path):
    done = _run_case(case, tmp_path)
    record = check_outcome(case, case["argv"], done)
    for path, expected in (case.get("json") or {}).items():
        assert _at(record, path) == expected, path


def _no_constant(name: str) -> None:
    raise AssertionError(f"{name} is not JSON")


# -- Ctrl-C --------------------------------------------------------------------------
SLOW = """\
name: slow
systems: [v5e-pod, v6e-pod, ironwood-256]
workloads:
  - name: a2a
    kind: collective
    op: all-to-all
    bytes: 64 MiB
    sweep: {bytes: {from: 1 KiB, to: 4 GiB, factor: 2}}
"""


def _interrupt(argv: list[str], tmp: Path, started: str) -> tuple[int, list[str], float]:
    """Start tpusim, wait for a stderr line containing ``started`` (the simulation is
    under way), send SIGINT; returns exit code, stderr lines and seconds to exit."""
    proc = subprocess.Popen(
        _command(argv, tmp),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=cap_memory,
        env=_env(),
        cwd=tmp,
    )
    lines = []
    assert proc.stderr is not None
    for line in proc.stderr:  # bounded: the run takes longer than this wait
        lines.append(line.rstrip("\n"))
        if started in line:
            break
    time.sleep(0.5)  # well inside the simulation, not at its first line
    sent_at = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    try:
        _, rest = proc.communicate(timeout=TIMEOUT_S)
    finally:
        proc.kill()
    lines += rest.splitlines()
    return proc.returncode, lines, time.perf_counter() - sent_at


@pytest.mark.parametrize("jobs", ["2", "1"])
def test_ctrl_c_during_run_stops_promptly_and_writes_nothing(jobs, tmp_path):
    scenario = tmp_path / "slow.yaml"
    scenario.write_text(SLOW)
    out = tmp_path / "out"
    code, lines, waited_s = _interrupt(
        ["run", str(scenario), "--out", str(out), "--jobs", jobs], tmp_path, "a2a["
    )
    assert code == 130, lines
    assert not any("Traceback" in line for line in lines)
    assert lines[-1] == "tpusim: interrupted"
    assert all(line.startswith("[") for line in lines[:-1]), lines  # progress lines only
    assert waited_s < INTERRUPT_DEADLINE_S
    assert not out.exists()  # nothing half-written


def test_a_killed_worker_loses_only_its_point_in_one_line(tmp_path):
    """Issue 24: a worker killed mid-sweep ends the run with exit 1 and one line naming
    the point it was on and the points kept; the other points are written."""
    scenario = tmp_path / "slow.yaml"
    scenario.write_text(SLOW.replace("to: 4 GiB", "to: 16 MiB"))
    argv = ["run", str(scenario), "--out", str(tmp_path / "out"), "--jobs", "2"]
    proc = subprocess.Popen(
        _command(argv, tmp_path), stderr=subprocess.PIPE, text=True, env=_env(), cwd=tmp_path
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if "a2a[" in line:  # the workers exist and are simulating
            break
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    os.kill(int(children[0]), signal.SIGKILL)  # as the kernel's out-of-memory killer would
    try:
        _, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    last = err.splitlines()[-1]
    assert re.fullmatch(
        r"tpusim: error: \S+ a2a\[bytes=[^]]+\] failed: its worker process died \(killed, or "
        r"out of memory\) while simulating it \(signal 9\) \((\d+) finished points kept in "
        r".*points\.jsonl\)",
        last,
    ), last
    kept = (tmp_path / "out" / "points.jsonl").read_text().splitlines()
    assert len(kept) == 3 * 15  # every point is there: 44 results and the lost one


def test_ctrl_c_during_collective(tmp_path):
    # a sweep of 13 sizes on 9,216 chips: well over 10 s, so still running at 2 s
    argv = ["collective", "ironwood-pod", "--op", "all-to-all", "--sweep-bytes", "1MiB:4GiB"]
    proc = subprocess.Popen(
        _command(argv, tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=cap_memory,
        env=_env(),
    )
    time.sleep(2.0)  # past the imports, inside building or simulating
    assert proc.poll() is None
    sent_at = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=TIMEOUT_S)
    assert (proc.returncode, err) == (130, "tpusim: interrupted\n")
    # issue 15: the sweep's header and rows print as they finish; only whole lines
    assert out == "" or (out.startswith("      size       time") and out.endswith("\n"))
    assert time.perf_counter() - sent_at < INTERRUPT_DEADLINE_S


# -- nothing half-written ------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_outputs():
    scenario = Scenario(CORPUS / "tiny.yaml")
    return scenario.outputs(run_scenario(scenario, ScenarioRunOptions(quiet=True, jobs=1)))


def test_a_failing_writer_leaves_the_folder_as_it_was(tiny_outputs, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.csv").write_text("the previous run\n")

    def broken(folder: Path, outputs: object) -> list[Path]:
        (folder / "half.csv").write_text("a,b\n1,")
        raise OSError(28, "No space left on device")

    WRITERS.register("broken", OutputWriter(broken, "half.csv"))
    try:
        with pytest.raises(OSError, match="No space"):
            write_outputs(out, tiny_outputs)
    finally:
        WRITERS.unregister("broken")
    assert sorted(p.name for p in out.iterdir()) == ["summary.csv"]
    assert (out / "summary.csv").read_text() == "the previous run\n"


def test_a_failed_write_into_a_new_folder_leaves_no_folder(tiny_outputs, tmp_path):
    def broken(folder: Path, outputs: object) -> list[Path]:
        raise OSError(28, "No space left on device")

    WRITERS.register("broken", OutputWriter(broken, "half.csv"))
    try:
        with pytest.raises(OSError):
            write_outputs(tmp_path / "new", tiny_outputs)
    finally:
        WRITERS.unregister("broken")
    assert not (tmp_path / "new").exists()


def test_write_outputs_leaves_no_staging_folder(tiny_outputs, tmp_path):
    written = write_outputs(tmp_path / "out", tiny_outputs)
    names = {p.name for p in (tmp_path / "out").iterdir()}
    assert not any(n.startswith(STAGING_PREFIX) for n in names)
    assert {p.name for paths in written.values() for p in paths} == names


@pytest.fixture(scope="module")
def tiny_drawn(tiny_outputs):
    """``tiny_outputs`` with the figures on (tiny.yaml has them off for the path cases)."""
    import dataclasses

    return dataclasses.replace(tiny_outputs, with_plots=True)


def test_figures_drawn_in_a_second_process_give_the_same_files(tiny_drawn, tmp_path):
    """``processes`` > 1: the plots writer runs in a forked process, the others here;
    every file has the same bytes as one process writing them all."""
    alone = write_outputs(tmp_path / "alone", tiny_drawn, processes=1)
    beside = write_outputs(tmp_path / "beside", tiny_drawn, processes=2)
    assert any(p.suffix == ".png" for p in alone["plots"])  # something was drawn
    names = {name: [p.name for p in paths] for name, paths in alone.items()}
    assert {name: [p.name for p in paths] for name, paths in beside.items()} == names
    for path in alone.values():
        for p in path:
            assert stable_bytes(tmp_path / "beside" / p.name) == stable_bytes(p), p.name


def test_a_drawing_process_that_dies_is_drawn_again_here(tiny_drawn, tmp_path):
    """A figure that kills the drawing process (out of memory, say): the figures are
    drawn in this process instead and the run writes every file."""
    here = os.getpid()
    drawn_here: list[int] = []

    def dies_elsewhere(folder: Path, run: object) -> list[Path]:
        if os.getpid() != here:
            os._exit(9)
        drawn_here.append(os.getpid())
        return []

    FIGURES.register("dies", RunFigure(dies_elsewhere, "nothing"))
    try:
        written = write_outputs(tmp_path / "out", tiny_drawn, processes=2)
    finally:
        FIGURES.unregister("dies")
    assert drawn_here == [here]
    again = write_outputs(tmp_path / "again", tiny_drawn)["plots"]
    assert [p.name for p in written["plots"]] == [p.name for p in again] != []


def test_atomic_write_keeps_the_old_file_when_the_write_fails(tmp_path):
    path = tmp_path / "a.txt"
    atomic_write_text(path, "old")

    def half(handle) -> None:
        handle.write("new, half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        atomic_write(path, half)
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_run_out_in_a_read_only_folder(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    case = {"argv": ["run", "{dir}/tiny.yaml", "--quiet", "--out", str(locked / "out")]}
    done = _run_case(case, tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert re.search(r"--out .*locked/out: cannot write \(Permission denied\)", done.stderr)


# -- determinism ---------------------------------------------------------------------
def _run_demo(tmp: Path, name: str, jobs: str) -> tuple[dict, Path]:
    out = tmp / name
    done = subprocess.run(
        _command(
            [
                "run",
                str(ROOT / "scenarios" / "demo.yaml"),
                "--quiet",
                "--json",
                "--out",
                str(out),
                "--jobs",
                jobs,
            ],
            tmp,
        ),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S * 2,
        env=_env(),
        cwd=tmp,
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout, parse_constant=_no_constant)
    del record["wall_s"], record["out"]  # the only fields that may differ
    # plots are on by default (issue 33): their paths lie under the run's own folder
    record["plots"] = [str(Path(p).relative_to(out)) for p in record.get("plots", [])]
    return record, out


def test_runs_are_byte_identical_with_one_and_two_workers(tmp_path):
    """Two processes (one worker, then two): the same record and the same bytes in
    every file; a third run with one worker is the slow test below."""
    one, out_one = _run_demo(tmp_path, "one", "1")
    two, out_two = _run_demo(tmp_path, "two", "2")
    assert one == two
    files = sorted(p.name for p in out_one.iterdir())
    assert {"summary.csv", "ops.csv", "links.csv"} <= set(files)
    assert files == sorted(p.name for p in out_two.iterdir())
    for name in files:
        assert stable_bytes(out_one / name) == stable_bytes(out_two / name), name


@pytest.mark.slow  # a third run of the demo (about 5 s); the test above compares two
def test_a_second_run_with_one_worker_gives_the_same_record_and_files(tmp_path):
    """The same command run twice with one worker: the same record and bytes."""
    one, out_one = _run_demo(tmp_path, "one", "1")
    again, out_again = _run_demo(tmp_path, "again", "1")
    assert one == again
    files = sorted(p.name for p in out_one.iterdir())
    assert files == sorted(p.name for p in out_again.iterdir())
    for name in files:
        assert stable_bytes(out_one / name) == stable_bytes(out_again / name), name
