"""Hostile-input corpus, fourth round (issue 33, item 3): ``plan`` (primes, huge sizes,
odd dtypes, ``--confirm`` against ``--shortlist``, workers), the training keys in
scenarios (remat, context, offload, MoE: capacity_factor, routing_skew, experts, shared
experts), ``validate``/``calibrate --workloads``/``--serving`` with custom measurement
files (missing, duplicate and misspelled keys, zeros, negatives, NaN, inf, strings,
huge values) and serve's newer keys in scenarios.

Every case of ``tests/corpus/round4/cases.yaml`` runs ``tpusim`` in this process
(:mod:`corpus_inprocess`: a timer bounds it at 30 s) from a fresh temporary folder,
and must exit with its code, print exactly one stderr line matching its pattern (none
when it has no pattern) and never raise. Cases that succeed are checked against what
the input says: a serving profile named beside the scenario is the one loaded, a
plan confirms what it was asked to.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest
import yaml
from corpus_inprocess import run_in_process
from corpus_support import check_outcome, expand

CORPUS = Path(__file__).parent / "corpus" / "round4"
CASES = yaml.safe_load((CORPUS / "cases.yaml").read_text(encoding="utf-8"))
BASES = {
    "wl-": "wl-valid.yaml",
    "fig-": "fig-valid.yaml",
    "tr-": "tr-base.yaml",
    "sv-": "sv-base.yaml",
}


def test_case_ids_are_unique_and_the_corpus_is_large():
    ids = [case["id"] for case in CASES]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 130


def test_each_generated_file_differs_from_its_base_in_one_place():
    """A case isolates one hostile value: at most 3 lines changed from its base."""
    for path in CORPUS.glob("*.yaml"):
        base = next((b for prefix, b in BASES.items() if path.name.startswith(prefix)), None)
        if base is None or path.name == base or path.name == "wl-duplicate-id.yaml":
            continue
        ours = path.read_text().splitlines()
        diff = difflib.ndiff((CORPUS / base).read_text().splitlines(), ours)
        changed = [d for d in diff if d.startswith(("+ ", "- "))]
        assert 1 <= len(changed) <= 6, (path.name, changed)


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_corpus_case(case, tmp_path):
    argv = expand(case["argv"], CORPUS, tmp_path)
    check_outcome(case, argv, run_in_process(argv, tmp_path))


def test_a_server_profile_beside_the_scenario_is_the_one_loaded(tmp_path):
    """``server: srv-beside.yaml`` resolves against the scenario's folder, not the
    working directory: the run's resolved scenario names the file beside it."""
    argv = ["run", str(CORPUS / "sv-server-beside.yaml"), "--out", str(tmp_path / "o"), "--quiet"]
    done = run_in_process(argv, tmp_path)
    assert done.returncode == 0, done.stderr
    resolved = yaml.safe_load((tmp_path / "o" / "resolved.yaml").read_text())
    assert resolved["workloads"][0]["server"] == str(CORPUS / "srv-beside.yaml")


def test_plan_confirms_what_it_is_asked_to(tmp_path):
    """``--shortlist 1`` alone confirms that one layout (the default of 2 is lowered to
    the shortlist, not refused); ``--confirm`` above ``--shortlist`` is refused (a
    corpus case)."""
    argv = ["plan", "llama-3.1-8b", str(CORPUS / "t44.yaml"), "--global-batch", "16"]
    argv += ["--seq", "256", "--layers", "1", "--workers", "1", "--shortlist", "1", "--json"]
    done = run_in_process(argv, tmp_path)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    confirmed = [row for row in record["layouts"] if row["simulated_as"] == "run"]
    assert {row["fidelity"] for row in confirmed} == {record["confirmed_by"]}
    assert 1 <= len(confirmed) <= 2  # the one shortlisted, and the pure-FSDP reference
