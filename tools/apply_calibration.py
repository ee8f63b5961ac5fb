"""Write a calibration overlay's terms into the shipped chip files, graded
``calibrated`` with the measurement ids behind them (run after ``tpusim calibrate``).

Chips the overlay does not name keep their values; ``--like CHIP=SOURCE`` copies a
calibrated chip's terms to one without measurements, graded ``assumption``.

    python tools/apply_calibration.py calibration.yaml --like tpu8t=ironwood --like tpu8i=ironwood
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from tpusim.config.calibration import load_calibration

CHIPS = Path(__file__).resolve().parent.parent / "configs" / "chips"


def _quantity_us(seconds: float) -> str:
    return f"{seconds * 1e6:.3g} us"


def _set(text: str, pattern: str, value: str) -> str:
    new, count = re.subn(pattern, lambda m: m.group(1) + value, text, count=1, flags=re.M)
    if count != 1:
        raise SystemExit(f"pattern {pattern!r} not found")
    return new


def _source(text: str, key: str, entry: str) -> str:
    line = f"  {key}: {entry}"
    pattern = rf"^  {re.escape(key)}: .*$"
    if re.search(pattern, text, flags=re.M):
        return re.sub(pattern, lambda _m: line, text, count=1, flags=re.M)
    return text.rstrip("\n") + "\n" + line + "\n"


def apply(chip: str, terms, grade: str, note: str) -> None:
    path = CHIPS / f"{chip}.yaml"
    text = path.read_text()
    text = _set(text, r"^(  hop_latency: ).*$", _quantity_us(terms.hop_latency_s))
    text = _set(text, r"^(  launch: ).*$", _quantity_us(terms.launch_s))
    text = _set(text, r"^(  step_sync: ).*$", _quantity_us(terms.step_sync_s))
    text = _set(text, r"^(  link_efficiency: ).*$", f"{terms.link_efficiency:.3g}")
    for key in (
        "ici.hop_latency",
        "collectives.launch",
        "collectives.step_sync",
        "collectives.link_efficiency",
    ):
        entry = f'{{source: tpusim-calibrate, grade: {grade}, note: "{note}"}}'
        text = _source(text, key, entry)
    path.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("overlay")
    parser.add_argument("--like", action="append", default=[])
    args = parser.parse_args()
    calibration = load_calibration(args.overlay)
    for chip, terms in calibration.chips.items():
        points = ", ".join(terms.fit_on)
        apply(chip, terms, "calibrated", f"tpusim calibrate on configs/measurements: {points}")
    for pair in args.like:
        chip, like = pair.split("=")
        terms = calibration.chips[like]
        apply(chip, terms, "assumption", f"no public measurements: {like}'s calibrated value")


if __name__ == "__main__":
    main()
