"""Hostile-input corpus for config, units, YAML, systems, scenarios and CLI flags (issue 16).

Every case of ``tests/corpus/inputs/cases.yaml`` runs ``tpusim`` in this process
(:mod:`corpus_inprocess`), bounded at 30 s and 8 GiB of address space more than the
test process maps, and must exit with its code,
print exactly one stderr line matching its pattern, never a traceback, and valid JSON
on stdout when ``--json`` succeeds. Big or unusual members (an 11 MB file, a symlink
loop, a sweep of a million values) are written at test time by the generators here.
The same cases in subprocesses (``python -m tpusim``, as a user runs it) are marked
slow (issue 34: the interpreter start-ups were two minutes of the default run).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from corpus_inprocess import run_in_process
from corpus_support import ADDRESS_SPACE_BYTES, check_outcome, expand, run_tpusim

CORPUS = Path(__file__).parent / "corpus" / "inputs"

CASES = yaml.safe_load((CORPUS / "cases.yaml").read_text(encoding="utf-8"))


def _system(extra: str = "") -> str:
    return f"name: gen\nchip: v5e\ntopology: {{kind: torus, dims: [4]}}\n{extra}"


def big_file(tmp: Path) -> None:
    """11,000,000 bytes: over MAX_YAML_BYTES before a byte is parsed."""
    line = "# " + "x" * 97 + "\n"
    (tmp / "big.yaml").write_text(_system() + line * ((11_000_000 - len(_system())) // 100))
    size = (tmp / "big.yaml").stat().st_size
    with (tmp / "big.yaml").open("a") as handle:
        handle.write("#" * (11_000_000 - size - 1) + "\n")


def many_keys(tmp: Path) -> None:
    """150,000 keys (under 3 MB): over MAX_YAML_NODES without any alias."""
    keys = "".join(f"  k{i}: {i}\n" for i in range(150_000))
    (tmp / "many.yaml").write_text(_system("extra:\n" + keys))


def _deep(tmp: Path, depth: int) -> None:
    (tmp / "deep.yaml").write_text(
        "name: deep\nchip: v5e\ntopology:\n  kind: torus\n  dims: "
        + "[" * depth
        + "]" * depth
        + "\n"
    )


def deep_nesting(tmp: Path) -> None:
    """dims nested 500 lists deep: over MAX_YAML_DEPTH."""
    _deep(tmp, 500)


def deeper_nesting(tmp: Path) -> None:
    """dims nested 5,000 lists deep: over the YAML parser's own limit."""
    _deep(tmp, 5000)


def symlink_loop(tmp: Path) -> None:
    (tmp / "loop.yaml").symlink_to("loop.yaml")


def not_utf8(tmp: Path) -> None:
    """Latin-1 on line 2."""
    (tmp / "latin1.yaml").write_bytes(b"name: gen\ndescription: caf\xe9\n")


def _sweep_scenario(name: str, count: int) -> str:
    values = ", ".join(str(k + 1) for k in range(count))
    return (
        f"name: {name}\nsystems: [v5e-pod]\nworkloads:\n"
        f"  - name: ar\n    kind: collective\n    op: all-reduce\n    bytes: 1 MiB\n"
        f"    sweep: {{bytes: [{values}]}}\n"
    )


def sweep_list(tmp: Path) -> None:
    """A sweep list of 1,500 sizes (about 15 kB): over MAX_SWEEP_POINTS."""
    (tmp / "sweep-list.yaml").write_text(_sweep_scenario("sweep-list", 1500))


def sweep_list_million(tmp: Path) -> None:
    """A sweep list of 10^6 sizes (under 10 MB): refused by the node limit first."""
    (tmp / "sweep-million.yaml").write_text(_sweep_scenario("sweep-million", 1_000_000))


_MAKERS = [big_file, many_keys, deep_nesting, deeper_nesting, symlink_loop, not_utf8]
GENERATORS: dict[str, Callable[[Path], None]] = {
    f.__name__: f for f in [*_MAKERS, sweep_list, sweep_list_million]
}


def test_case_ids_are_unique():
    ids = [case["id"] for case in CASES]
    assert len(ids) == len(set(ids))


def test_committed_members_are_small():
    assert all(p.stat().st_size <= 20_000 for p in CORPUS.iterdir())


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_corpus_case(case, tmp_path):
    generate = case.get("generate")
    if generate is not None:
        GENERATORS[generate](tmp_path)
    argv = expand(case["argv"], CORPUS, tmp_path)
    check_outcome(case, argv, run_in_process(argv, tmp_path, extra_bytes=ADDRESS_SPACE_BYTES))


@pytest.mark.slow  # 65 interpreter start-ups: the same cases as above, in subprocesses
@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_corpus_case_in_a_subprocess(case, tmp_path):
    generate = case.get("generate")
    if generate is not None:
        GENERATORS[generate](tmp_path)
    argv = expand(case["argv"], CORPUS, tmp_path)
    check_outcome(case, argv, run_tpusim(argv, tmp_path))
