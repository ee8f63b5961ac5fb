"""``tpusim validate`` and ``tpusim calibrate`` as fresh CLI processes (issue 10 target:
validate under 60 s), and the validation summary they print.

Run: ``python benchmarks/bench_validate.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VALIDATE_TARGET_S = 60.0


def cli(*args: str) -> tuple[dict, float]:
    """One fresh ``python -m tpusim`` process: its JSON and its wall time (s)."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "tpusim", *args, "--json"],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout), time.perf_counter() - start


def main() -> int:
    record, wall = cli("validate")
    print(
        f"validate: {record['total']} points, {record['within_10pct']} within 10%, median "
        f"|error| {record['median_abs_error']:.1%}; holdout {record['holdout']['within_10pct']}"
        f"/{record['holdout']['total']} within 10%; wall {wall:.2f} s "
        f"(target {VALIDATE_TARGET_S:.0f} s)"
    )
    with tempfile.TemporaryDirectory() as folder:
        out = str(Path(folder) / "calibration.yaml")
        record, wall = cli("calibrate", "--out", out)
    chips = ", ".join(f"{c['chip']} ({len(c['fit_on'])} points)" for c in record["chips"])
    print(f"calibrate: {chips}; wall {wall:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
