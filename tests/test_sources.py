"""Every source key cited in configs/ (and in the shipped scenarios' assumptions)
resolves to a title and, unless tpusim itself is the source, an https URL; the
``sources`` table of a system lists exactly the keys its chip and system files cite."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tpusim.config import load_system
from tpusim.report.sources import load_references, sources_frame

ROOT = Path(__file__).resolve().parent.parent
CITED = re.compile(r"\{\s*source:\s*([A-Za-z0-9_.-]+)\s*,")  # {source: KEY, grade: ...}
MEASURED = re.compile(r"^source:\s*\n\s+key:\s*([A-Za-z0-9_.-]+)", flags=re.M)


def cited_in(folder: Path) -> set[str]:
    """Source keys cited in every YAML file under ``folder`` (``source: KEY`` and the
    measurement files' ``source: {key: KEY}``), read as text so no file is missed."""
    keys: set[str] = set()
    for path in folder.rglob("*.yaml"):
        lines = path.read_text().splitlines()
        text = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
        keys |= set(CITED.findall(text)) | set(MEASURED.findall(text))
    return keys


def test_every_source_key_in_configs_and_scenarios_resolves():
    refs = load_references(ROOT / "configs")
    cited = cited_in(ROOT / "configs") | cited_in(ROOT / "scenarios")
    assert {"SB-tpus", "ZUB", "JAX", "HC25", "BH-2007"} <= cited
    missing = sorted(cited - set(refs))
    assert missing == []
    for key in cited:
        ref = refs[key]
        assert ref.title.strip(), key
        if ref.grade == "internal":
            assert ref.url == "", key
        else:
            assert ref.url.startswith("https://"), key


def test_a_reference_without_a_title_is_refused(tmp_path):
    (tmp_path / "sources.yaml").write_text("sources:\n  X: {url: 'https://x', grade: primary}\n")
    with pytest.raises(KeyError, match="'X' has no title"):
        load_references(tmp_path)


@pytest.mark.parametrize("name", ["tpu8i-pod", "tpu8t-virgo", "v5e-pod"])
def test_sources_table_lists_exactly_the_cited_keys(name):
    system = load_system(name)
    parts = [p for p in (system, system.pod) if p is not None]
    expected: dict[str, set[str]] = {}
    for part in parts:
        for owner, sources in ((part.chip.name, part.chip.sources), (part.name, part.spec.sources)):
            for path, src in sources.items():
                expected.setdefault(src.source, set()).add(f"{owner}:{path}")
    frame = sources_frame([system])
    assert list(frame["key"]) == sorted(expected)
    for row in frame.itertuples(index=False):
        assert set(row.cited_by.split("; ")) == expected[row.key]
        assert row.title and row.grade != "unknown"
