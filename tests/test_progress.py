"""Progress on stderr (issue 15): one line per finished run with the overall count,
percentage, ETA and the run's own wall time, across worker processes; a tqdm bar on a
terminal; ``--sweep-bytes`` rows printed as they finish; ``--quiet`` silences it all;
stdout stays one JSON object."""

from __future__ import annotations

import io
import json
import re
import sys

import pytest
from helpers import run

import tpusim.cli.app
import tpusim.cli.collective_run
from tpusim.study.progress import Finished, Progress

SMALL = """\
name: small
plots: false  # progress is what these tests read; figures are tests/test_plots.py's
systems: [v5e-pod, v6e-pod]
workloads:
  - {name: topo, kind: topology}
  - {name: ar, kind: collective, op: all-reduce, bytes: 1 MiB, sweep: {bytes: [1 MiB, 2 MiB]}}
  - {name: mm, kind: program, ops: [{name: mm, kind: matmul, m: 512, n: 512, k: 512}]}
"""
LABELS = ["topo", "ar[bytes=1 MiB]", "ar[bytes=2 MiB]", "mm"]
LINE = re.compile(
    r"\[ ?(\d+)/8 +(\d+)% ETA (\d\d:\d\d)\] done    (v5e-pod|v6e-pod) (.+) "
    r"\((\d+\.\d\d) s, peak [\d.]+ [KMG]iB\)"
)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_one_line_per_run_with_count_percentage_eta_and_wall_time(tmp_path, capsys, jobs):
    path = tmp_path / "s.yaml"
    path.write_text(SMALL)
    argv = ["run", str(path), "--out", str(tmp_path / "o"), "--json", "--jobs", jobs]
    code, out, err = run(capsys, *argv)
    assert code == 0
    json.loads(out)  # stdout is the JSON object alone
    lines = err.splitlines()
    assert lines[-1] == f"writing {tmp_path / 'o'}/"
    matches = [LINE.fullmatch(line) for line in lines[:-1]]
    assert all(matches), lines
    counts = [int(m.group(1)) for m in matches]
    assert counts == list(range(1, 9))  # one overall count, across both systems
    percents = [int(m.group(2)) for m in matches]  # of the expected run time (below)
    assert percents == sorted(percents) and percents[-1] == 100
    assert matches[-1].group(3) == "00:00"
    runs = sorted((m.group(4), m.group(5)) for m in matches)
    assert runs == sorted((s, label) for s in ("v5e-pod", "v6e-pod") for label in LABELS)


def test_quiet_prints_nothing_on_stderr(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(SMALL)
    code, out, err = run(capsys, "run", str(path), "--out", str(tmp_path / "o"), "--quiet")
    assert code == 0 and err == "" and "small" in out


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_one_tqdm_bar_with_percentage_and_eta():
    stream = Terminal()
    with Progress(4, "demo", stream=stream) as bar:
        for n in range(4):
            bar.finished(Finished(f"sys run{n}", 0.25))
    text = stream.getvalue()
    for n in range(4):
        assert f"done    sys run{n} (0.25 s)" in text
    final = text.split("\r")[-1]
    assert re.search(r"demo: 100%\|.*\| 4/4 \[\d\d:\d\d<00:00", final), final


def test_eta_costs_each_kind_at_its_own_mean_time(monkeypatch):
    """Two kinds of runs: 'fast' 1 s each, 'slow' 10 s each. After one of each, the
    runs left (1 fast, 2 slow) are expected to take 1 + 2 x 10 = 21 s of run time;
    11 s of run time done in 11 s of wall time (no parallelism): ETA 21 s, 11 / 32
    of the expected run time done (34%)."""
    clock = iter([0.0, 11.0, 11.0, 11.0, 11.0])
    monkeypatch.setattr("tpusim.study.progress.time.perf_counter", lambda: next(clock))
    stream = io.StringIO()
    bar = Progress(5, stream=stream, kinds=["fast", "fast", "slow", "slow", "slow"])
    bar.finished(Finished("a", 1.0), "fast")
    assert bar.work_left_s() == pytest.approx(1.0 * 1 + 1.0 * 3)  # slow unseen: overall mean
    bar.finished(Finished("b", 10.0), "slow")
    assert bar.work_left_s() == pytest.approx(1.0 + 2 * 10.0)
    assert bar.eta_s() == pytest.approx(21.0)
    assert stream.getvalue().splitlines()[-1].startswith("[2/5  34% ETA 00:21]")


def test_a_failed_run_says_so():
    stream = io.StringIO()
    Progress(2, stream=stream).finished(Finished("sys w", 1.5, "deadlock: x"))
    assert stream.getvalue() == "[1/2  50% ETA 00:00] failed  sys w (1.50 s): deadlock: x\n"


def test_sweep_rows_are_printed_as_they_finish(monkeypatch, capsys):
    """Before the k-th size runs, the header and the k-1 rows before it are on stdout."""
    buffer = io.StringIO()
    monkeypatch.setattr(sys, "stdout", buffer)
    seen = []
    real = tpusim.cli.collective_run.run_one

    def spy(*args, **kwargs):
        seen.append(buffer.getvalue().count("\n"))
        return real(*args, **kwargs)

    monkeypatch.setattr(tpusim.cli.collective_run, "run_one", spy)
    argv = ["collective", "v5e-pod", "--op", "all-reduce", "--sweep-bytes", "1KiB:8KiB"]
    assert tpusim.cli.app.main(argv) == 0
    assert seen == [1, 2, 3, 4]
    rows = buffer.getvalue().splitlines()
    assert [r.split()[0:2] for r in rows[1:]] == [
        ["1", "KiB"],
        ["2", "KiB"],
        ["4", "KiB"],
        ["8", "KiB"],
    ]
    assert capsys.readouterr().err == ""  # not a terminal: the rows are the progress


def test_sweep_bar_on_a_terminal(monkeypatch, capsys):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    argv = ["collective", "v5e-pod", "--op", "all-reduce", "--sweep-bytes", "1KiB:4KiB", "--json"]
    assert tpusim.cli.app.main(argv) == 0
    assert len(json.loads(capsys.readouterr().out)["sweep"]) == 3
    text = terminal.getvalue()
    assert [f"done    {n} KiB (" in text for n in (1, 2, 4)] == [True] * 3
    assert re.search(r"v5e-pod all-reduce: 100%\|.*\| 3/3", text.split("\r")[-1])
