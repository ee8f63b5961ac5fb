"""Every notebook under notebooks/ runs top to bottom (nbclient, a fresh kernel), so
the notebooks cannot rot; and each one really calls the library and shows a result."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def test_the_three_notebooks_exist():
    assert [p.name for p in NOTEBOOKS] == [
        "01_quickstart.ipynb",
        "02_compare_generations.ipynb",
        "03_replay_hlo.ipynb",
    ]


#: The generations notebook runs the whole study (about a minute): slow, so the default
#: run stays under 10 minutes on a 2-core machine (tests/test_generations.py runs the
#: study's every system and workload by default).
SLOW = {"02_compare_generations"}


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, marks=pytest.mark.slow) if p.stem in SLOW else p for p in NOTEBOOKS],
    ids=lambda p: p.stem,
)
def test_notebook_runs(path):
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()  # raises CellExecutionError naming the cell on any error
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert all(c.get("outputs") is not None for c in code)
    assert "import tpusim" in "".join(c.source for c in code).replace(
        "from tpusim", "import tpusim"
    )
    last = code[-1]["outputs"]
    assert last, f"{path.name}: the last cell shows nothing"
    errors = [o for c in code for o in c["outputs"] if o.get("output_type") == "error"]
    assert not errors
