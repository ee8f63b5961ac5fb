"""Serving options checked against the chip they run on: the KV tier it can read, and
vLLM's tensor parallelism (JAX devices) in its chips."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tpusim.serving.option_error import OptionError

if TYPE_CHECKING:
    from tpusim.config.chip import ChipSpec


def tp_in_chips(tp_devices: int, tp: int | None, chip: ChipSpec) -> int:
    """``tp_devices`` (vLLM's ``--tensor-parallel-size``: JAX devices) in chips of
    ``chip`` (its devices a chip: a TensorCore each, or one megacore device). Raises
    OptionError when the chip's devices do not divide it or ``tp`` is given and
    differs."""
    per_chip = chip.tensorcores.devices
    if tp_devices % per_chip:
        raise OptionError(
            "tp_devices",
            f"{tp_devices} devices (vLLM's --tensor-parallel-size) are not whole "
            f"chips of {chip.name} ({per_chip} devices a chip)",
        )
    chips = tp_devices // per_chip
    if tp is not None and tp != chips:
        raise OptionError(
            ("tp_devices", "tp"),
            f"{tp_devices} devices (vLLM's --tensor-parallel-size) are {chips} chip(s) "
            f"of {chip.name} ({per_chip} devices a chip), which contradicts tp {tp}",
        )
    return chips


def check_kv_tier(kv_cache: str, chip: ChipSpec) -> None:
    """Raise OptionError on ``kv_cache`` when it names SRAM (``sram``, ``tiered``) and
    ``chip`` gives no SRAM bandwidth to read the cache at."""
    if kv_cache != "hbm" and chip.sram.bandwidth_Bps is None:
        raise OptionError(
            "kv_cache",
            f"{kv_cache} keeps the KV cache in SRAM, but chip {chip.name} gives no "
            "SRAM bandwidth (sram.bandwidth in its file); use hbm",
        )
