"""The compute cost terms every chip generation shares (``configs/cost_terms.yaml``).

A chip's compute cost is a small physical model (:mod:`tpusim.hardware.efficiency`):
its own published peaks, HBM bandwidth, MXU size and vector rate, and these few terms,
which describe the software (XLA's kernels, MaxText's quantization, megablox) rather
than one chip, so one value serves every generation. ``tpusim calibrate --workloads``
fits them on the ``fit`` cases of every chip at once and writes them in this file's
format; ``tpusim validate --workloads --cv chip|family`` refits them leaving one chip
generation or model family out and reports the held-out errors.

A chip file's ``efficiency:`` block may still set any of them (a user's chip, a fit
overlay); the chip's value wins.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from pydantic import Field

from tpusim.config.chip import ChipSpec, EfficiencySpec, Fraction, OpsPerElement
from tpusim.config.loader import _check_sources, configs_dir, validate
from tpusim.config.types import Frozen, Source
from tpusim.config.yamlio import load_yaml
from tpusim.errors import ConfigError

MAX_ROWS_HALF_TILES = 64.0
"""Most MXU tiles of streamed rows a shape term may need to reach half rate (a matmul
of 64 tiles of rows at half its rate would be a slip, not a kernel). Grade: assumption
(an input limit)."""


class CostTerms(Frozen):
    """The shared terms (see :class:`~tpusim.config.chip.EfficiencySpec` for each):
    ``mxu`` the fraction of the MXU peak a large matmul reaches in any dtype,
    ``rows_half_tiles`` the streamed rows at which a matmul reaches half that rate, in
    MXU tiles (so a 128-wide MXU fills in half the rows of a 256-wide one). The fixed
    cost of one op is :data:`tpusim.hardware.costs.DEFAULT_OP_OVERHEAD_S`."""

    mxu: Fraction
    hbm: Fraction
    gather_hbm: Fraction
    vector_ops_per_element: OpsPerElement
    quantize_ops_per_element: OpsPerElement
    grouped_matmul: Fraction
    rows_half_tiles: float = Field(gt=0.0, le=MAX_ROWS_HALF_TILES)


class CostTermsFile(Frozen):
    """``configs/cost_terms.yaml``: the terms, what they were fitted on, their sources."""

    terms: CostTerms
    fit_on: tuple[str, ...] = ()
    sources: dict[str, Source]


def cost_terms_path() -> Path:
    """The shipped terms file."""

    return configs_dir() / "cost_terms.yaml"


@cache
def load_cost_terms_file(path: Path | None = None) -> CostTermsFile:
    """The terms file at ``path`` (default: the shipped one); ConfigError naming the
    file, the YAML path and the line for a bad value, and for a term without a source."""

    path = path or cost_terms_path()
    data, lines = load_yaml(path)
    spec = validate(CostTermsFile, data, str(path), lines)
    _check_sources(spec.sources, data, str(path), lines)
    for name in CostTerms.model_fields:
        key = f"terms.{CostTerms.model_fields[name].alias or name}"
        if key not in spec.sources:
            raise ConfigError(f"'{key}' has no entry under sources:", file=str(path), path=key)
    return spec


def shared_terms() -> CostTerms:
    """The shipped shared terms."""
    return load_cost_terms_file().terms


FITTED = (
    "mxu",
    "gather_hbm",
    "vector_ops_per_element",
    "quantize_ops_per_element",
    "grouped_matmul",
)
"""The terms ``calibrate --workloads`` fits (``hbm`` comes from XLA's cost model,
:mod:`tpusim.validation.xla_streaming`; ``rows_half_tiles`` from a GEMM sweep)."""


def with_terms(chip: ChipSpec, terms: CostTerms) -> ChipSpec:
    """``chip`` running at ``terms`` instead of the shipped shared terms (its
    ``efficiency:`` block set from them: ``mxu`` for every dtype it has a peak for);
    a chip without the block (the roofline) is returned unchanged."""

    if chip.efficiency is None:
        return chip
    data = chip.efficiency.model_dump(by_alias=True)
    data["matmul"] = {dtype: terms.mxu for dtype in chip.peak_flops}
    for name in ("hbm", *FITTED[1:]):
        data[name] = getattr(terms, name)
    return chip.model_copy(update={"efficiency": EfficiencySpec.model_validate(data)})
