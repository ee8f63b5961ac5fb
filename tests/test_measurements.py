"""The shipped public measurements load, follow the split rule, convert bandwidths to
times as nccl-tests defines them, and every bad input is a one-line ``file:line`` error."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from tpusim.errors import ConfigError, InputError
from tpusim.validation import Measurement, load_measurements, shipped_measurement_files

#: Points shipped so far (issue 10 asks for >= 30; see the files for what was found).
MIN_SHIPPED_CASES = 22


@pytest.fixture(scope="module")
def shipped() -> list[Measurement]:
    return load_measurements()


def test_shipped_files_load_with_enough_points_and_sources(shipped):
    assert len(shipped_measurement_files()) >= 3
    assert len(shipped) >= MIN_SHIPPED_CASES
    assert len({m.source for m in shipped}) >= 3
    assert len({m.id for m in shipped}) == len(shipped)


def test_every_case_is_traceable(shipped):
    for m in shipped:
        assert m.url.startswith("https://"), m.id
        assert m.where.strip(), m.id
        assert m.line is not None and m.file.endswith(".yaml"), m.id
        assert m.bytes > 0 and math.isfinite(m.measured_s) and m.measured_s > 0, m.id


WHOLE_SERIES_HELD_OUT = "The whole series of this file is held out"


def test_split_follows_the_every_third_point_rule(shipped):
    """Within a (source, chip, op, slice, axes) series sorted by bytes, the 2nd, 5th, 8th...
    point is holdout and the rest fit, except in a file whose header holds out its whole
    series and says why (only ever more holdout, never less)."""

    def series(m: Measurement):
        return (m.source, m.chip, m.op, m.slice, m.axes)

    whole = {
        m.source
        for m in shipped
        if WHOLE_SERIES_HELD_OUT in Path(m.file).read_text().split("source:")[0]
    }
    assert whole == {"amb-issue-71"}
    for _, group in itertools.groupby(sorted(shipped, key=series), key=series):
        points = sorted(group, key=lambda m: m.bytes)
        expected = ["holdout" if i % 3 == 1 else "fit" for i in range(len(points))]
        if points[0].source in whole:
            expected = ["holdout"] * len(points)
        assert [m.split for m in points] == expected, points[0].id
    holdout = sum(m.split == "holdout" for m in shipped) / len(shipped)
    assert 0.25 <= holdout <= 0.55


def test_busbw_case_converted_by_hand(shipped):
    """amb-iw-allgather-2x2x1-2MiB: busbw 71.7703034 GB/s, all-gather on 4 chips, bus
    factor (4-1)/4; the time equals the benchmark's transferred_data / achieved_bw."""
    case = next(m for m in shipped if m.id == "amb-iw-allgather-2x2x1-2MiB")
    assert case.num_chips == 4
    assert case.bytes == 2 * 1024 * 1024
    assert case.measured_s == pytest.approx(2 * 1024 * 1024 * 0.75 / 71.7703034e9, rel=1e-12)
    assert case.measured_s == pytest.approx(0.001572864e9 / 71.7703034e9, rel=1e-12)


def test_all_reduce_busbw_case_converted_by_hand(shipped):
    """tr-v6e-allreduce-16x16-606076928B: the benchmark's psum_ici bandwidth is
    size * 2 * (n - 1) / n / time on n = 256 chips, so time = size * 2 * 255 / 256 / bw."""
    case = next(m for m in shipped if m.id == "tr-v6e-allreduce-16x16-606076928B")
    assert case.num_chips == 256 and case.bytes == 17408 * 17408 * 2
    assert case.measured_s == pytest.approx(0.606076928e9 * 2 * 255 / 256 / 235.7595345022845e9)


def test_time_case_kept_as_given(shipped):
    case = next(m for m in shipped if m.id == "sb-v5e-allgather-y4-32MiB")
    assert case.num_chips == 4 and case.axes == ("y",) and case.slice == (8, 4)
    assert case.measured_s == pytest.approx(680e-6, rel=1e-12)
    assert case.bytes == 2048 * 8192 * 2


