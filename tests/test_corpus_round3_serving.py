"""Hostile-input corpus, third round, serving (issue 33): ``validate --serving`` and
``calibrate --serving`` with custom figure files, and ``serve --server``.

Every case of ``tests/corpus/round3/serving/cases.yaml`` runs ``tpusim`` in this
process (:mod:`corpus_inprocess`) from a fresh temporary folder, bounded at 30 s and
8 GiB of address space more than the test process maps (the same cases in
``python -m tpusim`` subprocesses are marked slow: issue 34), and must exit with its
code, print exactly one stderr line matching its pattern (none when it has no
pattern) and never a traceback. The profile ``calibrate --serving`` writes
loads back as a profile whose fitted terms name the figure they were fitted on.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
import yaml
from corpus_inprocess import Outcome, run_in_process
from corpus_support import ADDRESS_SPACE_BYTES, check_outcome, expand, run_tpusim

CORPUS = Path(__file__).parent / "corpus" / "round3" / "serving"

CASES = yaml.safe_load((CORPUS / "cases.yaml").read_text(encoding="utf-8"))


def test_case_ids_are_unique():
    ids = [case["id"] for case in CASES]
    assert len(ids) == len(set(ids))


def test_each_bad_file_differs_from_the_valid_one_in_one_place():
    valid = (CORPUS / "valid.yaml").read_text().splitlines()
    assert [case for case in CASES if "{dir}/valid.yaml" in case["argv"]]
    for case in CASES:
        files = [a for a in case["argv"] if a.startswith("{dir}/") and "profile" not in a]
        for name in files:
            if name.endswith(("valid.yaml", "duplicate-id.yaml")):
                continue
            lines = (CORPUS / name.removeprefix("{dir}/")).read_text().splitlines()
            diff = difflib.ndiff(valid, lines)
            changed = [d for d in diff if d.startswith(("+ ", "- "))]
            assert 1 <= len(changed) <= 3, (name, changed)


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


def test_a_refused_out_writes_nothing(outcomes):
    _, _, tmp = outcomes["out-without-fit"]
    assert not (tmp / "servers").exists()


def test_calibrate_serving_writes_a_profile_fitted_on_the_fit_figure(outcomes):
    from tpusim.serving.servers import load_server

    argv, done, tmp = outcomes["calibrate-serving-writes-a-profile"]
    record = check_outcome({"exit": 0}, argv, done)
    written = tmp / "servers" / "vllm-tpu-torchxla.yaml"
    assert record["wrote"] == [str(written)]
    profile = load_server(str(written))
    terms = profile.terms
    assert profile.measured_chips == ("v6e",)
    assert terms.host_time.fit_on == ("fig-8b",)
    assert terms.hbm_efficiency.grade == "calibrated"
    fitted = record["fitted"][0]
    assert terms.host_time.value == pytest.approx(fitted["host_s"], rel=1e-3)
    assert terms.hbm_efficiency.value == fitted["hbm_efficiency"]
    # the sampler passes were not fitted: they keep the shipped profile's grade
    assert terms.sampling_passes.grade == "assumption"


@pytest.mark.slow  # the same cases as `python -m tpusim` subprocesses (issue 34)
@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_corpus_case_in_a_subprocess(case, tmp_path):
    argv = expand(case["argv"], CORPUS, tmp_path)
    check_outcome(case, argv, run_tpusim(argv, tmp_path))
