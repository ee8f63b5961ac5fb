"""The closed-form stages over worker processes against the same stages in one
process (a second run of the sequential code: :func:`prune` then one screen per
layout): the same report, in the same order, and the same screens; the steps a
worker's layouts rebuild are the builder's."""

from __future__ import annotations

import pytest

from tpusim.config.loader import load_system
from tpusim.planner import PlanRequest
from tpusim.planner.memory import prune
from tpusim.planner.search import closed_form, generated, screen_all
from tpusim.planner.split import mesh_parts
from tpusim.program.builders import prepare_training
from tpusim.topology import build_topology

SMALL = PlanRequest("llama-3.1-8b", "ironwood-256", 64, 2048, overrides={"layers": 6})
TIGHT = PlanRequest("llama-3.1-70b", "ironwood-256", 64, 32768, overrides={"layers": 4})
"""Some layouts rejected, some too big for HBM, thousands that fit."""


@pytest.fixture(scope="module")
def tight_alone():
    """TIGHT's report and screens, sequentially."""
    system = load_system(TIGHT.system)
    topology = build_topology(system)
    found, base = generated(TIGHT, system, topology)
    alone = prune(found, base, system.chip)
    return system, topology, base, alone, screen_all(alone, system, topology)


def _report_key(report):
    def rows(fitted):
        return [(f.layout, f.peak_hbm_bytes, f.capacity_bytes) for f in fitted]

    counts = (report.considered, report.rejected, report.first_rejection)
    return counts, rows(report.fitting), rows(report.too_big)


@pytest.mark.parametrize("workers", [1, 2])
def test_workers_give_the_report_and_screens_of_one_process(tight_alone, workers):
    system, topology, base, alone, alone_screens = tight_alone
    report, screens = closed_form(TIGHT.model_copy(update=dict(workers=workers)), system, topology)
    assert report.rejected > 0 and report.too_big and len(report.fitting) > 10
    assert _report_key(report) == _report_key(alone)
    assert [screens[id(f)] for f in report.fitting] == [alone_screens[id(f)] for f in alone.fitting]
    for fitted in report.fitting[::7]:
        assert fitted.step == prepare_training(**(base | fitted.layout.fields()))


def test_mesh_parts_keep_each_mesh_whole_and_cover_every_layout():
    system = load_system(SMALL.system)
    found, _ = generated(SMALL, system, build_topology(system))
    parts = mesh_parts(found, 2)
    assert len(parts) == 2
    assert sorted(i for part in parts for i in part) == list(range(len(found)))
    owner = {}
    for k, part in enumerate(parts):
        for i in part:
            assert owner.setdefault(tuple(found[i].mesh.items()), k) == k
    assert mesh_parts(found[:1], 4) == [[0]]
