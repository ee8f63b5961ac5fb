"""Hostile-input corpus, second round (issue 24): validate, calibrate, Dask, model
presets in scenarios and flags that were silently accepted.

Every case of ``tests/corpus/round2/cases.yaml`` runs ``python -m tpusim`` in a
subprocess from a fresh temporary folder, bounded at 30 s and 8 GiB of address space,
and must exit with its code, print exactly one stderr line matching its pattern (none
when it has no pattern) and never a traceback. ``--plot`` into a missing folder must
also leave that folder uncreated.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from corpus_support import check_outcome, expand, run_tpusim

CORPUS = Path(__file__).parent / "corpus" / "round2"

CASES = yaml.safe_load((CORPUS / "cases.yaml").read_text(encoding="utf-8"))


def test_case_ids_are_unique():
    ids = [case["id"] for case in CASES]
    assert len(ids) == len(set(ids))


def _run_case(case: dict, tmp: Path) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    argv = expand(case["argv"], CORPUS, tmp)
    return argv, run_tpusim(argv, tmp)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """Every case run once, two at a time (the machine's cores), by id, with its
    temporary folder."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        tmps = {case["id"]: tmp_path_factory.mktemp(case["id"]) for case in CASES}
        futures = {key: pool.submit(_run_case, case, tmps[key]) for key, case in
                   ((c["id"], c) for c in CASES)}  # fmt: skip
        return {key: (*future.result(), tmps[key]) for key, future in futures.items()}


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
