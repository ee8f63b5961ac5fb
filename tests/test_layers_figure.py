"""The README's architecture picture shows the layers the code-shape test enforces, and
the README's Architecture section shows that picture and names every unit."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

from test_code_shape import LAYERS, PACKAGE

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _tool():
    spec = importlib.util.spec_from_file_location(
        "layers_figure", ROOT / "tools" / "layers_figure.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("layers_figure", module)
    spec.loader.exec_module(module)
    return module


def test_the_figure_reads_the_code_shape_layers():
    assert _tool().layers() == LAYERS


def test_the_figure_draws_each_layer_in_its_band_lowest_at_the_bottom():
    fig = _tool().draw()
    texts = [t for t in fig.axes[0].texts if t.get_gid()]
    rows: dict[float, list[tuple[float, str]]] = {}
    for text in texts:
        x, y = text.get_position()
        rows.setdefault(y, []).append((x, text.get_gid()))
    drawn = [tuple(unit for _, unit in sorted(rows[y])) for y in sorted(rows)]
    assert drawn == LAYERS


def test_unit_labels_tell_packages_from_modules():
    tool = _tool()
    for unit in (u for layer in LAYERS for u in layer):
        is_package = (PACKAGE / unit / "__init__.py").is_file()
        assert tool.unit_label(unit) == (f"{unit}/" if is_package else f"{unit}.py")
        assert (PACKAGE / tool.unit_label(unit)).exists()


def _architecture_section() -> str:
    match = re.search(r"\n## Architecture\n(.*?)\n## ", README, re.S)
    assert match, "README has no '## Architecture' section"
    return match.group(1)


def test_the_readme_architecture_section_follows_the_quickstart_and_shows_the_figure():
    headings = re.findall(r"^## (.+)$", README, re.M)
    assert headings[headings.index("Quickstart") + 1] == "Architecture"
    assert headings.count("Architecture") == 1
    assert "docs/layers.png" in _architecture_section()
    assert (ROOT / "docs" / "layers.png").is_file()


def test_the_readme_architecture_section_names_every_unit_in_layer_order():
    section = _architecture_section()
    lines = [line for line in section.splitlines() if re.match(r"^\d+\. ", line)]
    assert len(lines) == len(LAYERS)
    for line, layer in zip(lines, LAYERS, strict=True):
        named = re.findall(r"`([\w.]+?)(?:/|\.py)?`", line.split(":")[0])
        assert tuple(named) == layer, line


def test_the_package_docstring_lists_the_layers():
    import tpusim

    items = re.findall(r"^(\d+)\. (.*)$", tpusim.__doc__, re.M)
    assert [int(rank) for rank, _ in items] == list(range(len(LAYERS)))
    for (_, text), layer in zip(items, LAYERS, strict=True):
        named = re.findall(r":mod:`\.(\w+)`|``(__main__)``|(this module)", text)
        units = tuple("__init__" if m[2] else m[0] or m[1] for m in named)
        assert sorted(units) == sorted(layer), text
