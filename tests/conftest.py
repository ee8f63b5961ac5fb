"""Fixtures shared by several test files (issue 34: one computation, not one per file)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def claims_table():
    """The shipped vendor-claims table without a run's rows (``tpusim claims``): about
    a minute of CPU (the 1,024-chip systems' algorithms, two pods' training steps),
    computed once per session for tests/test_claims.py and tests/test_generations.py.
    Tests read it; none may modify it."""
    from tpusim.study.claims import vendor_claims

    return vendor_claims()
