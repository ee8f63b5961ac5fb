"""``tpusim collective``: one collective, or a sweep of sizes, on a system. This module
holds the flags (read by every parser); :mod:`tpusim.cli.collective_run` runs it."""

from __future__ import annotations

from pydantic import BaseModel, Field

from tpusim.cli.faults import add_fault_flags
from tpusim.cli.flags import Subparsers
from tpusim.cli.model_flags import add_model_flags
from tpusim.cli.network_flags import add_network_flags
from tpusim.collectives import ALGORITHMS
from tpusim.config.limits import MAX_SWEEP_POINTS
from tpusim.later import Later
from tpusim.vocabulary import EngineChoice, Op


class CollectiveFlags(BaseModel):
    """``tpusim collective``'s options, besides the fault and network flags."""

    system: str = Field(
        description="shipped system name or path to a system YAML",
        json_schema_extra={"positional": True},
    )
    op: Op
    bytes: str | None = Field(
        None, description="size with a unit (nccl-tests convention), e.g. 64MiB"
    )
    sweep_bytes: str | None = Field(None, description="LOW:HIGH, powers of two, e.g. 1KiB:1GiB")
    axes: str | None = Field(
        None, description="torus axes to run over, e.g. x,z (one group per rest)"
    )
    chips: int | None = Field(
        None, description="run on the first N chips", json_schema_extra={"flag_type": "int"}
    )
    algorithm: str = Field(
        "auto", description="auto (default): the fastest predicted under the cost model"
    )
    engine: EngineChoice = Field(
        "auto",
        description="who runs the collective: auto = the chip's default (collectives.offload "
        "in its file); none = the network alone, no on-chip cost, nominal link bandwidth",
    )
    no_offload: bool = Field(
        False, description="reduce on the TensorCore (turns the CAE/SparseCore offload off)"
    )
    pairs: str | None = Field(
        None, description="collective-permute chip pairs SRC:DST[,SRC:DST...]"
    )
    links_csv: str | None = Field(None, description="write the per-link table to this CSV file")
    calibration: str | None = Field(
        None, description="calibration overlay YAML (from tpusim calibrate)"
    )
    quiet: bool = Field(False, description="no progress bar on stderr (sweeps)")
    as_json: bool = Field(False, alias="json", description="print one JSON object")
    max_points: int = Field(
        MAX_SWEEP_POINTS,
        description=f"most sizes of --sweep-bytes to run (default {MAX_SWEEP_POINTS:,}; "
        "refused above it)",
        json_schema_extra={"flag_type": "positive"},
    )


def _add_collective(sub: Subparsers) -> None:
    p = sub.add_parser("collective")
    algorithms = ("auto", *ALGORITHMS.names())
    add_model_flags(p, CollectiveFlags, choices={"algorithm": algorithms})
    add_network_flags(p)
    add_fault_flags(p)
    p.set_defaults(func=Later("tpusim.cli.collective_run", "cmd_collective"))


def add_parsers(sub: Subparsers) -> None:
    _add_collective(sub)
