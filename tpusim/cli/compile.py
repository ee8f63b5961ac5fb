"""``tpusim compile``: compile a model step for a TPU topology on the CPU (the xla extra),
or MaxText's own step through its ``train_compile`` (``--maxtext``)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from pydantic.json_schema import JsonDict

from tpusim import units
from tpusim.cli.console import print_json
from tpusim.cli.flags import Subparsers
from tpusim.cli.model_flags import add_model_flags, fill
from tpusim.compile import NEEDS_EXTRA, compile_maxtext_to, compile_to, has_xla, make_request
from tpusim.compile.request import DTYPES, REMATS, STEPS
from tpusim.errors import InputError
from tpusim.program.hlo.artifact import SUFFIX

#: Where ``--maxtext-python`` defaults from (else ``python3.12`` on the PATH).
MAXTEXT_PYTHON_ENV = "TPUSIM_MAXTEXT_PYTHON"


def cmd_compile(args: argparse.Namespace) -> None:
    fill(args, CompileFlags, command="tpusim compile")
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
    if args.as_json:
        print_json(record)
        return
    print(
        f"compiled {what} for {fields['topology']} in {record['compile_time_s']:.1f} s -> "
        f"{out} ({units.format_bytes(record['artifact_bytes'])})\n"
        f"XLA: {cost.get('flops', 0.0):.4g} FLOPs per device (loop bodies once), "
        f"peak {units.format_bytes(memory.get('peak_memory_in_bytes', 0.0))} per device"
    )


_INT: JsonDict = {"flag_type": "int"}


class CompileFlags(BaseModel):
    """``tpusim compile``'s options: a preset's step (the xla extra) or MaxText's own."""

    model: str | None = Field(
        None,
        description="shipped model preset (tpusim check models) or its YAML path",
        json_schema_extra={"positional": True, "nargs": "?"},
    )
    topology: str = Field(
        description="libtpu topology (v5e:4x4, v6e:4x4, v5p:2x2x2, tpu7x:2x2x1) or a "
        "shipped system name, optionally with a shape (v5e-pod:2x2)"
    )
    mesh: str = Field(
        "",
        description="role sizes, e.g. fsdp=8,tensor=2 (roles data, fsdp, expert, tensor; "
        "default: every device on fsdp)",
    )
    batch: int = Field(
        0,
        description="global batch, sequences (default: one per batch shard)",
        json_schema_extra=_INT,
    )
    seq: int = Field(
        256, description="sequence length, tokens (default 256)", json_schema_extra=_INT
    )
    layers: int | None = Field(
        None,
        description="override the preset's layer count (smaller compiles)",
        json_schema_extra=_INT,
    )
    step: str = Field("train", description="train (grads + Adam) or decode")
    dtype: str = Field("bf16", description="weights and activations")
    remat: str = Field("full", description="rematerialise each layer")
    libtpu_flag: list[str] | None = Field(
        None,
        description="a LIBTPU_INIT_ARGS flag, e.g. "
        "--xla_tpu_enable_sparse_core_collective_offload_all_gather=true (repeatable)",
        json_schema_extra={"action": "append", "metavar": "FLAG"},
    )
    maxtext: str | None = Field(
        None,
        description="compile MaxText's own step instead: its train_compile flags verbatim "
        "(model_name=llama2-7b per_device_batch_size=1 ...)",
        json_schema_extra={"metavar": "'KEY=VALUE ...'"},
    )
    maxtext_python: str | None = Field(
        None,
        description=f"the Python where MaxText is installed (default ${MAXTEXT_PYTHON_ENV}, "
        "else python3.12)",
        json_schema_extra={"metavar": "PYTHON"},
    )
    out: str | None = Field(
        None, description=f"artifact path (*{SUFFIX}; default MODEL-TOPOLOGY{SUFFIX})"
    )
    as_json: bool = Field(False, alias="json", description="print one JSON object")


def add_parsers(sub: Subparsers) -> None:
    """The subcommand, its flags generated from :class:`CompileFlags`."""
    p = sub.add_parser(
        "compile",
        usage="tpusim compile MODEL --topology TOPOLOGY [options]  "
        "(or: tpusim compile --maxtext 'key=value ...' --topology TOPOLOGY)",
    )
    choices = {"step": STEPS, "dtype": DTYPES, "remat": REMATS}
    add_model_flags(p, CompileFlags, choices=choices)
    p.set_defaults(func=cmd_compile)
