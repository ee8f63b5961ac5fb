"""``tpusim compile``: compile a model step for a TPU topology on the CPU (the xla extra),
or MaxText's own step through its ``train_compile`` (``--maxtext``)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from tpusim import units
from tpusim.cli.console import print_json
from tpusim.cli.flags import Subparsers
from tpusim.compile import NEEDS_EXTRA, compile_maxtext_to, compile_to, has_xla, make_request
from tpusim.compile.request import DTYPES, REMATS, STEPS
from tpusim.errors import InputError
from tpusim.program.hlo.artifact import SUFFIX

#: Where ``--maxtext-python`` defaults from (else ``python3.12`` on the PATH).
MAXTEXT_PYTHON_ENV = "TPUSIM_MAXTEXT_PYTHON"


def cmd_compile(args: argparse.Namespace) -> None:
    flags = tuple(args.libtpu_flag or ())
    if (args.model is None) == (args.maxtext is None):
        raise InputError("compile: give MODEL or --maxtext 'key=value ...', one of them")
    if args.maxtext is not None:
        python = args.maxtext_python or os.environ.get(MAXTEXT_PYTHON_ENV, "python3.12")
        out = _out(args.out, "maxtext", args.topology)
        fields = compile_maxtext_to(args.maxtext, args.topology, python, out, flags)
        _report(args, out, fields, "MaxText step")
        return
    if not has_xla():
        raise InputError(NEEDS_EXTRA)
    request = make_request(
        args.model,
        args.topology,
        args.mesh,
        args.batch,
        args.seq,
        args.layers,
        step=args.step,
        dtype=args.dtype,
        remat=args.remat,
        libtpu_flags=flags,
    )
    out = _out(args.out, request.model.name, request.topology)
    what = f"{request.model.name} ({request.model.layers} layers, {request.step})"
    _report(args, out, compile_to(request, out), what)


def _out(given: str | None, name: str, topology: str) -> Path:
    out = Path(given or f"{name}-{topology.replace(':', '-')}{SUFFIX}")
    if not str(out).endswith(SUFFIX):
        raise InputError(f"--out {out}: the artifact is gzip JSON, name it *{SUFFIX}")
    return out


def _report(args: argparse.Namespace, out: Path, fields: dict[str, Any], what: str) -> None:
    cost, memory = fields["cost_analysis"], fields["memory_analysis"]
    record = {
        "out": str(out),
        "request": fields["request"],
        "compile_time_s": fields["compile_time_s"],
        "hlo_bytes": len(fields["hlo"]),
        "artifact_bytes": out.stat().st_size,
        "cost_analysis": {k: cost.get(k, 0.0) for k in ("flops", "bytes accessed")},
        "memory_analysis": memory,
        "versions": fields["versions"],
    }
    if args.json:
        print_json(record)
        return
    print(
        f"compiled {what} for {fields['topology']} in {record['compile_time_s']:.1f} s -> "
        f"{out} ({units.format_bytes(record['artifact_bytes'])})\n"
        f"XLA: {cost.get('flops', 0.0):.4g} FLOPs per device (loop bodies once), "
        f"peak {units.format_bytes(memory.get('peak_memory_in_bytes', 0.0))} per device"
    )


def add_parsers(sub: Subparsers) -> None:
    p = sub.add_parser(
        "compile",
        help="compile a model step for a TPU topology on the CPU (needs the xla extra)",
        usage="tpusim compile MODEL --topology TOPOLOGY [options]  "
        "(or: tpusim compile --maxtext 'key=value ...' --topology TOPOLOGY)",
    )
    p.add_argument(
        "model", nargs="?", help="shipped model preset (tpusim check models) or its YAML path"
    )
    p.add_argument(
        "--topology",
        required=True,
        help="libtpu topology (v5e:4x4, v6e:4x4, v5p:2x2x2, tpu7x:2x2x1) or a "
        "shipped system name, optionally with a shape (v5e-pod:2x2)",
    )
    _add_model_flags(p)
    _add_maxtext_flags(p)
    p.add_argument("--out", help=f"artifact path (*{SUFFIX}; default MODEL-TOPOLOGY{SUFFIX})")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_compile)


def _add_model_flags(p: argparse.ArgumentParser) -> None:
    """The compact model's flags (mesh, shapes, step, libtpu flags)."""
    p.add_argument(
        "--mesh",
        default="",
        help="role sizes, e.g. fsdp=8,tensor=2 (roles data, fsdp, expert, tensor; "
        "default: every device on fsdp)",
    )
    p.add_argument(
        "--batch",
        type=int,
        default=0,
        help="global batch, sequences (default: one per batch shard)",
    )
    p.add_argument("--seq", type=int, default=256, help="sequence length, tokens (default 256)")
    p.add_argument(
        "--layers", type=int, help="override the preset's layer count (smaller compiles)"
    )
    p.add_argument("--step", choices=STEPS, default="train", help="train (grads + Adam) or decode")
    p.add_argument("--dtype", choices=DTYPES, default="bf16", help="weights and activations")
    p.add_argument("--remat", choices=REMATS, default="full", help="rematerialise each layer")
    p.add_argument(
        "--libtpu-flag",
        action="append",
        metavar="FLAG",
        help="a LIBTPU_INIT_ARGS flag, e.g. "
        "--xla_tpu_enable_sparse_core_collective_offload_all_gather=true "
        "(repeatable)",
    )


def _add_maxtext_flags(p: argparse.ArgumentParser) -> None:
    """MaxText's own step: its flags verbatim and the Python it is installed in."""
    p.add_argument(
        "--maxtext",
        metavar="'KEY=VALUE ...'",
        help="compile MaxText's own step instead: its train_compile flags verbatim "
        "(model_name=llama2-7b per_device_batch_size=1 ...)",
    )
    p.add_argument(
        "--maxtext-python",
        metavar="PYTHON",
        help=f"the Python where MaxText is installed (default ${MAXTEXT_PYTHON_ENV}, "
        "else python3.12)",
    )
