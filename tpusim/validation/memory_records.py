"""XLA's memory analysis of published training runs, compiled by MaxText's
``train_compile`` on a CPU (``tools/compile_memory.py``): the reference of tpusim's
memory model (:mod:`tpusim.program.builders.memory`).

One JSON file per compile in ``configs/measurements/memory/``: the case ids it covers
(a run on one slice and on two, data-parallel over DCN, compile to the same per-device
program), the MaxText line, the compile topology, ``source`` (MaxText's version and the
compile date), the compile time and XLA's ``memory_analysis`` per device, in bytes; or
``failed`` with the reason when the compile did not finish. Reading needs no JAX.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tpusim.config import configs_dir
from tpusim.errors import ConfigError

RECORDS_DIR = configs_dir() / "measurements" / "memory"


@dataclass(frozen=True)
class MemoryRecord:
    """XLA's memory analysis of one compile, per device, in bytes."""

    file: str
    cases: tuple[str, ...]
    source: str
    compile_time_s: float
    argument_bytes: float
    output_bytes: float
    alias_bytes: float
    temp_bytes: float
    code_bytes: float
    host_temp_bytes: float
    xla_peak_bytes: float = 0.0
    full_compile: str = ""

    @property
    def is_reference(self) -> bool:
        """Whether XLA compiled the run whole (not extrapolated from fewer layers
        because the whole compile ran out of HBM: ``full_compile`` says why)."""
        return not self.full_compile

    @property
    def peak_bytes(self) -> float:
        """HBM the program needs on one device: XLA's own peak
        (``peak_memory_in_bytes``, from the buffers' live ranges) when it gives one and
        the program keeps nothing in host memory, else the HBM bound of arguments,
        outputs not aliased to an argument (donated buffers are reused), temporaries and
        the generated code (with host offload XLA's peak counts the host's temporaries:
        12.3 GiB of arguments + 45.0 GiB of host temporaries = its 57.3 GiB on
        Llama 3.1 70B on v6e-64, whose HBM holds 28.7 GiB)."""
        if self.xla_peak_bytes > 0 and self.host_temp_bytes == 0:
            return self.xla_peak_bytes
        return (
            self.argument_bytes
            + self.output_bytes
            - self.alias_bytes
            + self.temp_bytes
            + self.code_bytes
        )


def read_record(path: Path) -> MemoryRecord | str:
    """The record in ``path``, or the reason its compile failed; ConfigError naming the
    file when it is malformed."""
    try:
        data = json.loads(path.read_text())
        if "failed" in data:
            return str(data["failed"])
        m = data["memory_analysis"]
        return MemoryRecord(
            file=path.name,
            cases=tuple(data["cases"]),
            source=str(data["source"]),
            compile_time_s=float(data["compile_time_s"]),
            argument_bytes=float(m["argument_size_in_bytes"]),
            output_bytes=float(m["output_size_in_bytes"]),
            alias_bytes=float(m["alias_size_in_bytes"]),
            temp_bytes=float(m["temp_size_in_bytes"]),
            code_bytes=float(m["generated_code_size_in_bytes"]),
            host_temp_bytes=float(m.get("host_temp_size_in_bytes", 0.0)),
            xla_peak_bytes=float(m.get("peak_memory_in_bytes", 0.0)),
            full_compile=str(data.get("full_compile", "")),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: not a memory record ({exc})") from None


def memory_records(folder: Path = RECORDS_DIR, references: bool = True) -> dict[str, MemoryRecord]:
    """Case id -> the record of its compile, for every compile that finished; with
    ``references`` only those XLA compiled whole (:attr:`MemoryRecord.is_reference`),
    else only the extrapolated ones."""
    out: dict[str, MemoryRecord] = {}
    for path in sorted(folder.glob("*.json")):
        found = read_record(path)
        if isinstance(found, MemoryRecord) and found.is_reference == references:
            out.update(dict.fromkeys(found.cases, found))
    return out


@functools.cache
def shipped_records() -> dict[str, MemoryRecord]:
    """:func:`memory_records` of the shipped folder, read once."""
    return memory_records()


def xla_peak_per_chip(case: str, devices_per_chip: int) -> float | None:
    """XLA's peak HBM per chip of shipped case ``case`` (its per-device peak times
    ``devices_per_chip``), None without a record."""
    record = shipped_records().get(case)
    return None if record is None else record.peak_bytes * devices_per_chip


def failed_compiles(folder: Path = RECORDS_DIR) -> dict[str, str]:
    """First case id of each compile that failed -> why."""
    out = {}
    for path in sorted(folder.glob("*.json")):
        found = read_record(path)
        if isinstance(found, str):
            out[path.stem] = found
    return out


def memory_errors(
    peaks_bytes: Mapping[str, float], devices_per_chip: Mapping[str, int]
) -> dict[str, float]:
    """Case id -> (tpusim's peak per chip - XLA's) / XLA's, for the cases of
    ``peaks_bytes`` (tpusim's peak HBM per chip) with a record; XLA's peak is per
    device, times ``devices_per_chip`` of the case (Ironwood: 2)."""
    out = {}
    for case, peak in peaks_bytes.items():
        xla = xla_peak_per_chip(case, devices_per_chip[case])
        if xla is not None:
            out[case] = (peak - xla) / xla
    return out


def error_summary(errors: Iterable[float]) -> dict[str, float | int | None]:
    """Cases, median and largest |error| of :func:`memory_errors` values."""
    values = np.abs(list(errors))
    if not len(values):
        return {"cases": 0, "median_abs_error": None, "max_abs_error": None}
    return {
        "cases": len(values),
        "median_abs_error": float(np.median(values)),
        "max_abs_error": float(values.max()),
    }
