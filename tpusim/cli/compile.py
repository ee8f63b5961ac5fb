"""``tpusim compile``: compile a model step for a TPU topology on the CPU (the xla extra)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tpusim import units
from tpusim.cli.console import print_json
from tpusim.cli.flags import Subparsers
from tpusim.compile import NEEDS_EXTRA, compile_to, has_xla, make_request
from tpusim.compile.request import DTYPES, REMATS, STEPS
from tpusim.errors import InputError
from tpusim.program.hlo.artifact import SUFFIX


def cmd_compile(args: argparse.Namespace) -> None:
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
        libtpu_flags=tuple(args.libtpu_flag or ()),
    )
    out = Path(args.out or f"{request.model.name}-{request.topology.replace(':', '-')}{SUFFIX}")
    if not str(out).endswith(SUFFIX):
        raise InputError(f"--out {out}: the artifact is gzip JSON, name it *{SUFFIX}")
    fields = compile_to(request, out)
    record = {
        "out": str(out),
        "request": fields["request"],
        "compile_time_s": fields["compile_time_s"],
        "hlo_bytes": len(fields["hlo"]),
        "artifact_bytes": out.stat().st_size,
        "cost_analysis": {
            k: fields["cost_analysis"].get(k, 0.0) for k in ("flops", "bytes accessed")
        },
        "memory_analysis": fields["memory_analysis"],
        "versions": fields["versions"],
    }
    if args.json:
        print_json(record)
        return
    memory = fields["memory_analysis"]
    print(
        f"compiled {request.model.name} ({request.model.layers} layers, {request.step}) for "
        f"{request.topology} in {record['compile_time_s']:.1f} s -> {out} "
        f"({units.format_bytes(record['artifact_bytes'])})\n"
        f"XLA: {record['cost_analysis']['flops']:.4g} FLOPs per device (loop bodies once), "
        f"peak {units.format_bytes(memory.get('peak_memory_in_bytes', 0.0))} per device",
        file=sys.stdout,
    )


def add_parsers(sub: Subparsers) -> None:
    p = sub.add_parser(
        "compile",
        help="compile a model step for a TPU topology on the CPU (needs the xla extra)",
        usage="tpusim compile MODEL --topology TOPOLOGY [options]",
    )
    p.add_argument("model", help="shipped model preset (tpusim check models) or its YAML path")
    p.add_argument(
        "--topology",
        required=True,
        help="libtpu topology (v5e:4x4, v6e:4x4, v5p:2x2x2, tpu7x:2x2x1) or a "
        "shipped system name, optionally with a shape (v5e-pod:2x2)",
    )
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
        "--xla_tpu_enable_sparse_core_collective_offload_all_gather=true (repeatable)",
    )
    p.add_argument("--out", help=f"artifact path (*{SUFFIX}; default MODEL-TOPOLOGY{SUFFIX})")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_compile)
