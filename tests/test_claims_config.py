"""The vendor claims are data (configs/claims/*.yaml): a claims file of one's own is
evaluated by the same checks, its mistakes are one-line errors with file and line,
and the code that evaluates claims names no shipped system, chip or price."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tpusim.config import configs_dir
from tpusim.errors import ConfigError
from tpusim.study.claim_specs import load_claims_file, shipped_claims
from tpusim.study.claims import CHECKS, claim_rows

PACKAGE = Path(__file__).resolve().parent.parent / "tpusim"

TOY = """\
name: toy
ratio_margin: 0.9
claims:
  - check: diameter
    claim: "two 16x16 tori have the same diameter"
    source: "a closed form"
    baseline: v5e-pod
    subject: v6e-pod
    claimed_hops: [16, 16]
    figure: "{baseline} {baseline_hops}, {subject} {subject_hops}"
    assumptions: "wraparound on both axes"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "claims.yaml"
    path.write_text(text)
    return path


def test_a_claims_file_of_ones_own_is_evaluated_by_the_same_checks(tmp_path):
    """A 16x16 torus with wraparound: 16/2 + 16/2 = 16 hops on either pod."""
    (row,) = claim_rows(files=(load_claims_file(write(tmp_path, TOY)),))
    assert row == {
        "claim": "two 16x16 tori have the same diameter",
        "source": "a closed form",
        "tpusim": "v5e-pod 16, v6e-pod 16",
        "assumptions": "wraparound on both axes",
        "verdict": "holds",
        "interval": "exact: hop counts of the topologies",
        "reading": "",
    }
    wrong = TOY.replace("claimed_hops: [16, 16]", "claimed_hops: [16, 8]")
    (row,) = claim_rows(files=(load_claims_file(write(tmp_path, wrong)),))
    assert row["verdict"] == "does not hold"


@pytest.mark.parametrize(
    ("change", "line", "message"),
    [
        (("check: diameter", "check: telepathy"), 4, r"claims\[0\]: .*'diameter'"),
        (("claimed_hops: [16, 16]", "claimed_hops: [16, x]"), 9, r"claims\[0\]\.claimed_hops"),
        (("{subject_hops}", "{subject_hop}"), 4, "unknown field 'subject_hop'"),
        (("ratio_margin: 0.9", "ratio_margin: 2"), 2, "ratio_margin: "),
    ],
)
def test_a_bad_claims_file_is_one_error_with_file_and_line(tmp_path, change, line, message):
    path = write(tmp_path, TOY.replace(*change))
    with pytest.raises(ConfigError, match=rf"claims\.yaml:{line} .*{message}"):
        load_claims_file(path)


def test_a_graded_source_must_name_a_value_of_the_file(tmp_path):
    path = write(tmp_path, TOY + "sources:\n  prices: {source: none, grade: assumption}\n")
    with pytest.raises(ConfigError, match=r"claims\.yaml:\d+ sources\.prices: names 'prices'"):
        load_claims_file(path)


def test_the_shipped_claims_use_registered_checks_and_every_check_is_used():
    used = {claim.check for file in shipped_claims() for claim in file.claims}
    assert used == set(CHECKS.names())
    assert [f.name for f in shipped_claims()] == ["tpu8"]


def test_the_claims_code_names_no_shipped_system_chip_or_price():
    names = {
        p.stem for folder in ("systems", "chips") for p in (configs_dir() / folder).glob("*.yaml")
    }
    for rel in ("study/claims.py", "study/claim_specs.py", "serving/perf_per_dollar.py"):
        text = (PACKAGE / rel).read_text()
        found = sorted(n for n in names if re.search(rf"\b{re.escape(n)}\b", text))
        assert found == [], (rel, found)
        assert not re.search(r"\b\d+\.\d+\s*(USD|\$)", text), rel


STATED = """\
name: stated
ratio_margin: 0.9
claims:
  - check: onchip_speedup
    claim: "an engine is faster"
    source: "a test"
    system: tpu8i-1024
    op: all-reduce
    engines: [tensorcore, cae]
    bytes: 1024
    verdict: partly
    figure: "{ratio}"
    assumptions: "none"
"""


def test_a_stated_verdict_must_be_one_of_the_list(tmp_path):
    """A claim whose verdict the file states (an input of the cost model) takes one of
    the five verdicts of issue 43; "partly" is not one."""
    with pytest.raises(ConfigError, match=r"claims\.yaml:11 claims\[0\]\.verdict: .*'cannot tell'"):
        load_claims_file(write(tmp_path, STATED))
