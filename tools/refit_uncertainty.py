"""Recompute configs/uncertainty.yaml's bounds, spreads and coverages from the
residuals it stores, by the interval rule of tpusim.validation.uncertainty, without
rerunning the cross-validations (which wrote the residuals and stay their
provenance)::

    python tools/refit_uncertainty.py [FILE]

The ``other_groupings`` (``--cv family``) store no residuals: rerun
``tpusim validate --workloads --cv family --write-uncertainty`` to refit them.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tpusim.config.uncertainty import uncertainty_path  # noqa: E402
from tpusim.validation.uncertainty import refit  # noqa: E402


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else uncertainty_path()
    for kind, model in refit(path).kinds.items():
        q = model.quantiles
        print(f"{kind}: [{q.q10:+.3f}, {q.q90:+.3f}] coverage_80 {model.coverage_80}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
