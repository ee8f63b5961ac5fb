"""Compile published training runs with MaxText's ``train_compile`` on this CPU and ship
each as a replayable artifact in ``configs/measurements/compiled/`` (read by ``tpusim
validate --workloads --compiled``, :mod:`tpusim.validation.compiled`).

A case's MaxText line and slice are those of its memory record
(``configs/measurements/memory/``, :mod:`tools.compile_memory`), unless ``--maxtext``
and ``--topology`` give them (a recipe's own line, with its ``--libtpu-flag``\\ s). Each
artifact ``<case>.json.gz`` gets a record ``<case>.json``: the case, the command, the
MaxText line, the libtpu flags, the versions, the compile time, the date and ``--note``
(what differs from the recipe, e.g. a flag libtpu refuses). One compile
at a time (1-10 CPU-minutes and up to 2.5 GB each)::

    nice -n 10 python tools/compile_workloads.py \\
        --maxtext-python VENV/bin/python CASE_ID ...

``--from ARTIFACT`` ships an artifact compiled before (by ``tpusim compile --maxtext``)
for the one case given instead of compiling it again.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from tpusim.compile.maxtext import compile_maxtext
from tpusim.errors import TpusimError
from tpusim.program.hlo.artifact import read_artifact
from tpusim.validation.compiled import COMPILED_DIR
from tpusim.validation.memory_records import RECORDS_DIR


def memory_line(case: str) -> tuple[str, str]:
    """(MaxText line, topology) of the memory record that compiled ``case``."""
    for path in sorted(RECORDS_DIR.glob("*.json")):
        data = json.loads(path.read_text())
        if case in data["cases"] and "failed" not in data:
            return str(data["maxtext"]), str(data["topology"])
    raise SystemExit(f"compile_workloads: no finished memory record compiles {case}")


def command_of(request: dict[str, Any], out: Path) -> str:
    """The ``tpusim compile`` command that makes the artifact of ``request``."""
    flags = [f"--libtpu-flag={f}" for f in request.get("libtpu_flags", [])]
    words = ["tpusim", "compile", "--maxtext", request["maxtext"], "--topology"]
    words += [request["topology"], *flags, "--out", out.name]
    return shlex.join(words)


def write_record(case: str, artifact: Path, date: str, note: str | None = None) -> Path:
    """The record of ``artifact`` (shipped as ``<case>.json.gz``) beside it, with
    ``note`` (what differs from the published run's recipe) when given."""
    fields = read_artifact(artifact).fields
    request = fields["request"]
    record = {
        "case": case,
        "artifact": artifact.name,
        "command": command_of(request, artifact),
        "maxtext": request["maxtext"],
        "topology": request["topology"],
        "compile_topology": request.get("compile_topology"),
        "libtpu_flags": request.get("libtpu_flags", []),
        "versions": fields["versions"],
        "compile_time_s": round(float(fields["compile_time_s"]), 1),
        "compiled": date,
        "source": "MaxText train_compile on a CPU (tpusim compile --maxtext), "
        "XLA's per-device module",
    }
    if note:
        record["note"] = note
    path = artifact.with_name(f"{case}.json")
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("cases", nargs="+", help="workload case ids")
    p.add_argument("--maxtext-python", default="python3.12")
    p.add_argument("--maxtext", help="the MaxText line (default: the memory record's)")
    p.add_argument("--topology", help="the slice, e.g. tpu7x:4x4x4 (with --maxtext)")
    p.add_argument("--libtpu-flag", action="append", default=[])
    p.add_argument("--from", dest="source", help="ship this artifact instead of compiling")
    p.add_argument("--date", help="the compile date (default today, UTC)")
    p.add_argument("--note", help="what differs from the run's recipe (kept in the record)")
    args = p.parse_args(argv)
    date = args.date or datetime.datetime.now(datetime.UTC).date().isoformat()
    COMPILED_DIR.mkdir(parents=True, exist_ok=True)
    for case in args.cases:
        out = COMPILED_DIR / f"{case}.json.gz"
        if args.source:
            shutil.copyfile(args.source, out)
        else:
            line, topology = (args.maxtext, args.topology) if args.maxtext else memory_line(case)
            try:
                compile_maxtext(line, topology, args.maxtext_python, out, tuple(args.libtpu_flag))
            except TpusimError as exc:
                print(f"{case}: {exc}", file=sys.stderr)
                continue
        print(write_record(case, out, date, args.note))
    return 0


if __name__ == "__main__":
    sys.exit(main())
