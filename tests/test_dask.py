"""``tpusim run --executor dask`` (issue 15): one task per (system, workload point) on a
local Dask cluster gives the same rows and byte-identical files as ``--jobs 1``; a
missing dask or an unreachable scheduler is one line."""

from __future__ import annotations

import json
import sys

import pytest
from helpers import assert_one_error_line, run, stable_bytes

pytest.importorskip("distributed")

SMALL = """\
name: small
# figures off: they are drawn in this process from the run's records, which the CSVs
# compared below hold (figures' byte identity across processes: test_corpus_outputs)
plots: false
systems:
  - v5e-pod
  - {system: v6e-pod, name: v6e-slow, sweep: {link_bandwidth: [20 GB/s, 40 GB/s]}}
workloads:
  - {name: topo, kind: topology}
  - {name: ar, kind: collective, op: all-reduce, bytes: 1 MiB, sweep: {bytes: [1 MiB, 4 MiB]}}
  - {name: mm, kind: program, ops: [{name: mm, kind: matmul, m: 512, n: 512, k: 512},
     {name: g, kind: collective, collective: all-reduce, bytes: 8 MiB, after: [mm]}]}
"""


def _run(capsys, path, out, *extra):
    argv = ["run", str(path), "--out", str(out), "--json", "--quiet", *extra]
    code, stdout, err = run(capsys, *argv)
    assert code == 0, err
    return json.loads(stdout)


def test_dask_gives_the_same_results_and_files_as_one_job(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(SMALL)
    local = _run(capsys, path, tmp_path / "local", "--jobs", "1")
    dask = _run(capsys, path, tmp_path / "dask", "--executor", "dask")
    assert dask["results"] == local["results"]
    assert dask["comparison"] == local["comparison"]
    assert len(local["results"]) == 3 * 4  # 3 systems x 4 points
    names = sorted(p.name for p in (tmp_path / "local").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "dask").iterdir())
    for name in names:
        assert stable_bytes(tmp_path / "dask" / name) == stable_bytes(tmp_path / "local" / name)


def test_without_dask_installed_one_line(tmp_path, capsys, monkeypatch):
    path = tmp_path / "s.yaml"
    path.write_text(SMALL)
    monkeypatch.setitem(sys.modules, "distributed", None)  # import raises ImportError
    argv = ["run", str(path), "--out", str(tmp_path / "o"), "--executor", "dask", "--quiet"]
    line = assert_one_error_line(*run(capsys, *argv))
    assert "pip install 'tpusim[dask]'" in line


def test_scheduler_without_dask_executor_is_refused(tmp_path, capsys):
    argv = ["run", "demo", "--out", str(tmp_path / "o"), "--scheduler", "tcp://127.0.0.1:8786"]
    assert "--scheduler needs --executor dask" in assert_one_error_line(*run(capsys, *argv))


def test_unreachable_scheduler_is_one_line(tmp_path, capsys, monkeypatch):
    import tpusim.study.executors

    monkeypatch.setattr(tpusim.study.executors, "CONNECT_TIMEOUT_S", 2)
    path = tmp_path / "s.yaml"
    path.write_text(SMALL)
    argv = ["run", str(path), "--out", str(tmp_path / "o"), "--executor", "dask", "--quiet"]
    argv += ["--scheduler", "tcp://127.0.0.1:9"]
    line = assert_one_error_line(*run(capsys, *argv))
    assert "cannot reach the Dask scheduler" in line and "tcp://127.0.0.1:9" in line
    assert not (tmp_path / "o").exists()
