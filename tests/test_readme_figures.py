"""The documentation's figure blocks (in ``docs/*.md``) match a fresh run (issue 24), as
written by ``tools/readme_figures.py``.

The validation table is recomputed here in every test run (``tpusim validate``'s
own functions, about 10 s); the claims table (15 s) and the serving table (a minute)
are compared under ``-m slow``. After numbers move, ``python tools/readme_figures.py``
rewrites every block in one command.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location(
        "readme_figures", ROOT / "tools" / "readme_figures.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


figures = _tool()


def test_every_block_has_its_markers_in_one_page():
    texts = {page: page.read_text(encoding="utf-8") for page in figures.pages()}
    for name in figures.RENDER:
        holders = [p for p, text in texts.items() if figures.block_pattern(name).search(text)]
        assert len(holders) == 1, (name, holders)
        assert holders[0].parent == ROOT / "docs", (name, holders)
        assert figures.read_block(name).strip(), name


def test_validation_block_matches_a_fresh_run():
    from tpusim.validation.measurements import load_measurements
    from tpusim.validation.validate import summary, validate

    fresh = figures.validation_block(summary(validate(load_measurements())))
    assert figures.read_block("validation") == fresh, (
        "docs/validation.md's validation table is stale: run python tools/readme_figures.py"
    )


def test_validation_block_renders_by_hand():
    part = {"total": 4, "within_10pct": 3, "median_abs_error": 0.0234}
    record = {
        **part,
        "fit": part,
        "holdout": {"total": 0, "within_10pct": 0, "median_abs_error": 0.0},
    }
    lines = figures.validation_block(record).splitlines()
    assert lines[2] == "| all | 4 | 3 (75%) | 2.3% |"
    assert lines[4] == "| holdout | 0 | 0 (0%) | 0.0% |"


def test_serving_block_renders_by_hand():
    row = {
        "capacity_rate_per_s_per_chip": 7.684,
        "tokens_per_s_per_chip": 1243.4,
        "energy_per_million_tokens_J": 870_000.0,
        "cost_per_million_tokens_usd": 1.0612,
    }
    results = [{"system": "tpu8i-pod", "workload": "llama-70b-fp8", **row}]
    lines = figures.serving_block({"results": results}).splitlines()
    assert lines[0] == "| | 8i | Ironwood | 8t |"
    assert lines[2] == "| Llama 3.1 70B: capacity (req/s per chip) | 7.68 | n/a | n/a |"
    assert lines[3] == "| Llama 3.1 70B: output tokens/s per chip at capacity | 1,243 | n/a | n/a |"
    assert lines[4] == "| Llama 3.1 70B: energy per M output tokens (MJ) | 0.87 | n/a | n/a |"


def test_replace_block_keeps_the_rest():
    text = "a\n<!-- figures:claims -->\nold\n<!-- /figures:claims -->\nb\n"
    assert figures.replace_block(text, "claims", "new") == (
        "a\n<!-- figures:claims -->\nnew\n<!-- /figures:claims -->\nb\n"
    )
    with pytest.raises(KeyError):
        figures.current_block("no markers", "claims")
    with pytest.raises(KeyError):
        figures.page_of({ROOT / "a.md": "no markers"}, "claims")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["claims", "serving"])
def test_slow_blocks_match_a_fresh_run(name):
    fresh = figures.RENDER[name](figures.run_json(name))
    assert figures.read_block(name) == fresh, (
        f"the docs' {name} block is stale: run python tools/readme_figures.py --only {name}"
    )
