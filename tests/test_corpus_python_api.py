"""The Python API corpus (issue 45, item 7; the table and its oracle are in
:mod:`corpus_python_api`): every call of ``tpusim.Session`` and of the objects it
takes ends as its row says, a plausible result or one tpusim error (InputError, or a
ConfigError for a bad system file) with its message, never another exception, a hang
(bounded at 20 s) or a silent acceptance.

Counts of the 84 rows at 5117d08 (before issue 45): 44 tracebacks (AttributeError,
TypeError, ValueError, AlgorithmError, UnitError), 2 hangs over 10 s, 6 silent
acceptances, 3 implausible results (up to 1.04e289 s), 2 valid calls refused, 27 clean.
After: 84 clean (``python tests/corpus_python_api.py`` prints them)."""

from __future__ import annotations

import pytest
from corpus_python_api import T44, cases, outcome

CASES = cases()


@pytest.fixture(scope="module")
def session():
    import tpusim

    return tpusim.Session(str(T44))


def test_the_corpus_is_large_and_its_ids_unique():
    ids = [case[0] for case in CASES]
    assert len(ids) >= 60 and len(set(ids)) == len(ids)


@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_python_api_case(case, session):
    kind, detail = outcome(case, session)
    assert kind == "clean", detail
