"""The ``hbm`` cost term comes from XLA's own cost model (issue 42), not from a fit:
the shipped value is the median streaming share of the compiled steps' elementwise
fusions as XLA estimates them (its ``estimated_cycles``, independent of tpusim's costs
and of every measured step time)."""

from __future__ import annotations

import pytest

from tpusim.config.cost_terms import FITTED, load_cost_terms_file
from tpusim.validation.xla_streaming import derived_hbm_share, streaming_shares


def test_hbm_is_not_fitted() -> None:
    spec = load_cost_terms_file()
    assert "hbm" not in FITTED
    assert spec.sources["terms.hbm"].grade == "derived"


@pytest.mark.slow
def test_shipped_hbm_is_xlas_median_share() -> None:
    shares = streaming_shares()
    assert len(shares) >= 12
    assert len({s.chip for s in shares}) >= 5
    # every program streams at a fraction of its device's bandwidth
    assert all(0.1 < s.share < 1.0 for s in shares)
    assert load_cost_terms_file().terms.hbm == pytest.approx(derived_hbm_share(shares), abs=5e-4)
