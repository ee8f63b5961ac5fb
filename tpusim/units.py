"""Parse and format physical quantities.

Internally every quantity is a plain SI float:

=========  ==========  ===========================================
kind       SI unit     accepted spellings (case-sensitive)
=========  ==========  ===========================================
bytes      B           B, kB/KB, MB, GB, TB, PB, KiB, MiB, ... PiB
bandwidth  B/s         <byte unit>/s, GBps, GiBps, b/s, Gb/s, Gbps
time       s           s, ms, us, µs, μs, ns, ps
flops      FLOP/s      FLOP/s, TFLOP/s, TFLOPS, TFLOPs, TOP/s, TOPS
power      W           W, kW, MW
=========  ==========  ===========================================

Conventions: decimal prefixes are powers of 1000 (GB = 1e9 B), binary
prefixes powers of 1024 (GiB = 2**30 B).  ``B`` is a byte and ``b`` a bit:
bit rates (``9.6 Tb/s``) are divided by 8 to give bytes/s.  Integer-op
rates (``TOPS``) scale like FLOP/s.  A bare number is taken to be SI already.
"""

from __future__ import annotations

import math
import re
from typing import Literal, get_args

Kind = Literal["bytes", "bandwidth", "time", "flops", "power"]

_DEC = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BIN = {f"{p}i": float(1024**i) for i, p in enumerate("KMGTP", start=1)}
_BYTE_UNITS = {f"{p}B": f for p, f in (_DEC | _BIN).items()} | {"kB": 1e3}
_FLOP_PREFIXES = _DEC | {"E": 1e18}

_TABLES: dict[str, dict[str, float]] = {
    "bytes": _BYTE_UNITS,
    "bandwidth": {
        **{f"{u}/s": f for u, f in _BYTE_UNITS.items()},
        **{f"{u}ps": f for u, f in _BYTE_UNITS.items()},
        **{f"{p}b{s}": f / 8 for p, f in (_DEC | {"k": 1e3}).items() for s in ("/s", "ps")},
    },
    "time": {
        "s": 1.0,
        "ms": 1e-3,
        "us": 1e-6,
        "\u00b5s": 1e-6,
        "\u03bcs": 1e-6,
        "ns": 1e-9,
        "ps": 1e-12,
    },
    "flops": {
        f"{p}{op}{s}": f
        for p, f in _FLOP_PREFIXES.items()
        for op in ("FLOP", "OP")
        for s in ("/s", "S", "s")
    },
    "power": {"W": 1.0, "kW": 1e3, "MW": 1e6},
}

_EXPECTED: dict[str, str] = {
    "bytes": "a byte size such as '192 GiB' or '16 GB'",
    "bandwidth": "a bandwidth such as '100 GB/s' or '9.6 Tb/s'",
    "time": "a time such as '1 us' or '2.5 ms'",
    "flops": "a compute rate such as '4614 TFLOP/s' or '400 TOPS'",
    "power": "a power such as '300 W' or '1.5 kW'",
}

_NOUN: dict[str, str] = {
    "bytes": "byte-size",
    "bandwidth": "bandwidth",
    "time": "time",
    "flops": "compute-rate",
    "power": "power",
}

