"""Fixtures shared by several test files (issue 34: one computation, not one per file)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def claims_table():
    """The shipped vendor-claims table without a run's rows (``tpusim claims``): about
    a minute of CPU (the 1,024-chip systems' algorithms, two pods' training steps),
    computed once per session for tests/test_claims.py and tests/test_generations.py.
    Tests read it; none may modify it."""
    from tpusim.study.claims import vendor_claims

    return vendor_claims()


@pytest.fixture(scope="session")
def demo_by_name(tmp_path_factory):
    """``tpusim run demo --json --quiet --jobs 1`` (the shipped demo, by name) run once,
    in-process, from an empty folder that is not the repository: (the JSON record, that
    folder). Its outputs are in ``out/demo`` there. Read by tests/test_scenario.py and
    tests/test_cli_ux.py; none may modify the folder."""
    import contextlib
    import io
    import json
    import os

    from tpusim.cli import main

    folder = tmp_path_factory.mktemp("elsewhere")
    here, buf = os.getcwd(), io.StringIO()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(buf):
            code = main(["run", "demo", "--json", "--quiet", "--jobs", "1"])
    finally:
        os.chdir(here)
    assert code == 0
    return json.loads(buf.getvalue()), folder


def pytest_collection_modifyitems(config, items):
    """Tests marked ``xla`` (``tpusim compile``, which needs JAX and libtpu) are skipped
    when the xla extra is not installed; ``-m xla`` selects them where it is."""
    from tpusim.compile import has_xla

    if has_xla():
        return
    skip = pytest.mark.skip(reason="needs the xla extra: pip install -e '.[xla]'")
    for item in items:
        if "xla" in item.keywords:
            item.add_marker(skip)
