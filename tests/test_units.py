"""Tests for tpusim.units."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tpusim import units
from tpusim.units import (
    UnitError,
    format_bandwidth,
    format_bytes,
    format_flops,
    format_power,
    format_time,
    parse,
)

KI, MI, GI, TI, PI = (1024.0**i for i in range(1, 6))

BYTES = [
    ("512 B", 512.0),
    ("1 kB", 1e3),
    ("2 KB", 2e3),
    ("3 MB", 3e6),
    ("16 GB", 16e9),
    ("2.5 TB", 2.5e12),
    ("1 PB", 1e15),
    ("1.5 KiB", 1536.0),
    ("4 MiB", 4 * MI),
    ("192 GiB", 192 * 2**30),
    ("2 TiB", 2 * TI),
    ("1 PiB", PI),
    ("95GiB", 95 * GI),
    ("  8   KiB  ", 8 * KI),
]

BANDWIDTH = [
    ("100 GB/s", 100e9),
    ("1.5 TiB/s", 1.5 * TI),
    ("10 B/s", 10.0),
    ("3 kB/s", 3e3),
    ("3 KB/s", 3e3),
    ("7 MB/s", 7e6),
    ("819 GB/s", 819e9),
    ("1.2 TB/s", 1.2e12),
    ("1 PB/s", 1e15),
    ("1 KiB/s", KI),
    ("1 MiB/s", MI),
    ("1 GiB/s", GI),
    ("1 PiB/s", PI),
    ("600 GBps", 600e9),
    ("5 MBps", 5e6),
    ("2 TBps", 2e12),
    ("4 GiBps", 4 * GI),
    ("8 b/s", 1.0),
    ("8 Kb/s", 1e3),
    ("8 kb/s", 1e3),
    ("8 Mb/s", 1e6),
    ("400 Gb/s", 50e9),
    ("9.6 Tb/s", 1.2e12),
    ("8 Pb/s", 1e15),
    ("100 Gbps", 12.5e9),
    ("1.6 Tbps", 0.2e12),
    ("80 Mbps", 10e6),
]

TIME = [
    ("3.2 s", 3.2),
    ("2.5 ms", 2.5e-3),
    ("1 us", 1e-6),
    ("1 \u00b5s", 1e-6),  # MICRO SIGN
    ("1 \u03bcs", 1e-6),  # GREEK SMALL LETTER MU
    ("750 ns", 750e-9),
    ("5 ps", 5e-12),
]

FLOPS = [
    ("100 FLOP/s", 100.0),
    ("3 KFLOP/s", 3e3),
    ("3 MFLOP/s", 3e6),
    ("3 GFLOP/s", 3e9),
    ("4614 TFLOP/s", 4.614e18 / 1000),
    ("12.6 PFLOP/s", 12.6e15),
    ("1.1 EFLOP/s", 1.1e18),
    ("275 TFLOPS", 275e12),
    ("275 TFLOPs", 275e12),
    ("10 OP/s", 10.0),
    ("400 TOP/s", 400e12),
    ("400 TOPS", 400e12),
    ("2 POPS", 2e15),
]

POWER = [("300 W", 300.0), ("1.5 kW", 1500.0), ("2 MW", 2e6)]

CASES = (
    [(t, "bytes", v) for t, v in BYTES]
    + [(t, "bandwidth", v) for t, v in BANDWIDTH]
    + [(t, "time", v) for t, v in TIME]
    + [(t, "flops", v) for t, v in FLOPS]
    + [(t, "power", v) for t, v in POWER]
)


@pytest.mark.parametrize(("text", "kind", "expected"), CASES)
def test_parse_exact(text: str, kind: units.Kind, expected: float) -> None:
    assert parse(text, kind) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("fn", "kind"),
    [
        (units.parse_bytes, "bytes"),
        (units.parse_bandwidth, "bandwidth"),
        (units.parse_time, "time"),
        (units.parse_flops, "flops"),
        (units.parse_power, "power"),
    ],
)
def test_wrappers(fn, kind: units.Kind) -> None:
    for text, k, expected in CASES:
        if k == kind:
            assert fn(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("kind", ["bytes", "bandwidth", "time", "flops", "power"])
@pytest.mark.parametrize(
    ("value", "expected"),
    [(5, 5.0), (2.5, 2.5), ("1e9", 1e9), ("45000", 45000.0), (" 0.5 ", 0.5), ("-3", -3.0)],
)
def test_plain_numbers_are_si(value: str | float, expected: float, kind: units.Kind) -> None:
    result = parse(value, kind)
    assert isinstance(result, float)
    assert result == expected


def test_negative_quantities_parse() -> None:
    assert parse("-2 GB", "bytes") == -2e9
    assert parse("-1.5 ms", "time") == pytest.approx(-1.5e-3, rel=1e-12)


def test_case_sensitive_bits_vs_bytes() -> None:
    assert parse("8 GB/s", "bandwidth") == 8 * parse("8 Gb/s", "bandwidth")


@pytest.mark.parametrize(
    ("text", "kind", "expected_word"),
    [
        ("100 GB", "bandwidth", "bandwidth"),
        ("1 us", "bytes", "byte size"),
        ("100 GB/s", "bytes", "byte size"),
        ("5 W", "time", "time"),
        ("3 TB", "flops", "compute rate"),
        ("1 s", "power", "power"),
        ("4614 TFLOP/s", "bandwidth", "bandwidth"),
    ],
)
def test_wrong_kind(text: str, kind: units.Kind, expected_word: str) -> None:
    with pytest.raises(UnitError, match=re.escape(repr(text))) as info:
        parse(text, kind)
    assert expected_word in str(info.value)


def test_error_message_format() -> None:
    msg = "'100 GB': expected a bandwidth such as '100 GB/s' or '9.6 Tb/s'"
    with pytest.raises(UnitError, match=re.escape(msg)):
        parse("100 GB", "bandwidth")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "GB",
        "abc",
        "1 XB",
        "nan GB",
        "nan",
        "inf",
        "inf GB",
        "-inf s",
        "1 GB/s extra",
        "1.2.3 GB",
        "1 gb",
        "1 Gib",
        "10 %",
    ],
)
def test_garbage(text: str) -> None:
    with pytest.raises(UnitError, match=re.escape(repr(text))) as info:
        parse(text, "bytes")
    assert "byte size" in str(info.value)


@pytest.mark.parametrize("value", [True, False, float("nan"), float("inf"), None, [1]])
def test_bad_types(value: object) -> None:
    with pytest.raises(UnitError):
        parse(value, "bytes")  # type: ignore[arg-type]


def test_unit_error_is_value_error() -> None:
    assert issubclass(UnitError, ValueError)


def test_unknown_kind() -> None:
    with pytest.raises(ValueError, match="kind"):
        parse("1 GB", "volume")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("got", "expected"),
    [
        (format_bytes(2**30), "1 GiB"),
        (format_bytes(1536), "1.5 KiB"),
        (format_bytes(512), "512 B"),
        (format_bytes(192 * 2**30), "192 GiB"),
        (format_bytes(1e9, binary=False), "1 GB"),
        (format_bytes(0), "0 B"),
        (format_bandwidth(100e9), "100 GB/s"),
        (format_bandwidth(1.2e12), "1.2 TB/s"),
        (format_bandwidth(999.96e9), "1 TB/s"),
        (format_bandwidth(0), "0 B/s"),
        (format_time(1e-6), "1 us"),
        (format_time(2.5e-3), "2.5 ms"),
        (format_time(3.2), "3.2 s"),
        (format_time(750e-9), "750 ns"),
        (format_time(0), "0 s"),
        (format_flops(4.614e15), "4.614 PFLOP/s"),
        (format_flops(123456), "123.5 KFLOP/s"),
        (format_flops(0), "0 FLOP/s"),
        (format_power(300), "300 W"),
        (format_power(1500), "1.5 kW"),
        (format_power(0), "0 W"),
        (format_power(-0.0), "0 W"),
    ],
)
def test_format_examples(got: str, expected: str) -> None:
    assert got == expected


def _round_trips(fmt, kind: units.Kind, value: float) -> None:
    text = fmt(value)
    assert parse(text, kind) == pytest.approx(value, rel=5e-4), text


@given(st.floats(min_value=1e-3, max_value=1e18))
def test_round_trip_bytes(v: float) -> None:
    _round_trips(format_bytes, "bytes", v)
    _round_trips(lambda x: format_bytes(x, binary=False), "bytes", v)


@given(st.floats(min_value=1e-3, max_value=1e18))
def test_round_trip_bandwidth(v: float) -> None:
    _round_trips(format_bandwidth, "bandwidth", v)


@given(st.floats(min_value=1e-12, max_value=1e6))
def test_round_trip_time(v: float) -> None:
    _round_trips(format_time, "time", v)


@given(st.floats(min_value=1e-3, max_value=1e22))
def test_round_trip_flops(v: float) -> None:
    _round_trips(format_flops, "flops", v)


@given(st.floats(min_value=1e-6, max_value=1e10))
def test_round_trip_power(v: float) -> None:
    _round_trips(format_power, "power", v)


@given(st.floats(min_value=1e-12, max_value=1e18))
def test_round_trip_full_range(v: float) -> None:
    for fmt, kind in [
        (format_bytes, "bytes"),
        (format_bandwidth, "bandwidth"),
        (format_time, "time"),
        (format_flops, "flops"),
        (format_power, "power"),
    ]:
        _round_trips(fmt, kind, v)


@given(st.floats(min_value=1, max_value=1e18))
def test_format_mantissa_at_least_one(v: float) -> None:
    for text in (format_bytes(v), format_bandwidth(v), format_flops(v), format_power(v)):
        mantissa = float(text.split()[0])
        assert mantissa >= 1, text
        digits = text.split()[0].split("e")[0]  # beyond the largest prefix, e.g. "1e+06 MW"
        assert len(digits.replace(".", "").strip("0")) <= 4, text
