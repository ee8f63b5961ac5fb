"""Compile published training runs with MaxText's ``train_compile`` on this CPU and keep
XLA's memory analysis of each as a small JSON record in ``configs/measurements/memory/``
(the reference of tpusim's memory model, :mod:`tpusim.validation.memory_records`).

Each case of ``configs/measurements/workloads/`` becomes its MaxText line
(:mod:`tpusim.validation.maxtext_line`); cases whose line, slice and slice count are the
same (a run on one slice and on two, data-parallel over DCN) share one compile. The
compiled module itself is written under ``--dump`` (local, never checked in). One
compile at a time; a compile that fails is recorded with its reason::

    nice -n 10 python tools/compile_memory.py --maxtext-python VENV/bin/python \\
        [--dump DIR] CASE_ID ...
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import time
from pathlib import Path

from tpusim.compile.maxtext import compile_maxtext, maxtext_topology
from tpusim.config.loader import load_model
from tpusim.errors import TpusimError
from tpusim.validation.maxtext_line import compile_slices, compile_topology, maxtext_overrides
from tpusim.validation.memory_records import RECORDS_DIR
from tpusim.validation.workloads import WorkloadCase, load_workload_cases


def groups(cases: list[WorkloadCase]) -> dict[tuple[str, str, int], list[str]]:
    """(MaxText line, topology, slices) -> the ids of the cases it compiles."""
    out: dict[tuple[str, str, int], list[str]] = {}
    for case in cases:
        s = case.spec
        key = (" ".join(maxtext_overrides(s)), compile_topology(s), compile_slices(s))
        out.setdefault(key, []).append(case.id)
    return out


def record(key: tuple[str, str, int], ids: list[str], python: str, dump: Path) -> dict:
    """Compile one group and return its record (``failed`` with the reason if it did)."""
    line, topology, slices = key
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    out = record_head(key, ids)
    start = time.perf_counter()
    try:
        fields = compile_maxtext(line, topology, python, dump / f"{ids[0]}.json.gz", (), slices)
    except TpusimError as exc:
        return out | {"failed": str(exc), "compile_time_s": round(time.perf_counter() - start)}
    version = fields["versions"].get("maxtext", "")
    return out | {
        "source": f"XLA memory_analysis, MaxText {version}, compiled {today}",
        "versions": fields["versions"],
        "compile_time_s": round(fields["compile_time_s"], 1),
        "memory_analysis": {k: int(v) for k, v in fields["memory_analysis"].items()},
    }


#: XLA's generated code does not grow with the layers of a scan: the larger compile's.
CODE = "generated_code_size_in_bytes"


def extrapolated(
    key: tuple[str, str, int],
    ids: list[str],
    python: str,
    dump: Path,
    layers: tuple[int, int],
    total: int,
    failed: str,
) -> dict:
    """A record for a run whose compile ran out of HBM: the same line compiled at two
    smaller layer counts and every field extended linearly to ``total`` layers (the
    layers are one scan: each adds its weights, optimiser state and saved activations,
    the rest is the same)."""
    line, topology, slices = key
    found = []
    for n in layers:
        kept = [w for w in line.split() if not w.startswith("base_num_decoder_layers=")]
        fewer = " ".join([*kept, "override_model_config=true", f"base_num_decoder_layers={n}"])
        one = (fewer, topology, slices)
        found.append(record(one, [f"{ids[0]}-{n}"], python, dump))
        if "failed" in found[-1]:
            return {
                "cases": ids,
                "maxtext": line,
                "failed": f"{failed}; at {n} layers: {found[-1]['failed']}",
            }
    (a, b), (ma, mb) = layers, (f["memory_analysis"] for f in found)
    scale = (total - a) / (b - a)
    base = record_head(key, ids)
    return base | {
        "source": found[0]["source"] + f", extrapolated from {a} and {b} layers to {total}",
        "versions": found[0]["versions"],
        "compile_time_s": sum(f["compile_time_s"] for f in found),
        "full_compile": failed,
        "layers": {str(n): f["memory_analysis"] for n, f in zip(layers, found, strict=True)},
        "memory_analysis": {k: round(ma[k] + (mb[k] - ma[k]) * scale) for k in ma}
        | {CODE: mb[CODE]},
    }


def record_head(key: tuple[str, str, int], ids: list[str]) -> dict:
    line, topology, slices = key
    return {
        "cases": ids,
        "maxtext": line,
        "topology": topology,
        "compile_topology": maxtext_topology(topology),
        "num_slices": slices,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ids", nargs="+", help="case ids (configs/measurements/workloads)")
    parser.add_argument("--maxtext-python", required=True, help="MaxText's Python (3.12)")
    parser.add_argument(
        "--dump", type=Path, default=Path(tempfile.gettempdir()) / "tpusim-memory-dumps"
    )
    parser.add_argument(
        "--extrapolate",
        action="store_true",
        help="when a compile runs out of HBM, compile at a quarter and a half of the "
        "model's layers and extend linearly to all of them",
    )
    args = parser.parse_args()
    cases = {c.id: c for c in load_workload_cases()}
    unknown = [i for i in args.ids if i not in cases]
    if unknown:
        sys.exit(f"unknown case ids: {', '.join(unknown)}")
    args.dump.mkdir(parents=True, exist_ok=True)
    everything = groups(list(cases.values()))
    wanted = list(dict.fromkeys(k for i in args.ids for k, ids in everything.items() if i in ids))
    for key in wanted:
        ids = everything[key]
        path = RECORDS_DIR / f"{ids[0]}.json"
        print(f"{ids[0]}: {key[1]} x{key[2]} ...", flush=True)
        data = record(key, ids, args.maxtext_python, args.dump)
        if "failed" in data and "HbmOom" in data["failed"] and args.extrapolate:
            total = load_model(cases[ids[0]].spec.model).layers
            layers = (total // 4, total // 2)
            data = extrapolated(
                key, ids, args.maxtext_python, args.dump, layers, total, data["failed"]
            )
        path.write_text(json.dumps(data, indent=1) + "\n")
        print(f"  -> {path.name}: {data.get('failed') or data['memory_analysis']}", flush=True)


if __name__ == "__main__":
    main()
