"""``tpusim validate`` and ``tpusim calibrate``: their flags (read by every parser);
:mod:`tpusim.cli.validate_run` runs them (the collectives; ``--workloads`` and
``--serving`` in :mod:`tpusim.cli.validate_workloads` and
:mod:`tpusim.cli.validate_serving`, each imported only for its kind)."""

from __future__ import annotations

import argparse
from typing import Literal

from pydantic import BaseModel, Field

from tpusim.cli.flags import Subparsers
from tpusim.cli.model_flags import add_model_flags
from tpusim.cli.network_flags import add_network_flags
from tpusim.later import Later
from tpusim.network import NETWORKS


class ValidationFlags(BaseModel):
    """What ``tpusim validate`` and ``tpusim calibrate`` share, besides the network."""

    measurements: list[str] | None = Field(
        None,
        description="measurement YAML files (default: the shipped configs/measurements/*.yaml)",
    )
    as_json: bool = Field(False, alias="json", description="print one JSON object")
    workloads: bool = Field(
        False,
        description="whole-model training step times (configs/measurements/workloads/) instead",
    )
    approximate: bool = Field(
        False, description="with --workloads: drop the fields the model lacks (listed per case)"
    )
    jobs: int | None = Field(
        None,
        description="with --workloads: worker processes for the fits (default: one per core)",
        json_schema_extra={"flag_type": "int"},
    )


class ValidateFlags(ValidationFlags):
    """``tpusim validate``'s options."""

    calibration: str | None = Field(
        None, description="calibration overlay YAML to apply (tpusim calibrate)"
    )
    cv: Literal["chip", "family", "server"] | None = Field(
        None,
        description="with --workloads (chip, family) or --serving (chip, server): refit the "
        "shared terms leaving out one group at a time and report the held-out errors",
    )
    write_uncertainty: str | None = Field(
        None,
        description="write the held-out residuals as the interval model of their kind into "
        "FILE (default: the shipped configs/uncertainty.yaml): training step time with "
        "--workloads --cv chip, collective time from the holdout measurements without",
        json_schema_extra={"nargs": "?", "const": "", "metavar": "FILE"},
    )
    compiled: bool = Field(
        False,
        description="with --workloads: replay each run's XLA-compiled MaxText step "
        "(configs/measurements/compiled/) instead of building it",
    )
    serving: bool = Field(False, description="the public serving figures instead")
    fit: bool = Field(False, description="--serving: refit the overhead terms")
    out: str | None = Field(
        None,
        description="--serving --fit: write the fitted server profiles to DIR/<server>.yaml",
        json_schema_extra={"metavar": "DIR"},
    )


class CalibrateFlags(ValidationFlags):
    """``tpusim calibrate``'s options."""

    out: str | None = Field(
        None,
        description="overlay YAML to write (default calibration.yaml); with --serving a "
        "folder for the fitted server profiles (default servers)",
    )
    serving: bool = Field(False, description="fit the server profiles on the serving figures")


def add_parsers(sub: Subparsers) -> None:
    """The two subcommands, on the CLI's subparsers: their flags generated from
    :class:`ValidateFlags` and :class:`CalibrateFlags`, and the network flags."""
    p = sub.add_parser("validate")
    add_model_flags(p, ValidateFlags)
    _fidelity(p)
    p.set_defaults(func=Later("tpusim.cli.validate_run", "cmd_validate"))
    p = sub.add_parser("calibrate")
    add_model_flags(p, CalibrateFlags)
    _fidelity(p)
    p.set_defaults(func=Later("tpusim.cli.validate_run", "cmd_calibrate"))


def _fidelity(p: argparse.ArgumentParser) -> None:
    whole = " or ".join(name for name, backend in NETWORKS.items() if backend.whole_programs)
    add_network_flags(
        p, what=f"; --workloads takes {whole}; every fidelity refuses cases over its work limits"
    )