# -- small files written in tmp_path -------------------------------------------------------
SOURCE = """source:
  key: t
  title: T
  url: https://example.org/t
  revision: r
  measured: m
  size_convention: s
cases:
"""
CASE = """  - id: {id}
    chip: v5e
    slice: [4, 4]
    axes: [y]
    op: all-gather
    bytes: 128 KiB
    measured_time: 8 us
    split: fit
    where: here
"""
CASE_FIRST_LINE = 9  # line of "- id:" of the first case; its fields follow one per line


def _write(tmp_path: Path, text: str, name: str = "m.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _case_file(tmp_path: Path, old: str = "", new: str = "", name: str = "m.yaml") -> Path:
    case = CASE.format(id="c1")
    if old:
        assert old in case
        case = case.replace(old, new)
    return _write(tmp_path, SOURCE + case, name)


def test_a_good_small_file_loads(tmp_path):
    (m,) = load_measurements([_case_file(tmp_path)])
    assert (m.id, m.source, m.chip, m.op, m.split) == ("c1", "t", "v5e", "all-gather", "fit")
    assert m.measured_s == pytest.approx(8e-6) and m.bytes == 131072
    assert m.line == CASE_FIRST_LINE


def test_algbw_is_bytes_over_time(tmp_path):
    path = _case_file(tmp_path, "measured_time: 8 us", "measured_algbw: 16.384 GB/s")
    (m,) = load_measurements([path])
    assert m.measured_s == pytest.approx(131072 / 16.384e9, rel=1e-12)


def test_all_reduce_busbw_uses_twice_n_minus_one_over_n(tmp_path):
    """All-reduce on a 4x4 slice (16 chips): busbw = algbw * 2 * 15 / 16."""
    text = CASE.format(id="c1").replace("    axes: [y]\n", "")
    text = text.replace("all-gather", "all-reduce").replace(
        "measured_time: 8 us", "measured_busbw: 30 GB/s"
    )
    (m,) = load_measurements([_write(tmp_path, SOURCE + text)])
    assert m.num_chips == 16
    assert m.measured_s == pytest.approx(131072 * (2 * 15 / 16) / 30e9, rel=1e-12)


BAD = [
    # (old text in the case, new text, line offset from "- id:", message pattern)
    ("chip: v5e", "chip: v9x", 1, r"cases\[0\]\.chip: unknown chip 'v9x'"),
    ("op: all-gather", "op: all-gatherz", 4, r"cases\[0\]\.op:"),
    ("bytes: 128 KiB", "bytes: 0 KiB", 5, r"cases\[0\]\.bytes: .*above zero"),
    ("bytes: 128 KiB", "bytes: -4 KiB", 5, r"cases\[0\]\.bytes: .*above zero"),
    ("bytes: 128 KiB", "bytes: .inf", 5, r"cases\[0\]\.bytes: .*finite"),
    ("bytes: 128 KiB", "bytes: 100.5 B", 5, r"cases\[0\]\.bytes: .*whole number"),
    ("measured_time: 8 us", "measured_time: 0 us", 6, r"cases\[0\]\.measured_time: .*above"),
    ("measured_time: 8 us", "measured_time: .nan", 6, r"cases\[0\]\.measured_time: .*finite"),
    ("measured_time: 8 us", "measured_busbw: -1 GB/s", 6, r"cases\[0\]\.measured_busbw: .*above"),
    ("measured_time: 8 us", "measured_time: 8 GB/s", 6, r"cases\[0\]\.measured_time: .*time"),
    ("    measured_time: 8 us\n", "", 0, r"cases\[0\]: give exactly one of .*got none"),
    (
        "measured_time: 8 us",
        "measured_time: 8 us\n    measured_algbw: 1 GB/s",
        0,
        r"cases\[0\]: give exactly one of .*measured_time, measured_algbw",
    ),
    ("split: fit", "split: train", 7, r"cases\[0\]\.split:"),
    ("where: here", "where: here\n    colour: red", 9, r"cases\[0\]\.colour: unknown key"),
    ("slice: [4, 4]", "slice: [4, 0]", 2, r"cases\[0\]\.slice\[1\]:"),
    ("axes: [y]", "axes: [z]", 0, r"cases\[0\]: axes \['z'\] must be distinct names"),
    ("chip: v5e", "chip: v5e\n    chip: v5p", 2, r"cases\[0\]\.chip: duplicate key"),
]


@pytest.mark.parametrize(("old", "new", "offset", "pattern"), BAD)
def test_bad_case_names_file_line_and_path(tmp_path, old, new, offset, pattern):
    path = _case_file(tmp_path, old, new)
    with pytest.raises(InputError, match=pattern) as info:
        load_measurements([path])
    assert isinstance(info.value, ConfigError)
    assert str(info.value).startswith(f"{path}:{CASE_FIRST_LINE + offset} ")


def test_missing_source_block(tmp_path):
    path = _write(tmp_path, "cases:\n" + CASE.format(id="c1"))
    with pytest.raises(InputError, match=r"m\.yaml:1 source: required key is missing"):
        load_measurements([path])


def test_missing_source_url(tmp_path):
    path = _write(
        tmp_path, SOURCE.replace("  url: https://example.org/t\n", "") + CASE.format(id="c1")
    )
    with pytest.raises(InputError, match=r"m\.yaml:1 source\.url: required key is missing"):
        load_measurements([path])


def test_duplicate_id_across_files(tmp_path):
    first = _case_file(tmp_path, name="a.yaml")
    second = _write(
        tmp_path,
        SOURCE.replace("key: t", "key: u") + CASE.format(id="c2") + CASE.format(id="c1"),
        "b.yaml",
    )
    with pytest.raises(InputError, match=r"duplicate case id 'c1'") as info:
        load_measurements([first, second])
    assert str(info.value).startswith(f"{second}:{CASE_FIRST_LINE + 9} cases[1].id:")


def test_duplicate_source_key_across_files(tmp_path):
    first = _case_file(tmp_path, name="a.yaml")
    second = _write(tmp_path, SOURCE + CASE.format(id="c2"), "b.yaml")
    with pytest.raises(InputError, match=r"b\.yaml source\.key: duplicate source key 't'"):
        load_measurements([first, second])


def test_busbw_on_a_single_chip_group_is_an_error(tmp_path):
    path = _case_file(tmp_path, "measured_time: 8 us", "measured_busbw: 30 GB/s")
    path.write_text(path.read_text().replace("slice: [4, 4]", "slice: [4, 1]"))
    with pytest.raises(
        InputError, match=r"cases\[0\]\.measured_busbw: .*more than one chip"
    ) as info:
        load_measurements([path])
    assert str(info.value).startswith(f"{path}:{CASE_FIRST_LINE + 6} ")


@pytest.mark.parametrize(
    ("old", "new", "offset"),
    [
        ("chip: v5e", "chip: v9x", 1),
        ("op: all-gather", "op: scatter", 4),
        ("bytes: 128 KiB", "bytes: 0 KiB", 5),
        ("bytes: 128 KiB", "bytes: -4 KiB", 5),
    ],
)
def test_validate_and_calibrate_exit_2_with_one_line(tmp_path, capsys, old, new, offset):
    """The CLI: a bad measurement file is one line on stderr naming file and line, exit 2."""
    from helpers import run

    path = _case_file(tmp_path, old, new)
    for command in ("validate", "calibrate"):
        code, out, err = run(capsys, command, "--measurements", str(path))
        assert code == 2 and out == ""
        assert err.startswith(f"tpusim: error: {path}:{CASE_FIRST_LINE + offset} ")
        assert len(err.strip().splitlines()) == 1


def test_a_file_without_source_exits_2(tmp_path, capsys):
    from helpers import run

    path = _write(tmp_path, "cases:\n" + CASE.format(id="c1"))
    code, _, err = run(capsys, "validate", "--measurements", str(path))
    assert code == 2 and f"{path}:1 source: required key is missing" in err