# Output units per kind, largest first.
_FORMAT_UNITS: dict[str, list[tuple[str, float]]] = {
    "bytes_bin": [(f"{p}B", _BYTE_UNITS[f"{p}B"]) for p in ("Pi", "Ti", "Gi", "Mi", "Ki", "")],
    "bytes": [(f"{p}B", f) for p, f in reversed(_DEC.items())],
    "bandwidth": [(f"{p}B/s", f) for p, f in reversed(_DEC.items())],
    "time": [("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9), ("ps", 1e-12)],
    "flops": [(f"{p}FLOP/s", f) for p, f in reversed(_FLOP_PREFIXES.items())],
    "power": [("MW", 1e6), ("kW", 1e3), ("W", 1.0)],
}

_QUANTITY = re.compile(
    r"\s*(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>\S*)\s*"
)


class UnitError(ValueError):
    """A quantity string could not be parsed as the requested kind."""


def _fail(text: object, kind: str, detail: str = "") -> UnitError:
    suffix = f" ({detail})" if detail else ""
    return UnitError(f"{text!r}: expected {_EXPECTED[kind]}{suffix}")


def parse(text: str | int | float, kind: Kind) -> float:
    """Parse ``text`` as a quantity of ``kind`` and return it in SI units.

    Numbers (and numeric strings) are returned unchanged as floats. Raises
    UnitError for a bad unit or a value that is not finite (``1e400``, ``.inf``,
    ``.nan``, or a finite number whose unit overflows it).
    """
    if kind not in _TABLES:
        raise ValueError(f"unknown kind {kind!r}; expected one of {get_args(Kind)}")
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise _fail(text, kind, f"got {type(text).__name__}")
    if not isinstance(text, str):
        value = float(text)
        if not math.isfinite(value):
            raise _fail(text, kind, "not a finite number")
        return value
    m = _QUANTITY.fullmatch(text)
    if m is None:
        raise _fail(text, kind)
    number, unit = float(m["num"]), m["unit"]
    factor = _TABLES[kind].get(unit) if unit else 1.0
    if factor is not None:
        if not math.isfinite(number * factor):
            raise _fail(text, kind, "not a finite number")
        return number * factor
    other = next((k for k, table in _TABLES.items() if unit in table), None)
    detail = f"{unit!r} is a {_NOUN[other]} unit" if other else f"unknown unit {unit!r}"
    raise _fail(text, kind, detail)


def parse_bytes(text: str | int | float) -> float:
    """Parse a size; returns bytes."""
    return parse(text, "bytes")


def parse_bandwidth(text: str | int | float) -> float:
    """Parse a data rate (byte or bit rate); returns bytes/s."""
    return parse(text, "bandwidth")


def parse_time(text: str | int | float) -> float:
    """Parse a duration; returns seconds."""
    return parse(text, "time")


def parse_flops(text: str | int | float) -> float:
    """Parse a compute rate (FLOP/s or OP/s); returns FLOP/s."""
    return parse(text, "flops")


def parse_power(text: str | int | float) -> float:
    """Parse a power; returns watts."""
    return parse(text, "power")


def _format(x: float, units: list[tuple[str, float]]) -> str:
    """Format ``x`` with 4 significant digits using the largest unit giving mantissa >= 1."""
    if x == 0 or not math.isfinite(x):
        si_unit = next(unit for unit, factor in units if factor == 1.0)
        return f"{abs(x) if x == 0 else x:g} {si_unit}"
    for unit, factor in units:
        mantissa = float(f"{x / factor:.4g}")  # round first so 999.96 -> "1 k", not "1000"
        if abs(mantissa) >= 1:
            return f"{mantissa:g} {unit}"
    smallest, factor = units[-1]
    return f"{x / factor:.4g} {smallest}"


def format_bytes(x: float, binary: bool = True) -> str:
    """Format bytes, e.g. '1.5 KiB' (binary) or '1.5 KB' (``binary=False``)."""
    return _format(x, _FORMAT_UNITS["bytes_bin" if binary else "bytes"])


def format_bandwidth(x_Bps: float) -> str:
    """Format bytes/s with decimal prefixes, e.g. '100 GB/s'."""
    return _format(x_Bps, _FORMAT_UNITS["bandwidth"])


def format_time(x_s: float) -> str:
    """Format seconds, e.g. '2.5 ms', '750 ns' (ASCII 'us' for microseconds)."""
    return _format(x_s, _FORMAT_UNITS["time"])


def format_flops(x: float) -> str:
    """Format FLOP/s, e.g. '4.614 PFLOP/s'."""
    return _format(x, _FORMAT_UNITS["flops"])


def format_power(x_W: float) -> str:
    """Format watts, e.g. '300 W', '1.5 kW'."""
    return _format(x_W, _FORMAT_UNITS["power"])
