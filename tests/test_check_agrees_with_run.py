"""``tpusim check`` agrees with ``tpusim run`` on every corpus scenario (issue 33, Must
hold): check says "no problems" if and only if run does not fail on bad input (exit 2),
and when both refuse a scenario they say the same line.

Every scenario file of every round (``tests/corpus/**``: a YAML mapping with
``systems`` and ``workloads``) is checked in this process (:mod:`corpus_inprocess`,
30 s each) from a fresh temporary folder. Where a corpus case already runs it as it
is (``run {dir}/NAME`` with only ``--out``, ``--quiet``, ``--json``), that case's
expected exit and line (which its own test holds run to) are what check must agree
with; every other scenario is run here too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from corpus_inprocess import run_in_process
from corpus_support import check_outcome

CORPUS = Path(__file__).parent / "corpus"


def _is_scenario(path: Path) -> bool:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError, ValueError):
        return False  # a hostile file (an alias bomb, bad YAML): not a scenario to run
    return isinstance(data, dict) and "workloads" in data and "systems" in data


def _small(path: Path) -> bool:
    return path.stat().st_size < 100_000


SCENARIOS = sorted(
    str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.yaml") if _small(p) and _is_scenario(p)
)


def _plain_run_cases() -> dict[str, dict]:
    """Scenario (relative to CORPUS) -> the corpus case that runs it unchanged."""
    out = {}
    for table in CORPUS.rglob("cases.yaml"):
        for case in yaml.safe_load(table.read_text(encoding="utf-8")):
            argv = [str(a) for a in case["argv"]]
            if argv[0] != "run" or not argv[1].startswith("{dir}/"):
                continue
            if set(case) - {"id", "argv", "exit", "stderr", "json"}:
                continue  # run under other conditions (stdout to a full disk)
            rest = [a for a in argv[2:] if a not in ("--quiet", "--json")]
            if len(rest) == 2 and rest[0] == "--out" and rest[1].startswith("{tmp}"):
                name = str((table.parent / argv[1].removeprefix("{dir}/")).relative_to(CORPUS))
                out[name] = case
    return out


RUN_CASES = _plain_run_cases()


def test_every_round_has_scenarios():
    rounds = {Path(name).parts[0] for name in SCENARIOS}
    assert {"inputs", "outputs", "round2", "round3", "round4"} <= rounds
    assert len(SCENARIOS) >= 60


@pytest.mark.parametrize("name", SCENARIOS)
def test_check_passes_iff_run_does_not_fail_on_bad_input(name, tmp_path):
    path = str(CORPUS / name)
    check = run_in_process(["check", path], tmp_path)
    assert check.returncode in (0, 2), check.stderr
    if check.returncode == 0:
        assert "no problems" in check.stdout
    case = RUN_CASES.get(name)
    if case is not None:  # its own corpus test holds run to this
        assert (check.returncode == 2) == (case["exit"] == 2), (check.stderr, case)
        if check.returncode == 2:
            check_outcome(case, ["check", path], check)
        return
    run = run_in_process(["run", path, "--out", str(tmp_path / "o"), "--quiet"], tmp_path)
    assert (check.returncode == 2) == (run.returncode == 2), (check.stderr, run.stderr)
    if check.returncode == 2:
        assert run.stderr.splitlines() == check.stderr.splitlines()
