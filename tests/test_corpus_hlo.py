"""The HLO corpus of issue 16 (``tests/corpus/hlo/cases.yaml``): every bad or extreme
``tpusim hlo`` input exits with its expected code and at most one stderr line matching
its pattern, never a traceback, within 30 s and 8 GiB of address space (two cases
at a time)."""

from __future__ import annotations

import importlib.util
import subprocess
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from corpus_support import ROOT, check_outcome, expand, run_tpusim

CORPUS = Path(__file__).resolve().parent / "corpus" / "hlo"
CASES = yaml.safe_load((CORPUS / "cases.yaml").read_text())


def _generators():
    spec = importlib.util.spec_from_file_location("hlo_corpus_generate", CORPUS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_case_ids_are_unique_and_files_small():
    ids = [case["id"] for case in CASES]
    assert len(ids) == len(set(ids))
    assert all(p.stat().st_size <= 20_000 for p in CORPUS.iterdir())


def _run(case: dict, tmp: Path) -> subprocess.CompletedProcess[str]:
    if "generate" in case:
        text = eval(case["generate"], vars(_generators()))
        (tmp / "generated.hlo.txt").write_text(text)
    return run_tpusim(expand(case["argv"], CORPUS, tmp), ROOT)


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, Future[subprocess.CompletedProcess[str]]]:
    """Every case started at once on a pool of 2 (the suite's two cores)."""
    pool = ThreadPoolExecutor(max_workers=2)
    runs = {c["id"]: pool.submit(_run, c, tmp_path_factory.mktemp(c["id"])) for c in CASES}
    yield runs
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_corpus_case(case, results):
    check_outcome(case, case["argv"], results[case["id"]].result())
