"""Hostile-input corpus for ``tpusim plan`` (issue 33): a prime global batch, a
fragment longer than the model, the 134,400-chip Virgo system, packet fidelities and
a dtype the chip lacks are refused in one line with exit 2 within 30 s; two ranks of
one mesh print the flags that tell them apart.

Every case of ``tests/corpus/round3/plan/cases.yaml`` runs ``python -m tpusim`` in a
subprocess from a fresh temporary folder (as the earlier rounds do)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from corpus_support import check_outcome, expand, run_tpusim

CORPUS = Path(__file__).parent / "corpus" / "round3" / "plan"
CASES = yaml.safe_load((CORPUS / "cases.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_corpus_case(case, tmp_path):
    argv = expand(case["argv"], CORPUS, tmp_path)
    check_outcome(case, argv, run_tpusim(argv, tmp_path))


def test_two_ranks_of_one_mesh_print_what_tells_them_apart(capsys):
    """Rows that share mesh, remat and microbatches differ in a searched flag: the
    table shows it, so no two rows print identically."""
    from helpers import run

    argv = ["plan", "llama-3.1-8b", "ironwood-256", "--global-batch", "64", "--seq", "2048"]
    code, out, _ = run(capsys, *argv, "--layers", "2", "--shortlist", "2", "--confirm", "1")
    assert code == 0
    table = [line.split() for line in out.splitlines() if line[:1].isdigit()]
    assert "flags" in out and table
    rows = [" ".join(cells[1:]) for cells in table]
    assert len(set(rows)) == len(rows)
