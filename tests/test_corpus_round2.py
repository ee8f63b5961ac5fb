"""Hostile-input corpus, second round (issue 24): validate, calibrate, Dask, model
presets in scenarios and flags that were silently accepted.

Every case of ``tests/corpus/round2/cases.yaml`` runs ``tpusim`` in this
process (:mod:`corpus_inprocess`) from a fresh temporary folder, bounded at 30 s and
8 GiB of address space more than the test process maps (the same cases in
``python -m tpusim`` subprocesses are marked slow: issue 34),
and must exit with its code, print exactly one stderr line matching its pattern (none
when it has no pattern) and never a traceback. ``--plot`` into a missing folder must
also leave that folder uncreated.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from corpus_inprocess import Outcome, run_in_process
from corpus_support import ADDRESS_SPACE_BYTES, check_outcome, expand, run_tpusim

CORPUS = Path(__file__).parent / "corpus" / "round2"

CASES = yaml.safe_load((CORPUS / "cases.yaml").read_text(encoding="utf-8"))


def test_case_ids_are_unique():
    ids = [case["id"] for case in CASES]
    assert len(ids) == len(set(ids))


def _run_case(case: dict, tmp: Path) -> tuple[list[str], Outcome]:
    argv = expand(case["argv"], CORPUS, tmp)
    return argv, run_in_process(argv, tmp, extra_bytes=ADDRESS_SPACE_BYTES)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """Every case run once in this process (:mod:`corpus_inprocess`: 30 s and 8 GiB
    more address space each), by id, with its temporary folder."""
    tmps = {case["id"]: tmp_path_factory.mktemp(case["id"]) for case in CASES}
    return {c["id"]: (*_run_case(c, tmps[c["id"]]), tmps[c["id"]]) for c in CASES}


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_corpus_case(case, outcomes):
    argv, done, _ = outcomes[case["id"]]
    check_outcome(case, argv, done)


def test_plot_into_a_missing_folder_creates_nothing(outcomes):
    _, _, tmp = outcomes["serve-plot-missing-folder"]
    assert not (tmp / "missing").exists()


def test_nothing_is_written_by_a_refused_run(outcomes):
    for key in (
        "dask-scheduler-not-an-address",
        "dask-scheduler-refused",
        "calibrate-only-holdout",
    ):
        _, _, tmp = outcomes[key]
        assert list(tmp.iterdir()) == [], key


@pytest.mark.slow  # the same cases as `python -m tpusim` subprocesses (issue 34)
@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_corpus_case_in_a_subprocess(case, tmp_path):
    argv = expand(case["argv"], CORPUS, tmp_path)
    check_outcome(case, argv, run_tpusim(argv, tmp_path))
