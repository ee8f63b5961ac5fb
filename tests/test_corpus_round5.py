"""Hostile-input corpus, fifth round (issue 45): faults around every kind that
simulates a network (applied) or none (refused by name), names that would write outside
the output folder, the shared limits in every command (packet work of a whole program
and of a schedule's hops, trace bytes, model sizes), cross-validation folds that fit
nothing, and accepted nonsense (a profile for an unknown chip, flags that do nothing, a
zero SLO, collectives on one chip).

Every case of ``tests/corpus/round5/cases.yaml`` runs ``tpusim`` in this process
(:mod:`corpus_inprocess`: a timer bounds it at 30 s) from a fresh temporary folder and
must exit with its code and print exactly the one stderr line its pattern allows; no
case may write outside that folder (``name-*``: nothing at ``/tmp/tpusim-r5-escaped``).
The Python API has its own corpus (``tests/test_corpus_python_api.py``).

Counts at 5117d08 (before issue 45; each case run as a subprocess under the 30 s and
8 GiB bounds): 17 silent acceptances (two of them writing outside the folder), 3 hangs
(a 1-byte-packet training step, a one-shot all-reduce at packet fidelity, ``plan`` of
2^31 layers), 1 traceback (2^31 experts), 1 wrong exit code (``--trace /dev/zero``: out
of memory, exit 1), and the faults around a training step accepted but ignored (exit 0,
the healthy step time). After: 25 clean."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from corpus_inprocess import run_in_process
from corpus_support import check_outcome, expand

CORPUS = Path(__file__).parent / "corpus" / "round5"
CASES = yaml.safe_load((CORPUS / "cases.yaml").read_text(encoding="utf-8"))


def test_case_ids_are_unique():
    ids = [case["id"] for case in CASES]
    assert len(ids) == len(set(ids)) and len(ids) >= 20


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_corpus_case(case, tmp_path):
    argv = expand(case["argv"], CORPUS, tmp_path)
    check_outcome(case, argv, run_in_process(argv, tmp_path))
    assert not Path("/tmp/tpusim-r5-escaped").exists()
    assert not (tmp_path.parent / "escaped").exists()
