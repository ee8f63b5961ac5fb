"""One CLI convention across commands (issue 24): the system positional (``tpusim hlo
SYSTEM FILE``, the older ``FILE --system`` kept), byte counts as integers in JSON,
progress on stderr with ``--json`` on a pipe, wide tables wrapped, and the ``run``
summary naming only the files written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
from helpers import run

from tpusim.cli.scenarios_run import written_text
from tpusim.report import TABLE_WIDTH, format_table, integer_bytes

FIXTURE = Path(__file__).parent / "fixtures" / "hlo" / "all_to_all_4.hlo.txt"


def test_hlo_takes_the_system_first_and_keeps_the_older_form(capsys):
    code, new, err = run(capsys, "hlo", "v5e-pod", str(FIXTURE), "--json")
    assert code == 0, err
    code, old, err = run(capsys, "hlo", str(FIXTURE), "--system", "v5e-pod", "--json")
    assert code == 0, err
    assert json.loads(new) == json.loads(old)
    assert json.loads(new)["system"] == "v5e-pod"


def test_hlo_without_a_system_is_one_line(capsys):
    code, out, err = run(capsys, "hlo", str(FIXTURE))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "give SYSTEM FILE" in err


def test_byte_counts_are_integers_in_json(capsys):
    code, out, _ = run(
        capsys, "collective", "v5e-pod", "--op", "all-reduce", "--bytes", "1MiB", "--json"
    )
    assert code == 0
    assert re.search(r'"bytes": 1048576,', out)  # 2**20, not 1048576.0
    record = json.loads(out)
    assert isinstance(record["bytes"], int) and record["bytes"] == 2**20
    assert isinstance(record["busiest_link_bytes"], int)


def test_integer_bytes_leaves_other_numbers_alone():
    tree = {"bytes": 4.0, "time_s": 2.0, "rows": [{"hbm_bytes": [1.0, 2.5]}], "x_bytes": 0.5}
    assert integer_bytes(tree) == {
        "bytes": 4,
        "time_s": 2.0,
        "rows": [{"hbm_bytes": [1, 2.5]}],
        "x_bytes": 0.5,
    }
    assert isinstance(integer_bytes(tree)["time_s"], float)


def test_sweep_with_json_reports_progress_on_a_pipe(capsys):
    argv = ["collective", "v5e-pod", "--op", "all-reduce", "--sweep-bytes", "1KiB:4KiB"]
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0
    assert len(json.loads(out)["sweep"]) == 3
    lines = err.splitlines()
    assert len(lines) == 3
    pattern = re.compile(r"\[(\d)/3 +\d+% ETA \d\d:\d\d\] done    (\d) KiB \(")
    assert [pattern.match(line).groups() for line in lines] == [("1", "1"), ("2", "2"), ("3", "4")]
    assert lines[-1].startswith("[3/3 100%")


def test_a_table_of_forty_systems_wraps():
    columns = [f"torus[link_bandwidth={i} GB/s,hop_latency=0.5 us]" for i in range(40)]
    frame = pd.DataFrame(np.ones((3, 40)), index=["a (us)", "b (GB/s)", "c"], columns=columns)
    text = format_table(frame)
    assert max(len(line) for line in text.splitlines()) <= TABLE_WIDTH
    assert all(column in text for column in columns)
    assert "\\" not in text


def test_run_summary_names_the_files_written(tmp_path):
    out = tmp_path / "o"
    files = [out / name for name in ("summary.csv", "report.html", "points.jsonl")]
    files += [out / f"trace-{i}.json" for i in range(3)]
    files += [out / "plots" / "busbw.png", out / "plots" / "busbw.svg"]
    assert written_text(out, files) == (
        "summary.csv, report.html, points.jsonl, trace-*.json (3), 1 plots (PNG and SVG)"
    )
    assert written_text(out, []) == "nothing"
