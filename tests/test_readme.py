"""The README's and the docs' examples are real: the Quickstart commands name shipped
files, the example scenario (docs/run.md) validates and expands as the text says, and
the README maps every docs page."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
RUN_PAGE = (ROOT / "docs" / "run.md").read_text()


def test_quickstart_is_two_commands_and_runs_the_generations_study():
    block = re.search(r"## Quickstart\n\n```bash\n(.*?)```", README, re.S).group(1)
    lines = block.strip().splitlines()
    assert lines == [
        "pip install . && tpusim run scenarios/generations.yaml",
        "pip install -e '.[test]' && pytest",
    ]
    assert (ROOT / "scenarios" / "generations.yaml").exists()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install -e '.[test]' && pytest" in ci


def test_example_scenario_validates(tmp_path):
    from tpusim.study.scenario import Scenario

    block = re.search(r"```yaml\n(name: example\n.*?)```", RUN_PAGE, re.S).group(1)
    path = tmp_path / "example.yaml"
    path.write_text(block)
    scenario = Scenario(path)
    assert [s.name for s in scenario.systems] == ["v5e-pod", "v6e-pod"]
    sizes = [w.bytes for w in (p.workload for p in scenario.runs) if w.kind == "collective"]
    assert sizes == [4.0**k * 1024 for k in range(11)]  # 1 KiB .. 1 GiB, every 4x
    assert scenario.spec.assumptions.power_per_chip_W == {"v5e": 300.0}


def test_the_readme_and_the_mkdocs_nav_name_every_docs_page():
    import yaml

    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    mapped = re.findall(r"\]\(docs/([\w-]+\.md)\)", README)
    assert sorted(set(mapped) | {"index.md"}) == pages
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    assert sorted(page for entry in nav for page in entry.values()) == pages
    assert 100 <= len(README.splitlines()) <= 150
